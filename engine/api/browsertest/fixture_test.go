package browsertest

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// t0 is 09:00 in Asia/Shanghai, the zone the browser tests run in.
var t0 = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)

func fixtureNow() time.Time { return t0.Add(2*time.Hour + 30*time.Minute) }

const brokenRuleError = "weekly_report.lua:12: attempt to index a nil value (global 'peple')"

// fixture is the API over an in-memory state machine that a test fills
// with commands, as the leader would.
type fixture struct {
	fsm *engine.FSM
	rep *enginetest.Replicator
	api http.Handler
}

func (f *fixture) apply(t *testing.T, ct engine.CommandType, body any) any {
	t.Helper()
	return f.rep.MustApply(t, ct, body)
}

// testStatus is a three-node cluster with a broken rule, an unhealthy
// channel and a warning.
func testStatus() api.Status {
	return api.Status{
		NodeID: "n1", LeaderID: "n1", State: "leader", Term: 3, AppliedIndex: 42, RulesHash: "9f2c51d0a4b7e3c8",
		Warnings: []string{"cn_workday knows statutory holidays up to 2027 only"},
		Members: []api.MemberStatus{
			{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001", Voter: true, Leader: true},
			{ID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8002", Voter: true},
			{ID: "n3", RaftAddr: "127.0.0.1:7003", HTTPAddr: "127.0.0.1:8003", Voter: true},
		},
		Rules: []api.RuleStatus{
			{Name: "daily_report", File: "daily_report.lua", Hash: "a1b2c3d4e5f60718"},
			{Name: "weekly_report", File: "weekly_report.lua", Hash: "0718a1b2c3d4e5f6", Error: brokenRuleError},
		},
		Channels: []heraldtype.ChannelStatus{
			{Name: "wecom_sales", Plugin: "wecom", Healthy: true},
			{Name: "mock", Plugin: "mock", Healthy: false, Error: "plugin exited: signal: killed"},
		},
	}
}

// setup builds the API over an empty FSM with a stub status.
func setup(t *testing.T) *fixture {
	t.Helper()
	rep := enginetest.New()
	f := &fixture{fsm: rep.FSM, rep: rep}
	// The node's clock is fixed at 11:30 in Shanghai on t0's day: the
	// console's "today" is the node's, so no test depends on the date.
	f.api = api.New(api.Config{FSM: f.fsm, Replicator: f.rep, StatusFunc: testStatus, NowFunc: fixtureNow})
	return f
}

// writeError answers as the API does: {"error": reason}.
func writeError(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": reason})
}

// populate fills the FSM as a day's work would: a planned run with one
// delivery sent, one failed (which raises an alert) and one pending; a
// skipped run (another alert); a late run; and an alert in Chinese.
func (f *fixture) populate(t *testing.T) {
	key := engine.RunKey("daily_report", t0)
	require.Nil(t, f.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily_report", Slot: t0, Zone: "Asia/Shanghai", Now: t0}))
	var nds []engine.NewDelivery
	for _, r := range []string{"zhangsan", "lisi", "wangwu"} {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, r), Recipient: r, Channel: "wecom_sales",
			Payload:  json.RawMessage(`{"msgtype":"markdown","content":"**2026-12-01 日报** 请于今天 18:00 前提交"}`),
			Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
	}
	nds[2].NotBefore = t0.Add(time.Hour) // wangwu: not due yet
	require.Equal(t, 3, f.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds}))
	require.Nil(t, f.apply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: t0}))
	claimed := f.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{nds[0].ID, nds[1].ID}, Leader: "n1",
		Now: t0.Add(time.Second), Timeout: 30 * time.Second}).(engine.ClaimResult).Claimed
	require.Len(t, claimed, 2)
	f.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: t0.Add(2 * time.Second), Results: []engine.Settlement{
		{ID: nds[0].ID, Seq: claimed[0].Seq, Status: heraldtype.StatusSent, ProviderID: "msg-001"},
		{ID: nds[1].ID, Seq: claimed[1].Seq, Status: heraldtype.StatusPermanent, Code: "81013", Error: "user not found in the app's visible range"},
	}})

	weekly := t0.Add(-24 * time.Hour)
	require.Nil(t, f.apply(t, engine.CmdStartRun, engine.StartRun{Key: engine.RunKey("weekly_report", weekly), Rule: "weekly_report",
		Slot: weekly, Skip: true, Now: t0}))
	birthday := t0.Add(-time.Hour)
	bkey := engine.RunKey("birthday", birthday)
	require.Nil(t, f.apply(t, engine.CmdStartRun, engine.StartRun{Key: bkey, Rule: "birthday", Slot: birthday, Late: true, Now: t0}))
	require.Nil(t, f.apply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: bkey, Now: t0}))
	f.apply(t, engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "channel:wecom_sales:token", Rule: "daily_report",
		Message: "企业微信 access_token 获取失败 (40001)：请检查 secret", Now: t0.Add(3 * time.Second)})
	require.Len(t, f.fsm.Alerts(), 3)

	res := f.apply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "enquiry-8812", Rule: "enquiry_timeout",
		DueAt: t0.Add(15 * time.Minute), Data: json.RawMessage(`{"customer":"王先生"}`), Now: t0})
	require.NotImplements(t, (*error)(nil), res)
}

// chromium finds a Chromium or Chrome binary for the browser test.
func chromium(t *testing.T) string {
	if p := os.Getenv("HERALD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium found (install the Debian package chromium, or set HERALD_CHROMIUM)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + ": the browser test must run in CI")
	}
	t.Skip(msg)
	return ""
}
