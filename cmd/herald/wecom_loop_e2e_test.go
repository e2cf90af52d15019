package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// Issue 21's loops closed end to end, on three real agents and the fake
// WeCom: a mass send held for a second person's approval, a run's
// messages taken back, a card whose button answers back.

// massRule sends to three people of the fake corp through the app and
// needs approval over one. Its schedule is once a year: the runs are
// fired by hand, and one the scheduler fired would be held as well. The
// people are not in the people file, so no quiet hours of theirs apply
// whatever the hour.
const massRule = `return rule {
  name     = "mass",
  schedule = "0 0 1 1 *",
  timezone = "Asia/Shanghai",
  channel  = "wecom_sales",
  approval = { over = 1 },
  recipients = function(run) return { "alice", "bob", "carol" } end,
  message = function(run, to)
    return { msgtype = "text", text = { content = "全员通知 " .. run.key .. " " .. to.userid } }
  end,
}
`

// The approval test's tokens: two operate tokens (the one that fires, the
// one that approves), read for the polls, admin for the audit.
var approvalTokens = map[string]string{
	"HT_READ":      "read-5e1c9a3f7b2d4068",
	"HT_OPERATE_A": "operate-a-3b7d1f5e9c2a4860",
	"HT_OPERATE_B": "operate-b-8f2a6c0e4d1b3957",
	"HT_ADMIN":     "admin-6a0e4c8b2f1d3579",
}

const approvalTokensConfig = `tokens:
  - {name: dashboard, role: read, token: "${HT_READ}"}
  - {name: ops-a, role: operate, token: "${HT_OPERATE_A}"}
  - {name: ops-b, role: operate, token: "${HT_OPERATE_B}"}
  - {name: root, role: admin, token: "${HT_ADMIN}"}
`

// formAs starts c's three agents (n1 bootstraps, the others join it) and
// waits for three voters, reading the status with token.
func formAs(c *e2eCluster, token string) {
	c.t.Helper()
	n1 := c.nodes[0]
	c.start(n1, "--bootstrap")
	eventually(c.t, 20*time.Second, "n1 leads", func() bool {
		var s statusView
		return getAs(n1.http, token, "/v1/status", &s) == nil && s.State == "leader"
	})
	for _, n := range c.nodes[1:] {
		c.start(n, "--join", n1.http)
	}
	eventually(c.t, 30*time.Second, "three voters that know the leader", func() bool {
		var s statusView
		voters := 0
		err := getAs(c.nodes[2].http, token, "/v1/status", &s)
		for _, m := range s.Members {
			if m.Voter {
				voters++
			}
		}
		return err == nil && voters == 3 && s.LeaderID != ""
	})
}

// runView is what these tests read of GET /v1/runs.
type runView struct {
	Key        string `json:"key"`
	State      string `json:"state"`
	FiredToken string `json:"fired_token"`
	Approval   *struct {
		Count int    `json:"count"`
		State string `json:"state"`
		By    string `json:"by"`
	} `json:"approval"`
}

func runOf(addr, token, rule, key string) (runView, bool) {
	var out struct {
		Runs []runView `json:"runs"`
	}
	if getAs(addr, token, "/v1/runs?rule="+url.QueryEscape(rule), &out) != nil {
		return runView{}, false
	}
	for _, r := range out.Runs {
		if r.Key == key {
			return r, true
		}
	}
	return runView{}, false
}

// loopDelivery is what these tests read of a delivery.
type loopDelivery struct {
	ID         string `json:"id"`
	RunKey     string `json:"run_key"`
	Recipient  string `json:"recipient"`
	Channel    string `json:"channel"`
	State      string `json:"state"`
	ProviderID string `json:"provider_id"`
	Clicks     []struct {
		Event       string          `json:"event"`
		Key         string          `json:"key"`
		UserID      string          `json:"userid"`
		Update      json.RawMessage `json:"update"`
		UpdateState string          `json:"update_state"`
		Tries       int             `json:"tries"`
	} `json:"clicks"`
}

// runDeliveries lists a run's deliveries, optionally in one state.
func runDeliveries(addr, token, run, state string) ([]loopDelivery, error) {
	q := url.Values{"run": {run}}
	if state != "" {
		q.Set("state", state)
	}
	var out struct {
		Deliveries []loopDelivery `json:"deliveries"`
	}
	err := getAs(addr, token, "/v1/deliveries?"+q.Encode(), &out)
	return out.Deliveries, err
}

// allIn reports whether the run has n deliveries, all in state.
func allIn(addr, token, run, state string, n int) bool {
	ds, err := runDeliveries(addr, token, run, "")
	if err != nil || len(ds) != n {
		return false
	}
	for _, d := range ds {
		if d.State != state {
			return false
		}
	}
	return true
}

// receivedAbout counts the app messages userid got that mention s.
func receivedAbout(fake *wecomfake.Server, userid, s string) int {
	n := 0
	for _, m := range fake.Received(userid) {
		if strings.Contains(m.Content, s) {
			n++
		}
	}
	return n
}

// TestApprovalBySecondTokenE2E: a run fired by hand for more people than
// its rule's approval allows is held with nothing sent; the token that
// fired it cannot approve it, another can, and each person then gets the
// message once; a rejected run never sends. Both decisions are audited.
func TestApprovalBySecondTokenE2E(t *testing.T) {
	c, fake := setupWecomE2E(t, approvalTokensConfig)
	for k, v := range approvalTokens {
		t.Setenv(k, v) // the agents inherit them
	}
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "mass.lua"), []byte(massRule), 0o644))
	read, opA, opB, admin := approvalTokens["HT_READ"], approvalTokens["HT_OPERATE_A"], approvalTokens["HT_OPERATE_B"], approvalTokens["HT_ADMIN"]
	tc := &tokenCluster{e2eCluster: c}
	formAs(c, read)
	n1, n2 := c.nodes[0], c.nodes[1]
	people := []string{"alice", "bob", "carol"}

	// Fired by A through a follower (forwarded with A's identity).
	fire := func() api.FireResponse {
		t.Helper()
		out, err := tc.cliAs(opA, "rules", "fire", "mass", "--addr", n2.http, "--json")
		require.NoError(t, err, out)
		var fired api.FireResponse
		require.NoError(t, json.Unmarshal([]byte(out), &fired), out)
		return fired
	}
	first := fire()
	run1 := first.Run
	var rv runView
	eventually(t, 20*time.Second, run1+" awaiting approval", func() bool {
		var ok bool
		rv, ok = runOf(n1.http, read, "mass", run1)
		return ok && rv.State == "awaiting_approval"
	})
	require.Equal(t, "ops-a", rv.FiredToken, "the fire recorded the caller's token, not the forwarding node's")
	require.NotNil(t, rv.Approval)
	require.Equal(t, 3, rv.Approval.Count)
	ds, err := runDeliveries(n1.http, read, run1, "")
	require.NoError(t, err)
	require.Len(t, ds, 3, "the held run's deliveries are replicated")

	// A may not approve its own fire: 403, and nothing moves.
	out, err := tc.cliAs(opA, "runs", "approve", run1, "--addr", n2.http)
	require.Error(t, err, out)
	require.Contains(t, out, "HTTP 403", out)
	require.Contains(t, out, "another token must", out)
	rv, _ = runOf(n1.http, read, "mass", run1)
	require.Equal(t, "awaiting_approval", rv.State)
	for _, p := range people {
		require.Zero(t, receivedAbout(fake, p, run1), "%s got %s while it was held", p, run1)
	}

	// B approves: each person gets it once.
	out, err = tc.cliAs(opB, "runs", "approve", run1, "--addr", n2.http)
	require.NoError(t, err, out)
	require.Contains(t, out, "3 message(s) released", out)
	eventually(t, 30*time.Second, run1+"'s three deliveries sent", func() bool { return allIn(n1.http, read, run1, "sent", 3) })
	for _, p := range people {
		require.Equal(t, 1, receivedAbout(fake, p, run1), "%s gets %s once", p, run1)
	}
	rv, _ = runOf(n1.http, read, "mass", run1)
	require.Equal(t, "approved", rv.Approval.State)
	require.Equal(t, "ops-b", rv.Approval.By)

	// A fire without a slot takes the current second: the next one must
	// be in a later second, or it would be the same slot (refused).
	eventually(t, 5*time.Second, "a later second", func() bool { return time.Now().Truncate(time.Second).After(first.Slot) })
	second := fire()
	run2 := second.Run
	eventually(t, 5*time.Second, "a later second", func() bool { return time.Now().Truncate(time.Second).After(second.Slot) })
	run3 := fire().Run
	for _, key := range []string{run2, run3} {
		eventually(t, 20*time.Second, key+" awaiting approval", func() bool {
			rv, ok := runOf(n1.http, read, "mass", key)
			return ok && rv.State == "awaiting_approval"
		})
	}
	// A rejects run2 (a token may reject what it fired); B approves run3,
	// planned after run2: once run3's messages are out, run2's would have
	// gone too, had they been released.
	out, err = tc.cliAs(opA, "runs", "reject", run2, "--addr", n2.http)
	require.NoError(t, err, out)
	require.Contains(t, out, "3 message(s) cancelled", out)
	out, err = tc.cliAs(opB, "runs", "approve", run3, "--addr", n2.http)
	require.NoError(t, err, out)
	eventually(t, 30*time.Second, run3+"'s three deliveries sent", func() bool { return allIn(n1.http, read, run3, "sent", 3) })
	rv, _ = runOf(n1.http, read, "mass", run2)
	require.Equal(t, "rejected", rv.State)
	require.True(t, allIn(n1.http, read, run2, "cancelled", 3), "the rejected run's deliveries are cancelled")
	for _, p := range people {
		require.Zero(t, receivedAbout(fake, p, run2), "%s got the rejected %s", p, run2)
		require.Equal(t, 1, receivedAbout(fake, p, run3), "%s gets %s once", p, run3)
		require.Equal(t, 1, receivedAbout(fake, p, run1), "%s still got %s once", p, run1)
	}

	// The audit trail: who approved and rejected what.
	audit := func(action string) api.AuditResponse {
		t.Helper()
		out, err := tc.cliAs(admin, "audit", "--action", action, "--json", "--addr", n1.http)
		require.NoError(t, err, out)
		var page api.AuditResponse
		require.NoError(t, json.Unmarshal([]byte(out), &page), out)
		return page
	}
	approved := map[string]string{} // target → actor, of the accepted approvals
	refused := 0
	for _, r := range audit("run.approve").Records {
		switch r.Status {
		case http.StatusOK:
			approved[r.Target] = r.Actor
		case http.StatusForbidden:
			refused++
		}
	}
	require.Equal(t, map[string]string{run1: "ops-b", run3: "ops-b"}, approved)
	t.Logf("audit: %d refused approval(s) recorded", refused)
	rejects := audit("run.reject").Records
	require.Len(t, rejects, 1)
	require.Equal(t, run2, rejects[0].Target)
	require.Equal(t, "ops-a", rejects[0].Actor)
	require.Equal(t, http.StatusOK, rejects[0].Status)
}

// noticeRule is an API-task rule that sends data.note to data.to through
// channel.
func noticeRule(name, channel string) string {
	return fmt.Sprintf(`return rule {
  name     = %q,
  timezone = "Asia/Shanghai",
  channel  = %q,
  recipients = function(run) return run.data.to end,
  message = function(run, to)
    return { msgtype = "text", text = { content = run.data.note .. " → " .. to.userid } }
  end,
}
`, name, channel)
}

// TestRecallRunE2E: a run's app messages are taken back with
// deliveries recall --run; a robot run's are reported not recallable and
// stay sent.
func TestRecallRunE2E(t *testing.T) {
	c, fake := setupWecomE2E(t)
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "notice_app.lua"), []byte(noticeRule("notice_app", "wecom_sales")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "notice_robot.lua"), []byte(noticeRule("notice_robot", "wecom_ops")), 0o644))
	c.formCluster()
	n2 := c.nodes[1]
	submit := func(key, rule, note string, to ...string) string {
		t.Helper()
		data, err := json.Marshal(map[string]any{"to": to, "note": note})
		require.NoError(t, err)
		out, err := c.cli("task", "submit", key, "--rule", rule, "--in", "0s", "--data", string(data), "--addr", n2.http)
		require.NoError(t, err, out)
		var task api.TaskView
		eventually(t, 20*time.Second, key+"'s run", func() bool { return getJSON(n2.http, "/v1/tasks/"+key, &task) == nil && task.Run != "" })
		return task.Run
	}
	appRun := submit("recall-app", "notice_app", "价格表有误，请勿转发", "alice", "bob", "carol")
	robotRun := submit("recall-robot", "notice_robot", "值班群通知", "dave", "erin")
	eventually(t, 30*time.Second, "the app run sent", func() bool { return allIn(n2.http, "", appRun, "sent", 3) })
	eventually(t, 30*time.Second, "the robot run sent", func() bool { return allIn(n2.http, "", robotRun, "sent", 2) })
	require.Len(t, fake.RobotReceived(wecomfake.DemoRobotKey), 2)
	appSent, err := runDeliveries(n2.http, "", appRun, "")
	require.NoError(t, err)
	var msgids []string
	for _, d := range appSent {
		require.NotEmpty(t, d.ProviderID, "an app message has a msgid: %+v", d)
		msgids = append(msgids, d.ProviderID)
	}
	require.Empty(t, fake.Recalled())

	// The app run, through a follower.
	out, err := c.cli("deliveries", "recall", "--run", appRun, "--json", "--addr", n2.http)
	require.NoError(t, err, out)
	var res api.RecallResponse
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Empty(t, res.NotRecallable, out)
	require.Len(t, append(res.Recalled, res.Pending...), 3, out)
	eventually(t, 30*time.Second, "the app run recalled", func() bool { return allIn(n2.http, "", appRun, "recalled", 3) })
	out, err = c.cli("deliveries", "list", "--state", "recalled", "--json", "--addr", n2.http)
	require.NoError(t, err, out)
	var listed struct {
		Total      int            `json:"total"`
		Deliveries []loopDelivery `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Equal(t, 3, listed.Total, out)
	for _, d := range listed.Deliveries {
		require.Equal(t, appRun, d.RunKey)
	}
	require.ElementsMatch(t, msgids, fake.Recalled(), "WeCom took back exactly the run's messages")

	// The robot run: nothing recallable, said one by one; nothing changes.
	out, err = c.cli("deliveries", "recall", "--run", robotRun, "--addr", n2.http)
	require.Error(t, err, "nothing was recalled: %s", out)
	require.Equal(t, 2, strings.Count(out, "not recallable "), out)
	require.Contains(t, out, "group robot", out)
	require.Contains(t, out, "0 recalled, 2 not recallable, 0 pending", out)
	require.True(t, allIn(n2.http, "", robotRun, "sent", 2), "the robot's messages stay sent")
	require.ElementsMatch(t, msgids, fake.Recalled())
	for _, m := range fake.RobotReceived(wecomfake.DemoRobotKey) {
		require.False(t, m.Recalled)
	}
}

// followUpRule is the example follow_up without its digest and quiet
// hours, so that the owner's card goes out at once whatever the hour.
func followUpRule(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "rules", "examples", "follow_up.lua"))
	require.NoError(t, err)
	rule := string(src)
	quiet := "  quiet_hours = { from = \"22:00\", to = \"08:00\" },\n"
	require.Contains(t, rule, quiet, "the example has quiet hours")
	rule = strings.Replace(rule, quiet, "", 1)
	from, to := strings.Index(rule, "  digest = {"), strings.Index(rule, "  recipients = function(run)")
	require.True(t, from > 0 && to > from, "the example has a digest before its recipients")
	return rule[:from] + rule[to:]
}

// followUpCard starts the cluster with the follow_up rule, submits the
// follow-up 8812's tasks follow-8812-1 (due now) and follow-8812-2 (due in
// an hour) for alice, and waits for her card to be at WeCom and its
// delivery sent. The fake's callbacks go to via, a follower (forwarded to
// the leader), which the checks read too. id is the card's delivery.
func followUpCard(t *testing.T) (c *e2eCluster, fake *wecomfake.Server, via *agentProc, id string) {
	c, fake = setupWecomE2E(t)
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "follow_up.lua"), []byte(followUpRule(t)), 0o644))
	c.formCluster()
	via = c.follower()
	require.NotNil(t, via)
	// alice is in the fake corp and not in the people file: no quiet
	// hours of her own.
	data := `{"owner":"alice","customer":"华东机电","followup":"8812"}`
	for key, in := range map[string]string{"follow-8812-1": "0s", "follow-8812-2": "1h"} {
		out, err := c.cli("task", "submit", key, "--rule", "follow_up", "--in", in, "--data", data, "--addr", via.http)
		require.NoError(t, err, out)
	}
	eventually(t, 30*time.Second, "alice's card at WeCom", func() bool {
		for _, m := range fake.Received("alice") {
			if m.MsgType == "template_card" && m.TaskID != "" {
				id = m.TaskID
				return true
			}
		}
		return false
	})
	var d loopDelivery
	eventually(t, 20*time.Second, "the card's delivery sent", func() bool {
		return getJSON(via.http, "/v1/deliveries/"+id, &d) == nil && d.State == "sent"
	})
	require.Equal(t, "task:follow-8812-1", d.RunKey)
	require.Equal(t, "alice", d.Recipient)
	require.NoError(t, fake.SetCallback(wecomfake.CallbackConfig{CorpID: wecomfake.DemoCorpID,
		URL: "http://" + via.http + "/v1/wecom/callback/wecom_sales", Token: e2eCallbackToken, AESKey: e2eCallbackAESKey}))
	return c, fake, via, id
}

// cardReplacement is the replacement card the fake holds for delivery id's
// card, once update_template_card has replaced it.
func cardReplacement(fake *wecomfake.Server, id string) (subTitle string, buttons []string, ok bool) {
	var updated struct {
		SubTitle string `json:"sub_title_text"`
		Buttons  []struct {
			Key string `json:"key"`
		} `json:"button_list"`
	}
	for _, m := range fake.Received("alice") {
		if m.TaskID == id && m.Updated != nil && json.Unmarshal(m.Updated, &updated) == nil {
			for _, b := range updated.Buttons {
				buttons = append(buttons, b.Key)
			}
			return updated.SubTitle, buttons, true
		}
	}
	return "", nil, false
}

// TestCardClickE2E: the owner's follow-up card's 已跟进, clicked in WeCom
// (a callback sent twice), cancels the follow-up's pending tasks once,
// is recorded once on the delivery, and replaces the card.
func TestCardClickE2E(t *testing.T) {
	c, fake, via, id := followUpCard(t)
	res, err := fake.SendCardClick(context.Background(), wecomfake.CardClick{UserID: "alice", TaskID: id, EventKey: "done",
		CallbackFaults: wecomfake.CallbackFaults{Twice: true}})
	require.NoError(t, err)
	require.Equal(t, []int{http.StatusOK, http.StatusOK}, res.Statuses, "a callback sent twice is answered twice")

	var task api.TaskView
	var d loopDelivery
	eventually(t, 20*time.Second, "follow-8812-2 cancelled", func() bool {
		return getJSON(via.http, "/v1/tasks/follow-8812-2", &task) == nil && task.State == "cancelled"
	})
	eventually(t, 20*time.Second, "the click recorded and the card updated", func() bool {
		return getJSON(via.http, "/v1/deliveries/"+id, &d) == nil && len(d.Clicks) > 0 && d.Clicks[0].UpdateState == "updated"
	})
	require.Len(t, d.Clicks, 1, "a click sent twice is one click")
	require.Equal(t, "done", d.Clicks[0].Key)
	require.Equal(t, "alice", d.Clicks[0].UserID)
	out, err := c.cli("deliveries", "get", id[:12], "--addr", via.http)
	require.NoError(t, err, out)
	require.Contains(t, out, `"update_state": "updated"`, out)

	var subTitle string
	var buttons []string
	eventually(t, 10*time.Second, "the card replaced at WeCom", func() bool {
		var ok bool
		subTitle, buttons, ok = cardReplacement(fake, id)
		return ok
	})
	require.Contains(t, subTitle, "alice 已于", subTitle)
	require.Contains(t, subTitle, "跟进", subTitle)
	require.Equal(t, []string{"handled"}, buttons)
	require.Equal(t, 1, fake.Calls("message/update_template_card"), "the card is replaced once")
	require.NoError(t, getJSON(via.http, "/v1/tasks/follow-8812-1", &task))
	require.Equal(t, "fired", task.State, "the clicked card's own task had fired")
}

// successfulUpdates counts the update_template_card calls WeCom answered
// with errcode 0.
func successfulUpdates(fake *wecomfake.Server) int {
	n := 0
	for _, r := range fake.Requests() {
		if r.Path == "/cgi-bin/message/update_template_card" && r.Status == http.StatusOK && r.Errcode == 0 {
			n++
		}
	}
	return n
}

// TestCardUpdateAfterLeaderKillE2E: the click is recorded, WeCom fails the
// card's update (HTTP 502), the leader is killed; the new leader replaces
// the card, once, from the replicated click (on_action is not run again).
func TestCardUpdateAfterLeaderKillE2E(t *testing.T) {
	c, fake, via, id := followUpCard(t)
	require.NoError(t, fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultHTTP, Path: "message/update_template_card"}))
	res, err := fake.SendCardClick(context.Background(), wecomfake.CardClick{UserID: "alice", TaskID: id, EventKey: "done"})
	require.NoError(t, err)
	require.Equal(t, []int{http.StatusOK}, res.Statuses)
	var task api.TaskView
	eventually(t, 20*time.Second, "follow-8812-2 cancelled", func() bool {
		return getJSON(via.http, "/v1/tasks/follow-8812-2", &task) == nil && task.State == "cancelled"
	})
	var d loopDelivery
	eventually(t, 20*time.Second, "a failed try of the card's update recorded", func() bool {
		return getJSON(via.http, "/v1/deliveries/"+id, &d) == nil && len(d.Clicks) == 1 && d.Clicks[0].Tries > 0
	})
	require.Equal(t, "pending", d.Clicks[0].UpdateState, "a 502 is retried")
	_, _, replaced := cardReplacement(fake, id)
	require.False(t, replaced)

	old := c.leader(c.nodes...)
	require.NotNil(t, old)
	require.NotEqual(t, via, old)
	c.kill(old)
	fake.ClearFaults()
	t.Logf("killed the leader %s after %d failed update(s)", old.id, d.Clicks[0].Tries)
	eventually(t, 30*time.Second, "the card updated by the new leader", func() bool {
		return getJSON(via.http, "/v1/deliveries/"+id, &d) == nil && len(d.Clicks) == 1 && d.Clicks[0].UpdateState == "updated"
	})
	subTitle, buttons, ok := cardReplacement(fake, id)
	require.True(t, ok)
	require.Contains(t, subTitle, "alice 已于", subTitle)
	require.Equal(t, []string{"handled"}, buttons)
	require.Equal(t, 1, successfulUpdates(fake), "the card is replaced once")
	var now statusView
	require.NoError(t, getJSON(via.http, "/v1/status", &now))
	require.NotEqual(t, old.id, now.LeaderID)
}
