package cluster

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/engine"
)

// The leader keeps every member's record of its build current, so that it
// never proposes a command some member's build could not apply (see
// engine.FSM.Admit). Members report their build in GET /v1/cluster/status;
// builds from before FSM versions report none and count as FSM version 1.
// The leader asks rather than the members announcing themselves because an
// older leader would refuse an announcement it does not know, and a member
// restarted on a new build must be seen by whichever leader comes next.

// recordVersions runs while this node leads: every ReconcileInterval it
// asks each other member for its build and records a change. On the same
// pass it drops the records of members no longer in the Raft
// configuration (pruneRecords) and audits recoveries (auditRecoveries).
func (n *Node) recordVersions(ctx context.Context) {
	absent := map[string]bool{}
	_ = poll(ctx, n.shutdownCh, n.cfg.ReconcileInterval, func() bool {
		n.refreshVersions(ctx)
		n.pruneRecords(ctx, absent)
		n.auditRecoveries(ctx)
		return false // until the term ends or the node stops
	})
}

// refreshVersions records the build of every member that answers.
func (n *Node) refreshVersions(ctx context.Context) {
	for _, m := range n.sm.Members() {
		if m.ID == n.cfg.NodeID || m.HTTPAddr == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, n.cfg.ReconcileInterval)
		st, err := n.clientFor(m.HTTPAddr).Status(rctx)
		cancel()
		if err != nil || st.NodeID != m.ID {
			continue // down, or someone else now: ask again next time
		}
		build := memberBuild(st.Build)
		if st.FSMVersion == m.FSMVersion && build == m.Build {
			continue
		}
		n.log.Info("member runs another build", "id", m.ID, "fsm_version", max(st.FSMVersion, 1), "build", build)
		m.FSMVersion, m.Build = st.FSMVersion, build
		if err := n.upsertMember(ctx, m); err != nil {
			n.log.Warn("recording a member's build failed; will retry", "id", m.ID, "err", err)
		}
	}
}

// selfMember is this node's member record as it should stand.
func (n *Node) selfMember() engine.Member {
	return engine.Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr,
		FSMVersion: engine.FSMVersion, Build: engine.Build}
}

// sameAddrs is true when two records of one member agree on its addresses
// (the build fields are the leader's to keep current).
func sameAddrs(a, b engine.Member) bool {
	return a.ID == b.ID && a.RaftAddr == b.RaftAddr && a.HTTPAddr == b.HTTPAddr
}

// maxBuildLen bounds the build name a member reports: it is written into the
// replicated log each time it changes, so a misbehaving member must not be
// able to put a megabyte there.
const maxBuildLen = 64

// memberBuild is a member's reported build as it is recorded: printable
// characters only, at most maxBuildLen bytes.
func memberBuild(s string) string {
	var b strings.Builder
	for _, r := range s {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > maxBuildLen {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
