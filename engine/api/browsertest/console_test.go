package browsertest

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/schedule"
)

// consoleRules is the rule set of the console test: one scheduled rule
// that the page can fire by hand.
var consoleRules = enginetest.Rules{SetHash: "9f2c51d0a4b7e3c8", List: []engine.Rule{
	{Name: "daily_report", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Channel: "wecom_sales"}}}

// consolePeople is the people data of the console test.
type consolePeople map[string]string

func (p consolePeople) DisplayName(id string) string { return p[id] }
func (p consolePeople) Find(q string, limit int) []string {
	var out []string
	for _, id := range []string{"zhangsan", "lisi", "wangwu", "lina"} {
		if (id == q || p[id] == q) && len(out) < limit {
			out = append(out, id)
		}
	}
	return out
}

func (b *browser) eval(t *testing.T, js string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	require.NoError(t, err, js)
	return s
}

// shot saves a full-page screenshot where HERALD_SCREENSHOT_DIR says (a
// CI artifact), else in the test's temp dir, and logs the path.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := os.Getenv("HERALD_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	out := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(out, png, 0o644))
	t.Logf("screenshot: %s", out)
}

// consoleFixture is the populated fixture with a scheduled rule, people
// names, a manual fire, schedules and a 李娜 whose report failed.
func consoleFixture(t *testing.T) (*fixture, *httptest.Server) {
	f := setup(t)
	cals := calendar.NewRegistry()
	f.api = api.New(api.Config{FSM: f.fsm, Replicator: f.rep, StatusFunc: testStatus, Rules: consoleRules,
		NowFunc: fixtureNow,
		People:  consolePeople{"zhangsan": "张三", "lisi": "李四", "wangwu": "王五", "lina": "李娜"},
		ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
			return schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone}, cals)
		}})
	f.populate(t)
	// 李娜's report failed twice, then for good.
	key := engine.RunKey("daily_report", t0)
	id := engine.DeliveryID(key, "lina")
	f.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{{ID: id, Recipient: "lina",
		Channel: "wecom_sales", Payload: json.RawMessage(`{"msgtype":"markdown","content":"**2026-12-01 日报** 李娜：请于今天 18:00 前提交"}`),
		Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour), Retry: []time.Duration{time.Minute}}}})
	for i, st := range []heraldtype.Status{heraldtype.StatusRetryable, heraldtype.StatusRetryable} {
		at := t0.Add(time.Duration(i*2+1) * time.Minute)
		c := f.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{id}, Leader: "n1", Now: at, Timeout: 30 * time.Second}).(engine.ClaimResult)
		require.Len(t, c.Claimed, 1)
		f.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: at.Add(time.Second), Results: []engine.Settlement{
			{ID: id, Seq: c.Claimed[0].Seq, Status: st, Code: "-1", Error: "system busy, try again later"}}})
	}
	d, _ := f.fsm.Delivery(id)
	require.Equal(t, engine.StateFailed, d.State)
	srv := httptest.NewServer(f.api)
	t.Cleanup(srv.Close)
	return f, srv
}

// playLeader plans the manual run the page fired and sends it to two
// people, as the leader would.
func playLeader(t *testing.T, f *fixture) {
	var run *engine.Run
	for _, r := range f.fsm.Runs(nil) {
		if r.Manual {
			run = r
		}
	}
	require.NotNil(t, run, "the page's fire started a manual run")
	var nds []engine.NewDelivery
	for _, who := range []string{"zhangsan", "lina"} {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(run.Key, who), Recipient: who, Channel: "wecom_sales",
			Payload: json.RawMessage(`{"msgtype":"text","content":"补发日报"}`), Priority: heraldtype.PriorityNormal, NotBefore: run.Slot, Deadline: run.Slot.Add(time.Hour)})
	}
	f.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: run.Key, Deliveries: nds})
	f.apply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: run.Key, Now: run.Slot})
	c := f.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{nds[0].ID, nds[1].ID}, Leader: "n1", Now: run.Slot, Timeout: time.Minute}).(engine.ClaimResult)
	var res []engine.Settlement
	for _, cl := range c.Claimed {
		res = append(res, engine.Settlement{ID: cl.ID, Seq: cl.Seq, Status: heraldtype.StatusSent})
	}
	f.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: run.Slot.Add(3 * time.Second), Results: res})
}

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	f, srv := consoleFixture(t)
	b := newBrowser(t, "zh-CN", "UTC", 1440, 900)
	poll := b.until
	// Accept-Language zh-CN: the page is in Chinese, times in the
	// cluster's zone with the offset shown.
	require.NoError(t, chromedp.Do(b.ctx,
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#sends-chart svg.sends`)),
		chromedp.WaitVisible(chromedp.CSS(`#alerts .card`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules button[data-fire="daily_report"]`)),
	))
	require.Equal(t, "zh-CN", b.eval(t, `document.documentElement.lang`))
	require.Equal(t, "今日图表", b.text(t, `#day-panel h2 [data-i18n="day"]`))
	require.Equal(t, "告警", b.text(t, `#alerts-panel h2 [data-i18n="alerts"]`))
	require.Contains(t, b.text(t, "#tiles"), "未确认告警")
	require.Contains(t, b.text(t, "#tiles"), "今日已发送")
	require.Contains(t, b.text(t, "#stats"), "成功率")
	require.Contains(t, b.text(t, "#cluster"), "当前节点")
	require.Contains(t, b.text(t, "#footer"), "时间均为 Asia/Shanghai (UTC+08:00)")
	require.Contains(t, b.text(t, "#runs"), "2026-12-01 09:00:00 +08:00", "a browser in UTC shows the cluster's zone")
	require.Contains(t, b.text(t, "#day-panel"), "Asia/Shanghai (UTC+08:00)")
	// The day's p95 (the p95 of the recorded slot → sent times) is on the page.
	require.Contains(t, b.text(t, `#lateness-chart [data-q="p95"]`), "2.00 s")
	require.Contains(t, b.text(t, `[data-tile="p95"]`), "2.00 s")
	// Next fire times of the scheduled rule, in the display zone.
	require.Contains(t, b.text(t, `#upcoming tr[data-rule="daily_report"]`), "2026-12-02 09:00:00 +08:00")
	b.shot(t, "console-desktop-zh.png")

	// A rule fired by hand (confirmed, answered) shows in the sends chart.
	before, err := strconv.Atoi(b.eval(t, `document.querySelector("#sends-chart svg.sends").dataset.total`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(`#rules button[data-fire="daily_report"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
	))
	require.Contains(t, b.text(t, "#confirm-q"), "立即触发规则 daily_report？")
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#confirm-yes`)), chromedp.WaitVisible(chromedp.CSS(`#toast.ok`))))
	require.Contains(t, b.text(t, "#toast"), "规则 daily_report 已触发")
	playLeader(t, f)
	require.NoError(t, chromedp.Do(b.ctx, poll(`+document.querySelector("#sends-chart svg.sends").dataset.total === `+strconv.Itoa(before+2))))

	// "Did 李娜 get it?": searched by name, her failed report with every
	// failed attempt and the message as sent.
	require.NoError(t, chromedp.Do(b.ctx,
		chromedp.SetValue(chromedp.CSS(`#p-query`), "李娜"),
		chromedp.Click(chromedp.CSS(`#person-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#person .card.delivery[data-state="failed"]`)),
	))
	card := b.text(t, `#person .card.delivery[data-state="failed"]`)
	require.Contains(t, card, "李娜 (lina)")
	require.Contains(t, card, "**2026-12-01 日报** 李娜：请于今天 18:00 前提交")
	require.Contains(t, card, "system busy, try again later")
	require.Contains(t, card, "第 2 次")
	require.Contains(t, b.text(t, "#person .person-head"), "李娜 (lina) — 2026-12-01")
	require.Contains(t, b.text(t, "#person"), "补发日报", "the hand-fired run reached her too")

	// Retry her failed report (confirmed): the leader sends it again and
	// her card turns sent.
	lina := engine.DeliveryID(engine.RunKey("daily_report", t0), "lina")
	require.NoError(t, chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(`#person button[data-retry="`+lina+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
	))
	require.Contains(t, b.text(t, "#confirm-q"), "李娜")
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#confirm-yes`)), poll(`document.querySelector("#toast.ok") && document.querySelector("#toast").textContent.includes("已安排重发：1")`)))
	d, _ := f.fsm.Delivery(lina)
	require.Equal(t, engine.StatePending, d.State, "retried: waiting for the leader")
	c := f.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{lina}, Leader: "n1", Now: d.NextAt, Timeout: time.Minute}).(engine.ClaimResult)
	require.Len(t, c.Claimed, 1)
	f.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: d.NextAt.Add(time.Second), Results: []engine.Settlement{
		{ID: lina, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusSent}}})
	require.NoError(t, chromedp.Do(b.ctx, poll(`!!document.querySelector('#person .card.delivery[data-delivery="`+lina+`"][data-state="sent"]')`)))

	// She clicked her card's button: who clicked what, and the card's
	// replacement, show on her delivery.
	clicked := d.NextAt.Add(time.Minute)
	require.Equal(t, true, f.apply(t, engine.CmdClickCard, engine.ClickCard{ID: lina, Click: engine.CardClick{Event: "wecom:card:1", Key: "done", UserID: "lina",
		At: clicked, Update: json.RawMessage(`{"msgtype":"template_card","template_card":{"card_type":"button_interaction"}}`)}, Now: clicked}))
	require.Equal(t, 1, f.apply(t, engine.CmdRecordCardUpdates, engine.RecordCardUpdates{Results: []engine.CardUpdateOutcome{
		{ID: lina, Event: "wecom:card:1", Status: heraldtype.StatusSent}}, Now: clicked.Add(time.Second)}))
	require.NoError(t, chromedp.Do(b.ctx, poll(`(document.querySelector('#person .card.delivery[data-delivery="`+lina+`"] .clicks li[data-key="done"]') || {textContent: ""}).textContent.includes("lina 点击了「done」")`)))
	require.Contains(t, b.text(t, `#person .card.delivery[data-delivery="`+lina+`"] .clicks`), "卡片已更新")

	// Alerts are worded in Chinese from their typed causes.
	require.Contains(t, b.text(t, "#alerts"), "投递失败")
	require.Contains(t, b.text(t, "#alerts"), "发给 李娜 (lina) 的消息")

	// Pause asks why, and says it is done.
	require.NoError(t, chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(`#rules button[data-pause="daily_report"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-reason`)),
		chromedp.SetValue(chromedp.CSS(`#confirm-reason`), "国庆放假"),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		poll(`document.querySelector("#toast").textContent.includes("规则 daily_report 已暂停")`),
	))
	p, paused := f.fsm.Paused("daily_report")
	require.True(t, paused)
	require.Equal(t, "国庆放假", p.Reason)

	// The switch: English, kept by this browser across a reload.
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#lang-en`)), poll(`document.documentElement.lang === "en"`)))
	require.Equal(t, "The day in pictures", b.text(t, `#day-panel h2 [data-i18n="day"]`))
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#person .card.delivery`))))
	require.Equal(t, "en", b.eval(t, `document.documentElement.lang`))
	require.Contains(t, b.text(t, "#tiles"), "OPEN ALERTS", "(shown in capitals)")
	require.Contains(t, b.text(t, "#person"), "Failed attempts", "the search is kept in the address")
	b.shot(t, "console-desktop-en.png")

	// A phone: one column, the alert text as wide as the screen allows.
	require.NoError(t, chromedp.Do(b.ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Click(chromedp.CSS(`#lang-zh`)),
		poll(`document.documentElement.lang === "zh-CN"`),
		poll(`document.querySelector("#alerts .alert-text").getBoundingClientRect().width > 280`),
	))
	b.shot(t, "console-phone.png")
	require.Equal(t, "0", b.eval(t, `String(Math.max(0, document.documentElement.scrollWidth - window.innerWidth))`), "no sideways scrolling on a phone")
	require.Equal(t, "[]", b.eval(t, `JSON.stringify([...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest(".body, .day > div")).slice(0, 5).map(e => e.tagName + "#" + e.id + "." + e.className))`), "nothing wider than the phone")

	// Wall mode: the summary, cycling views.
	require.NoError(t, chromedp.Do(b.ctx,
		chromedp.EmulateViewport(2560, 1440),
		chromedp.Click(chromedp.CSS(`#wall-toggle`)),
		poll(`document.body.classList.contains("wall") && !!document.body.dataset.wallView`),
	))
	require.True(t, strings.Contains(b.eval(t, `location.hash`), "wall"), "a wall link keeps the mode")
	require.Contains(t, b.text(t, "#wall-title"), "Herald — 2026-12-01")
	b.shot(t, "console-wall.png")
}
