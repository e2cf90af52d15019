package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
)

// upgradeFrom is the commit the rolling upgrade starts from: the build users
// ran when the replicated log became versioned (issue 13). Its data dir is
// also checked in as cluster/testdata/golden-9f8fda9.
const upgradeFrom = "9f8fda9"

// upgradeTick fires every second to three people.
const upgradeTick = `return rule {
  name     = "tick",
  schedule = "* * * * * *",
  timezone = "Asia/Shanghai",
  channel  = "mock",
  catchup  = "1h",
  recipients = function(run) return { "alice", "bob", "carol" } end,
  message = function(run, to) return { msgtype = "text", content = run.slot } end,
}
`

// upgradeRemind is triggered by API tasks; each message names its task.
const upgradeRemind = `return rule {
  name     = "remind",
  timezone = "Asia/Shanghai",
  channel  = "mock",
  recipients = function(run) return { "dave" } end,
  message = function(run, to) return { msgtype = "text", content = run.data.task } end,
}
`

// oldHerald builds herald at commit rev from this repository's history in a
// temporary directory (git archive: the repository is not touched) and
// returns the binary. HERALD_OLD_BIN names a prebuilt one instead. Without
// the history (a shallow clone) the test is skipped, saying so.
func oldHerald(t *testing.T, rev string) string {
	t.Helper()
	if p := os.Getenv("HERALD_OLD_BIN"); p != "" {
		return p
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("rolling upgrade test needs this repository's git history to build %s: not a git checkout (%v)", rev, err)
	}
	root := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", rev+"^{commit}").Run(); err != nil {
		shallow, _ := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output()
		if strings.TrimSpace(string(shallow)) == "true" {
			t.Skipf("rolling upgrade test needs commit %s, absent from this shallow clone: run `git fetch --unshallow` (or set HERALD_OLD_BIN)", rev)
		}
		t.Fatalf("commit %s is not in this repository: %v", rev, err)
	}
	src := filepath.Join(t.TempDir(), "herald-"+rev)
	archive, err := exec.Command("git", "-C", root, "archive", "--format=tar", rev).Output()
	require.NoError(t, err, "git archive %s", rev)
	require.NoError(t, untar(bytes.NewReader(archive), src))
	bin := filepath.Join(t.TempDir(), "herald-"+rev)
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/herald")
	build.Dir = src
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build herald %s:\n%s", rev, out)
	return bin
}

// untar writes a tar stream of regular files and directories under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("tar entry %q leaves %s", h.Name, dir)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// stop stops one node as an operator would (SIGTERM) and waits for it.
func (c *e2eCluster) stop(n *agentProc) {
	c.t.Helper()
	require.NoError(c.t, n.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(c.t, err, "%s did not stop cleanly", n.id)
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
		c.t.Fatalf("%s did not stop within 30s of SIGTERM", n.id)
	}
	_ = n.log.Close()
	n.log = nil
}

// memberVersions reads the members' replicated-log versions from a node's
// /v1/status ("-" where the build does not report one).
func memberVersions(addr string) string {
	var s struct {
		Members []struct {
			ID         string  `json:"id"`
			FSMVersion *uint16 `json:"herald_fsm_version"`
		} `json:"members"`
	}
	if err := getJSON(addr, "/v1/status", &s); err != nil {
		return err.Error()
	}
	var parts []string
	for _, m := range s.Members {
		v := "-"
		if m.FSMVersion != nil {
			v = fmt.Sprint(*m.FSMVersion)
		}
		parts = append(parts, m.ID+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// submitTask submits an API task through addr, retrying while no leader
// can take it (during an election).
func submitTask(t *testing.T, addr, key string, due time.Time) {
	t.Helper()
	body := map[string]any{"key": key, "rule": "remind", "due_at": due.Format(time.RFC3339Nano), "data": map[string]string{"task": key}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := (&cluster.Client{Addr: addr}).Do(ctx, http.MethodPost, "/v1/tasks", body, nil)
		cancel()
		if err == nil {
			return
		}
		var apiErr *cluster.APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 {
			t.Fatalf("submit %s: %v", key, err)
		}
		require.True(t, time.Now().Before(deadline), "submit %s: %v", key, err)
		time.Sleep(100 * time.Millisecond) // polling with a deadline: no leader yet
	}
}

// TestRollingUpgrade starts three nodes on the build of upgradeFrom, then
// replaces them one by one (followers first, the leader last) with this
// build while a rule fires every second and API tasks come due, and shows
// that every slot reached every person exactly once, none skipped, and
// every task was delivered once.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test; skipped with -short")
	}
	old := oldHerald(t, upgradeFrom)
	c := setupE2E(t)
	require.NoError(t, os.Remove(filepath.Join(c.rules, "tick.lua")))
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "tick.lua"), []byte(upgradeTick), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "remind.lua"), []byte(upgradeRemind), 0o644))
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	for _, n := range c.nodes {
		n.bin = old
	}
	c.start(n1, "--bootstrap")
	eventually(t, 30*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	for _, n := range []*agentProc{n2, n3} {
		c.start(n)
		eventually(t, 30*time.Second, n.id+" serves HTTP", func() bool { _, err := status(n.http); return err == nil })
		out, err := exec.Command(old, "cluster", "join", "--addr", n1.http, "--id", n.id, "--raft-addr", n.raft, "--http-addr", n.http).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	eventually(t, 30*time.Second, "three voters", func() bool {
		s, err := status(n3.http)
		voters := 0
		for _, m := range s.Members {
			if m.Voter {
				voters++
			}
		}
		return err == nil && voters == 3 && s.LeaderID != ""
	})
	t.Logf("three nodes on %s: %s", upgradeFrom, memberVersions(n1.http))
	eventually(t, 30*time.Second, "slots delivered by the old build", func() bool { return c.slotsDelivered() >= 3 })

	// Tasks are submitted before each step, due while it happens.
	var tasks []string
	submit := func(via *agentProc, n int) {
		for range n {
			key := fmt.Sprintf("up-%02d", len(tasks)+1)
			submitTask(t, via.http, key, time.Now().Add(time.Duration(2+len(tasks)%5)*time.Second))
			tasks = append(tasks, key)
		}
	}
	submit(n1, 5)

	// Followers first, the leader last: one election in the whole upgrade.
	lead := c.leader(c.nodes...)
	require.NotNil(t, lead)
	order := []*agentProc{}
	for _, n := range c.nodes {
		if n != lead {
			order = append(order, n)
		}
	}
	order = append(order, lead)
	for _, n := range order {
		var others []*agentProc
		for _, o := range c.nodes {
			if o != n {
				others = append(others, o)
			}
		}
		submit(others[0], 5)
		wasLeader := c.leader(n) == n
		c.stop(n)
		n.bin = "" // this build
		c.start(n)
		// The old leader, restarted within an election timeout, may win the
		// next election again (its log is complete): that is as good as
		// following, and "caught up" is then true of it by definition.
		took := eventually(t, 60*time.Second, n.id+" back on this build, in the cluster and caught up", func() bool {
			l := c.leader(c.nodes...)
			if l == nil {
				return false
			}
			ls, err := status(l.http)
			if err != nil {
				return false
			}
			s, err := status(n.http)
			return err == nil && s.LeaderID != "" && s.AppliedIndex >= ls.AppliedIndex
		})
		before := c.slotsDelivered()
		eventually(t, 30*time.Second, "slots delivered after "+n.id+" was upgraded", func() bool { return c.slotsDelivered() >= before+3 })
		t.Logf("%s (was leader: %v) upgraded, caught up in %s; leader now %s; versions: %s",
			n.id, wasLeader, took.Round(time.Millisecond), c.leader(c.nodes...).id, memberVersions(n.http))
	}

	// Every task delivered, and every slot up to a moment after the last
	// step to everyone.
	eventually(t, 60*time.Second, "every task delivered", func() bool {
		got, _ := c.delivered()
		for _, k := range tasks {
			if got["dave"][k] == 0 {
				return false
			}
		}
		return true
	})
	settled := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	people := []string{"alice", "bob", "carol"}
	var first time.Time
	eventually(t, 60*time.Second, "every slot up to "+settled.Format(time.RFC3339)+" delivered to everyone", func() bool {
		got, _ := c.delivered()
		first = time.Time{}
		for _, who := range people {
			for s := range got[who] {
				if at, err := time.Parse(time.RFC3339, s); err == nil && (first.IsZero() || at.Before(first)) {
					first = at
				}
			}
		}
		if first.IsZero() {
			return false
		}
		for at := first; !at.After(settled); at = at.Add(time.Second) {
			for _, who := range people {
				if got[who][at.In(shanghai(t)).Format(time.RFC3339)] == 0 {
					return false
				}
			}
		}
		return true
	})
	// Done as the README says: every member reports this build's version.
	want := fmt.Sprintf("n1=%d n2=%d n3=%d", engine.FSMVersion, engine.FSMVersion, engine.FSMVersion)
	for _, n := range c.nodes {
		eventually(t, 30*time.Second, n.id+" reports every member on FSM version "+fmt.Sprint(engine.FSMVersion),
			func() bool { return memberVersions(n.http) == want })
	}
	t.Logf("after the upgrade: %s", memberVersions(n1.http))
	c.stopAll()

	got, raw := c.delivered()
	slots, dups, skipped := 0, 0, 0
	for at := first; !at.After(settled); at = at.Add(time.Second) {
		slots++
		for _, who := range people {
			switch n := got[who][at.In(shanghai(t)).Format(time.RFC3339)]; {
			case n == 0:
				skipped++
			case n > 1:
				dups += n - 1
			}
		}
	}
	delivered := 0
	for _, k := range tasks {
		switch n := got["dave"][k]; {
		case n == 1:
			delivered++
		case n > 1:
			dups += n - 1
		}
	}
	for _, who := range people {
		for s, n := range got[who] {
			require.Equal(t, 1, n, "%s got slot %s %d times", who, s, n)
		}
	}
	unique := 0
	for _, m := range got {
		for _, n := range m {
			unique += n
		}
	}
	t.Logf("rolling upgrade %s → this build: %d slots (%s to %s) × %d people, %d duplicates, %d skipped; tasks delivered %d/%d; %d raw receipts, %d resends absorbed by the idempotency key",
		upgradeFrom, slots, first.In(shanghai(t)).Format(time.RFC3339), settled.In(shanghai(t)).Format(time.RFC3339), len(people),
		dups, skipped, delivered, len(tasks), raw, raw-unique)
	require.Zero(t, dups, "duplicates")
	require.Zero(t, skipped, "skipped")
	require.Equal(t, len(tasks), delivered, "tasks delivered once each")
}

func shanghai(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return loc
}
