package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine/api"
)

// tockRule fires every second too; the test pauses it.
const tockRule = `return rule {
  name     = "tock",
  schedule = "* * * * * *",
  timezone = "Asia/Shanghai",
  channel  = "mock",
  recipients = function(run) return { "dave" } end,
  message = function(run, to) return { msgtype = "text", content = run.slot } end,
}
`

// formCluster starts c's three agents (n1 bootstraps, the others join)
// and waits for three voters.
func (c *e2eCluster) formCluster() {
	c.t.Helper()
	n1 := c.nodes[0]
	c.start(n1, "--bootstrap")
	eventually(c.t, 20*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	for _, n := range c.nodes[1:] {
		c.start(n)
		eventually(c.t, 20*time.Second, n.id+" serves HTTP", func() bool { _, err := status(n.http); return err == nil })
		out, err := c.cli("cluster", "join", "--addr", n1.http, "--id", n.id, "--raft-addr", n.raft, "--http-addr", n.http)
		require.NoError(c.t, err, out)
	}
	eventually(c.t, 20*time.Second, "three voters", func() bool {
		s, err := status(c.nodes[2].http)
		voters := 0
		for _, m := range s.Members {
			if m.Voter {
				voters++
			}
		}
		return err == nil && voters == 3 && s.LeaderID != ""
	})
}

// follower is a running member that does not lead.
func (c *e2eCluster) follower() *agentProc {
	for _, n := range c.nodes {
		if s, err := status(n.http); err == nil && s.State == "follower" && s.LeaderID != "" {
			return n
		}
	}
	return nil
}

func allTasks(t *testing.T, addr string) []api.TaskView {
	t.Helper()
	var out []api.TaskView
	cursor := ""
	for {
		var page api.TaskList
		require.NoError(t, getJSON(addr, "/v1/tasks?limit=1000&cursor="+url.QueryEscape(cursor), &page))
		out = append(out, page.Tasks...)
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

func allAudit(t *testing.T, addr string) []api.AuditView {
	t.Helper()
	var out []api.AuditView
	cursor := ""
	for {
		var page api.AuditResponse
		q := "/v1/audit?limit=1000"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		require.NoError(t, getJSON(addr, q, &page))
		out = append(out, page.Records...)
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// postTask submits a task and returns the status and the answer.
func postTask(t *testing.T, addr, key string, due time.Time) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"rule":"remind","due_at":%q,"data":{"task":%q}}`, key, due.Format(time.RFC3339), key)
	resp, err := http.Post("http://"+addr+"/v1/tasks", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// outboxSlots reads every whole line of the outbox.
func outboxSlots(t *testing.T, path string) []outboxLine {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []outboxLine
	for _, line := range bytes.Split(b, []byte("\n")) {
		var l outboxLine
		if json.Unmarshal(line, &l) == nil && l.Key != "" {
			out = append(out, l)
		}
	}
	return out
}

func slotOf(t *testing.T, l outboxLine) string {
	var p struct{ Content string }
	require.NoError(t, json.Unmarshal(l.Payload, &p))
	return p.Content
}

// A backup taken through a follower of a running cluster, restored through
// a follower of a fresh cluster on other addresses (its data dirs never
// saw the first): every task, pause and audit record is back; the fresh
// cluster keeps its own members; no slot delivered before the backup is
// sent again, and the slots after it are caught up, each once; a task key
// answers as before. A damaged file is refused before anything changes.
func TestBackupRestoreIntoAFreshCluster(t *testing.T) {
	a := setupE2E(t)
	require.NoError(t, os.WriteFile(filepath.Join(a.rules, "remind.lua"), []byte(remindRule), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(a.rules, "tock.lua"), []byte(tockRule), 0o644))
	a.formCluster()
	out, err := a.cli("rules", "pause", "tock", "--reason", "before the backup", "--addr", a.nodes[0].http)
	require.NoError(t, err, out)
	due := time.Now().Add(time.Hour).Truncate(time.Second)
	for i := range 20 {
		code, body := postTask(t, a.nodes[0].http, fmt.Sprint("task-", i), due.Add(time.Duration(i)*time.Second))
		require.Equal(t, http.StatusCreated, code, body)
	}
	again, againBody := postTask(t, a.nodes[0].http, "task-0", due)
	eventually(t, 30*time.Second, "tick slots delivered", func() bool { return a.slotsDelivered() >= 3 })

	fol := a.follower()
	require.NotNil(t, fol)
	file := filepath.Join(a.dir, "cluster.backup")
	// Nothing writes tasks or audit records from here on. Each record is
	// proposed after its write answered: two joins, the pause, 21 submits.
	eventually(t, 10*time.Second, "every audit record on "+fol.id, func() bool { return len(allAudit(t, fol.http)) == 24 })
	tasks, audit := allTasks(t, fol.http), allAudit(t, fol.http)
	require.Len(t, tasks, 20)
	before := map[string]bool{} // tick slots delivered before the backup began
	for _, l := range outboxSlots(t, a.outbox) {
		before[slotOf(t, l)] = true
	}
	out, err = a.cli("snapshot", "save", file, "--addr", fol.http)
	require.NoError(t, err, out)
	a.stopAll()
	stoppedAt := len(outboxSlots(t, a.outbox))
	t.Log(strings.TrimSpace(out))
	out, err = a.cli("snapshot", "inspect", file, "--tz", "Asia/Shanghai")
	require.NoError(t, err, out)
	require.Contains(t, out, "verified")
	require.Contains(t, out, "(Asia/Shanghai)")
	require.Regexp(t, `tasks\s+20\s`, out)
	t.Logf("herald snapshot inspect:\n%s", out)

	// The fresh cluster: other ports, empty data dirs, the same channel
	// (so the outbox tells what reached the person twice), and no rules
	// yet: a cluster with rules fires them from its first second, from
	// its own empty state.
	b := &e2eCluster{t: t, dir: t.TempDir(), config: a.config, outbox: a.outbox}
	b.rules = filepath.Join(b.dir, "rules")
	require.NoError(t, os.MkdirAll(b.rules, 0o755))
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		b.nodes = append(b.nodes, &agentProc{id: id, raft: freeAddr(t), http: freeAddr(t), data: filepath.Join(b.dir, id)})
	}
	t.Cleanup(b.stopAll)
	b.formCluster()
	bfol := b.follower()
	require.NotNil(t, bfol)
	ownAudit := allAudit(t, bfol.http)

	// Damaged files change nothing: the leader reads them whole first.
	good, err := os.ReadFile(file)
	require.NoError(t, err)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0x01
	for name, bad := range map[string][]byte{"corrupt": corrupt, "truncated": good[:len(good)*2/3]} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := (&cluster.Client{Addr: bfol.http}).Restore(ctx, bytes.NewReader(bad))
		cancel()
		var ae *cluster.APIError
		require.ErrorAs(t, err, &ae, name)
		require.Equal(t, http.StatusBadRequest, ae.Status, name)
		require.Contains(t, ae.Message, "nothing was changed", name)
	}
	require.Empty(t, allTasks(t, bfol.http))
	require.Equal(t, ownAudit, allAudit(t, bfol.http), "a refused restore is not recorded")
	bad := filepath.Join(b.dir, "bad.backup")
	require.NoError(t, os.WriteFile(bad, corrupt, 0o600))
	out, err = b.cli("snapshot", "restore", bad, "--addr", bfol.http)
	require.Error(t, err)
	require.Contains(t, out, "checksum does not match")

	out, err = b.cli("snapshot", "restore", file, "--addr", bfol.http)
	require.NoError(t, err, out)
	t.Log(strings.TrimSpace(out))
	for _, n := range b.nodes {
		eventually(t, 20*time.Second, n.id+" holds the backup's tasks and the restore's record", func() bool {
			var page api.TaskList
			var au api.AuditResponse
			return getJSON(n.http, "/v1/tasks?limit=1000", &page) == nil && len(page.Tasks) == len(tasks) &&
				getJSON(n.http, "/v1/audit?limit=1", &au) == nil && len(au.Records) == 1 && au.Records[0].Action == "snapshot.restore"
		})
		require.Equal(t, tasks, allTasks(t, n.http), n.id)
		got := allAudit(t, n.http)
		require.NotEmpty(t, got)
		require.Equal(t, "snapshot.restore", got[0].Action, "the restore is recorded after it, on %s", n.id)
		require.Equal(t, audit, got[1:], n.id)
	}
	// The fresh cluster's own members, at their own addresses.
	var cs cluster.Status
	require.NoError(t, getJSON(bfol.http, "/v1/cluster/status", &cs))
	addrs := map[string]string{}
	for _, m := range cs.Members {
		addrs[m.ID] = m.RaftAddr + " " + m.HTTPAddr
	}
	for _, n := range b.nodes {
		require.Equal(t, n.raft+" "+n.http, addrs[n.id])
	}

	// Now the rules: the pause came back, the ticking rule catches up
	// from the backup's cursor.
	for _, f := range []string{"tick.lua", "tock.lua", "remind.lua"} {
		src, err := os.ReadFile(filepath.Join(a.rules, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(b.rules, f), src, 0o644))
	}
	for _, n := range b.nodes {
		eventually(t, 20*time.Second, "the rules loaded on "+n.id+", tock paused", func() bool {
			var st api.Status
			if getJSON(n.http, "/v1/status", &st) != nil || len(st.Rules) != 3 {
				return false
			}
			for _, r := range st.Rules {
				if r.Name == "tock" {
					return r.Paused && r.Reason == "before the backup"
				}
			}
			return false
		})
	}
	code, body := postTask(t, bfol.http, "task-0", due)
	require.Equal(t, again, code, body)
	require.JSONEq(t, againBody, body, "a task key answers as it did")
	// The catch-up's slots are all due at once and go out in any order:
	// wait until every slot from the first one delivered (by the first
	// cluster) to one after the rules came is there, none missing.
	rulesIn := time.Now()
	var upTo time.Time
	eventually(t, 30*time.Second, "every slot caught up", func() bool {
		got, _ := a.delivered()
		var last time.Time
		upTo, last = contiguousFrom(t, got["alice"])
		return upTo.Equal(last) && upTo.After(rulesIn.Add(2*time.Second))
	})
	b.stopAll()

	lines := outboxSlots(t, a.outbox)
	last := ""
	for s := range before {
		last = max(last, s)
	}
	resent := 0
	for _, l := range lines[stoppedAt:] {
		s := slotOf(t, l)
		require.False(t, before[s], "slot %s was delivered before the backup and sent again", s)
		require.Greater(t, s, last)
		require.NotEqual(t, "dave", l.Recipient, "tock is paused")
		if l.Duplicate {
			resent++ // fired after the backup, before the first cluster stopped
		}
	}
	got, _ := a.requireEachSlotOnce()
	t.Logf("%d tick slots reached each person once, across both clusters; %d sends repeated slots the first cluster sent after the backup (the mock dropped them by key)",
		len(got["alice"]), resent)
	for _, who := range []string{"alice", "bob"} {
		through, _ := contiguousFrom(t, got[who])
		require.False(t, through.Before(upTo), "%s: a slot after %s was never sent", who, through)
	}
}

// contiguousFrom reads slots (RFC 3339, one a second) and returns the last
// slot of the unbroken run from the first one, and the last slot of all.
func contiguousFrom(t *testing.T, slots map[string]int) (through, last time.Time) {
	t.Helper()
	var at []time.Time
	for s := range slots {
		at = append(at, mustTime(t, s))
	}
	if len(at) == 0 {
		return time.Time{}, time.Time{}
	}
	slices.SortFunc(at, time.Time.Compare)
	through = at[0]
	for _, s := range at[1:] {
		if !s.Equal(through.Add(time.Second)) {
			break
		}
		through = s
	}
	return through, at[len(at)-1]
}
