package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/wecomfake"
)

// The callback's secrets of the e2e cluster (${ENV} references in its
// config, as in production).
const (
	e2eCallbackToken  = "herald-e2e-token"
	e2eCallbackAESKey = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
	e2eKfAccount      = "wkE2E"
	e2eEnquiryWait    = 8 * time.Second
)

// setupWecomE2E: three real agents whose wecom_sales channel (an app)
// talks to a fake WeCom in this process, which calls the cluster back (at
// n1, a follower after the first kill: forwarded to the leader), and whose
// wecom_ops channel is the fake's group robot (as herald dev has them).
// The example enquiry_timeout rule runs with WAIT shortened to
// e2eEnquiryWait. extra is appended to the config (e.g. a tokens: list).
func setupWecomE2E(t *testing.T, extra ...string) (*e2eCluster, *wecomfake.Server) {
	c := setupE2E(t)
	corp := wecomfake.DemoCorp()
	corp.Members = append(corp.Members, wecomfake.MemberConfig{UserID: "liuyang", Departments: []int{2}})
	fake := wecomfake.New(wecomfake.Config{Corps: []wecomfake.CorpConfig{corp}})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)

	require.NoError(t, os.Remove(filepath.Join(c.rules, "tick.lua")))
	src, err := os.ReadFile(filepath.Join("..", "..", "rules", "examples", "enquiry_timeout.lua"))
	require.NoError(t, err)
	rule := strings.Replace(string(src), `local WAIT = "15m"`, fmt.Sprintf(`local WAIT = "%s"`, e2eEnquiryWait), 1)
	require.NotEqual(t, string(src), rule, "the example names WAIT")
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "enquiry_timeout.lua"), []byte(rule), 0o644))
	people, err := os.ReadFile(filepath.Join("..", "..", "rules", "examples", "people.csv"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "people.csv"), people, 0o644))

	t.Setenv("E2E_WECOM_SECRET", wecomfake.DemoSecret)
	t.Setenv("E2E_CB_TOKEN", e2eCallbackToken)
	t.Setenv("E2E_CB_AES_KEY", e2eCallbackAESKey)
	cfg := fmt.Sprintf(`channels:
  wecom_sales:
    plugin: wecom
    base_url: %s
    corp_id: %s
    agent_id: %d
    secret: ${E2E_WECOM_SECRET}
    callback_token: ${E2E_CB_TOKEN}
    callback_aes_key: ${E2E_CB_AES_KEY}
  wecom_ops:
    plugin: wecom
    base_url: %s
    robot_key: %s
`, srv.URL, wecomfake.DemoCorpID, wecomfake.DemoAgentID, srv.URL, wecomfake.DemoRobotKey)
	cfg += strings.Join(extra, "")
	require.NoError(t, os.WriteFile(c.config, []byte(cfg), 0o644))
	return c, fake
}

// alertsFor counts the enquiry alerts liuyang received about customer.
func alertsFor(fake *wecomfake.Server, customer string) (int, time.Time) {
	n, at := 0, time.Time{}
	for _, m := range fake.Received("liuyang") {
		if strings.Contains(m.Content, customer) {
			n++
			at = m.Time
		}
	}
	return n, at
}

// TestEnquiryTimeoutThroughWecomCallbacks is issue 21's promise end to
// end: a customer's message to a 微信客服 account starts the timer, a
// second restarts it, a servicer's reply cancels it; with the leader
// killed between the event and the timer there is still exactly one
// alert. Callbacks are signed and encrypted by the fake; a bad signature
// is refused with 403, and a callback sent twice is one event.
func TestEnquiryTimeoutThroughWecomCallbacks(t *testing.T) {
	c, fake := setupWecomE2E(t)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.start(n1, "--bootstrap")
	eventually(t, 20*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	c.start(n2, "--join", n1.http)
	c.start(n3, "--join", n1.http)
	eventually(t, 30*time.Second, "three voters", func() bool { return votersAt(n1.http) == "n1 n2 n3" })
	// Callbacks go to n2: a follower, which forwards them to the leader
	// (once it knows it; before, it answers 503 and WeCom would retry).
	eventually(t, 20*time.Second, "n2 knows the leader", func() bool { s, err := status(n2.http); return err == nil && s.LeaderID != "" })
	require.NoError(t, fake.SetCallback(wecomfake.CallbackConfig{CorpID: wecomfake.DemoCorpID,
		URL: "http://" + n2.http + "/v1/wecom/callback/wecom_sales", Token: e2eCallbackToken, AESKey: e2eCallbackAESKey}))
	ctx := context.Background()
	send := func(m wecomfake.KfMessage) wecomfake.CallbackResult {
		t.Helper()
		m.OpenKfID = e2eKfAccount
		res, err := fake.SendKfMessage(ctx, m)
		require.NoError(t, err)
		return res
	}

	// A bad signature: 403, nothing recorded. (Not a kf message: WeCom
	// keeps those whatever happens to the callback, and the next
	// kf/sync_msg would fetch it.)
	// The follower forwards the POST and the leader checks it: a forward
	// that finds no leader (a busy machine, an election) is a 503, which
	// WeCom would retry; the signature's verdict is the 403 after it.
	var bad wecomfake.CallbackResult
	eventually(t, 20*time.Second, "a bad signature refused", func() bool {
		var err error
		bad, err = fake.SendContactChange(ctx, wecomfake.ContactChange{UserID: "liuyang", ExternalUserID: "wmX99", CallbackFaults: wecomfake.CallbackFaults{BadSignature: true}})
		require.NoError(t, err)
		return len(bad.Statuses) != 1 || bad.Statuses[0] != http.StatusServiceUnavailable
	})
	require.Equal(t, []int{http.StatusForbidden}, bad.Statuses)

	// wmA01 writes, writes again, and is answered: no alert, ever.
	res := send(wecomfake.KfMessage{ExternalUserID: "wmA01", Origin: 3, Text: "在吗？", CallbackFaults: wecomfake.CallbackFaults{Twice: true}})
	require.Equal(t, []int{http.StatusOK, http.StatusOK}, res.Statuses, "a callback sent twice is answered twice")
	keyA := "enquiry-" + e2eKfAccount + "-wmA01-" + res.MsgID
	var task struct {
		State string    `json:"state"`
		DueAt time.Time `json:"due_at"`
	}
	eventually(t, 20*time.Second, "wmA01's timer", func() bool { return getJSON(n1.http, "/v1/tasks/"+keyA, &task) == nil })
	firstDue := task.DueAt
	send(wecomfake.KfMessage{ExternalUserID: "wmA01", Origin: 3, Text: "有人吗？"})
	eventually(t, 20*time.Second, "wmA01's timer restarted", func() bool {
		return getJSON(n1.http, "/v1/tasks/"+keyA, &task) == nil && task.DueAt.After(firstDue)
	})
	t.Logf("wmA01: timer due %s, restarted to %s by the second message", firstDue.Format(time.RFC3339Nano), task.DueAt.Format(time.RFC3339Nano))
	send(wecomfake.KfMessage{ExternalUserID: "wmA01", Origin: 5, ServicerUserID: "liuyang", Text: "您好，在的"})
	eventually(t, 20*time.Second, "wmA01's timer cancelled", func() bool {
		return getJSON(n1.http, "/v1/tasks/"+keyA, &task) == nil && task.State == "cancelled"
	})

	// wmB02 writes twice; the leader is killed before the timer is due.
	start := time.Now()
	res = send(wecomfake.KfMessage{ExternalUserID: "wmB02", Origin: 3, Text: "报价什么时候发？"})
	keyB := "enquiry-" + e2eKfAccount + "-wmB02-" + res.MsgID
	eventually(t, 20*time.Second, "wmB02's timer", func() bool { return getJSON(n1.http, "/v1/tasks/"+keyB, &task) == nil })
	second := time.Now()
	send(wecomfake.KfMessage{ExternalUserID: "wmB02", Origin: 3, Text: "还在等"})
	firstDue = task.DueAt
	eventually(t, 20*time.Second, "wmB02's timer restarted", func() bool {
		return getJSON(n1.http, "/v1/tasks/"+keyB, &task) == nil && task.DueAt.After(firstDue)
	})
	old := c.leader(n1, n2, n3)
	require.NotNil(t, old)
	c.kill(old)
	t.Logf("killed the leader %s %.1fs after wmB02's first message; the timer is due at %s", old.id, time.Since(start).Seconds(), task.DueAt.Format(time.RFC3339Nano))
	var rest []*agentProc
	for _, n := range c.nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	eventually(t, 30*time.Second, "a new leader", func() bool { return c.leader(rest...) != nil })
	eventually(t, 60*time.Second, "wmB02's alert", func() bool { n, _ := alertsFor(fake, "wmB02"); return n > 0 })
	_, at := alertsFor(fake, "wmB02")
	t.Logf("wmB02: alert at %s, %.1fs after the second message (WAIT %s)", at.Format(time.RFC3339Nano), at.Sub(second).Seconds(), e2eEnquiryWait)
	require.False(t, at.Before(task.DueAt), "not before the restarted due time")

	// Give a second alert every chance to appear: wmA01's would be due by
	// now too, had the reply not cancelled it.
	deadline := time.Now().Add(2 * e2eEnquiryWait)
	eventually(t, 3*e2eEnquiryWait, "a quiet period", func() bool { return time.Now().After(deadline) })
	n, _ := alertsFor(fake, "wmB02")
	require.Equal(t, 1, n, "exactly one alert for wmB02")
	n, _ = alertsFor(fake, "wmA01")
	require.Zero(t, n, "no alert for the answered wmA01")
}
