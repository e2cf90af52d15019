package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/plugins/mock"
)

// reloadStatus is what the reload test reads of /v1/status.
type reloadStatus struct {
	State    string            `json:"state"`
	Term     uint64            `json:"term"`
	Config   *api.ConfigStatus `json:"config"`
	Channels []struct {
		Name    string `json:"name"`
		Healthy bool   `json:"healthy"`
	} `json:"channels"`
	Rules []api.RuleStatus `json:"rules"`
}

// tick2Rule fires every second through the channel a reload adds.
const tick2Rule = `return rule {
  name     = "tick2",
  schedule = "* * * * * *",
  timezone = "Asia/Shanghai",
  channel  = "late",
  catchup  = "1h",
  recipients = function(run) return { "carol" } end,
  message = function(run, to) return { msgtype = "text", content = run.slot } end,
}
`

// TestReloadOnSIGHUP: three agents, a rule firing every second. A SIGHUP
// to each adds a token (from a token_file) and a channel: the token works
// at once, a rule file naming the new channel loads and sends through it,
// the term does not move, and no slot of either rule is more than a
// second late. A broken config, and one changing plan_ahead, change
// nothing and say why in the log and /v1/status.
func TestReloadOnSIGHUP(t *testing.T) {
	c := setupTokenCluster(t)
	admin := e2eTokens["HT_ADMIN"]
	lateOutbox := filepath.Join(c.dir, "late.jsonl")
	tokenFile := filepath.Join(c.dir, "late.token")
	lateToken := "late-3b9e1c7a5d2f4086"
	require.NoError(t, os.WriteFile(tokenFile, []byte(lateToken+"\n"), 0o600))
	base, err := os.ReadFile(c.config)
	require.NoError(t, err)

	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.start(n1, "--bootstrap")
	eventually(t, 20*time.Second, "n1 leads", func() bool {
		var s statusView
		return getAs(n1.http, admin, "/v1/status", &s) == nil && s.State == "leader"
	})
	c.start(n2, "--join", n1.http)
	c.start(n3, "--join", n1.http)
	eventually(t, 30*time.Second, "three voters", func() bool {
		var s statusView
		voters := 0
		err := getAs(n1.http, admin, "/v1/status", &s)
		for _, m := range s.Members {
			if m.Voter {
				voters++
			}
		}
		return err == nil && voters == 3
	})
	// Steady first: a member just added has no clock report yet, and the
	// leader holds firing until a majority's clocks are known (up to a
	// report interval, 5 s); that wait is the join's, not the reload's.
	steadyFrom := time.Now().Add(6 * time.Second)
	eventually(t, 40*time.Second, "tick sends on time after the joins", func() bool {
		recs, _ := mock.ReadOutbox(c.outbox)
		worst, slots := lateness(t, recs, steadyFrom)
		return slots >= 2 && worst < 500*time.Millisecond
	})
	var before reloadStatus
	require.NoError(t, getAs(n1.http, admin, "/v1/status", &before))
	require.Nil(t, before.Config.LastReload)

	hupAll := func() {
		for _, n := range c.nodes {
			require.NoError(t, n.cmd.Process.Signal(syscall.SIGHUP))
		}
	}
	lastReload := func(n *agentProc, token string) *api.ReloadStatus {
		var s reloadStatus
		if getAs(n.http, token, "/v1/status", &s) != nil || s.Config == nil {
			return nil
		}
		return s.Config.LastReload
	}

	// The reload: a token read from a file, and a second mock channel.
	added := strings.Replace(string(base), "tokens:\n", "  late:\n    plugin: mock\n    outbox: "+lateOutbox+"\ntokens:\n", 1) +
		"  - {name: late, role: operate, token_file: " + tokenFile + "}\n"
	require.NoError(t, os.WriteFile(c.config, []byte(added), 0o644))
	hupAt := time.Now()
	t.Logf("SIGHUP at %s", hupAt.Format(time.RFC3339Nano))
	hupAll()
	for _, n := range c.nodes {
		eventually(t, 20*time.Second, n.id+" reloaded", func() bool {
			r := lastReload(n, admin)
			return r != nil && r.OK
		})
		r := lastReload(n, admin)
		require.Equal(t, []string{"channels", "tokens"}, r.Changed)
		// The new token works at once, on every node.
		var s reloadStatus
		require.NoError(t, getAs(n.http, lateToken, "/v1/status", &s), n.id)
		require.Len(t, s.Channels, 2)
	}
	t.Logf("all three reloaded %s after the SIGHUP", time.Since(hupAt).Round(time.Millisecond))
	// An operate token may write: a task through a follower.
	out, err := c.cliAs(lateToken, "task", "submit", "after-reload", "--rule", "none_such", "--due", time.Now().Add(time.Hour).Format(time.RFC3339), "--addr", n2.http)
	require.Error(t, err, "none_such is no rule")
	require.Contains(t, out, "none_such", "refused by the leader for the rule, not for the token")

	// The rule file naming the new channel, loaded after the reload.
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "tick2.lua"), []byte(tick2Rule), 0o644))
	eventually(t, 30*time.Second, "tick2 sends through the new channel", func() bool {
		recs, _ := mock.ReadOutbox(lateOutbox)
		return len(recs) >= 5
	})

	// A broken config, then one that changes what cannot change: each is
	// refused whole, logged and shown; the reloaded config stays.
	require.NoError(t, os.WriteFile(c.config, []byte(added+"  - {name: broken\n"), 0o644))
	hupAll()
	for _, n := range c.nodes {
		eventually(t, 20*time.Second, n.id+" refuses the broken config", func() bool {
			r := lastReload(n, lateToken)
			return r != nil && !r.OK && strings.Contains(r.Error, "config "+c.config)
		})
	}
	require.NoError(t, os.WriteFile(c.config, []byte(added+"plan_ahead: 30s\n"), 0o644))
	hupAll()
	for _, n := range c.nodes {
		eventually(t, 20*time.Second, n.id+" refuses plan_ahead", func() bool {
			r := lastReload(n, lateToken)
			return r != nil && !r.OK && strings.Contains(r.Error, "plan_ahead cannot change while the node runs")
		})
		require.Contains(t, c.logOf(n), "config reload refused; the running config stays in force")
		var s reloadStatus
		require.NoError(t, getAs(n.http, lateToken, "/v1/status", &s), "the reloaded token still works on %s", n.id)
		require.Len(t, s.Channels, 2)
	}

	// Let tick and tick2 run on a little, then check every slot.
	end := time.Now().Add(3 * time.Second)
	eventually(t, 10*time.Second, "three more seconds of slots", func() bool { return time.Now().After(end) })
	var after reloadStatus
	require.NoError(t, getAs(n1.http, admin, "/v1/status", &after))
	require.Equal(t, "leader", after.State)
	require.Equal(t, before.Term, after.Term, "no election")

	for _, box := range []string{c.outbox, lateOutbox} {
		recs, err := mock.ReadOutbox(box)
		require.NoError(t, err)
		worst, slots := lateness(t, recs, hupAt.Add(-2*time.Second))
		t.Logf("%s: %d slots, the latest %s after its slot", filepath.Base(box), slots, worst)
		require.LessOrEqual(t, worst, time.Second, "a slot more than a second late")
	}
	got, _ := c.requireEachSlotOnce()
	for _, who := range []string{"alice", "bob"} {
		through, last := contiguousFrom(t, got[who])
		require.Equal(t, last, through, "%s: a tick slot skipped after %s", who, through)
		t.Logf("tick: %s got %d slots, each once, none skipped, up to %s", who, len(got[who]), last.Format(time.RFC3339))
	}
}

// lateness is the latest a slot from since on was first received after
// the slot, and how many such slots the outbox holds.
func lateness(t *testing.T, recs []mock.Record, since time.Time) (time.Duration, int) {
	first := map[string]time.Time{}
	for _, r := range recs {
		var p struct{ Content string }
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		if at, ok := first[p.Content]; !ok || r.ReceivedAt.Before(at) {
			first[p.Content] = r.ReceivedAt
		}
	}
	var worst time.Duration
	for slot, at := range first {
		s, err := time.Parse(time.RFC3339, slot)
		require.NoError(t, err, fmt.Sprintf("slot %q", slot))
		if s.Before(since) {
			delete(first, slot)
			continue
		}
		if at.Sub(s) > 500*time.Millisecond {
			t.Logf("slot %s received %s late", slot, at.Sub(s))
		}
		worst = max(worst, at.Sub(s))
	}
	return worst, len(first)
}
