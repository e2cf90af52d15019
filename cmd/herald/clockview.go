package main

import (
	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/leader"
)

// memberClocks is the leader's view of the members' clocks: the cluster's
// member reports (the leader polls every member for its clock, disk and
// writes), with their offsets as measured there.
type memberClocks struct {
	node *cluster.Node
	fsm  *engine.FSM
}

// MemberClocks returns the clocks the reports know, and how many members
// could report one: every replicated member but those whose build has no
// reports. Counted from the member records, not the reports, so that at
// the start of a term, before the first poll has answered, a majority's
// clocks are not known and the leader holds off.
func (m memberClocks) MemberClocks() ([]leader.MemberClock, int) {
	old := map[string]bool{}
	var out []leader.MemberClock
	for _, r := range m.node.MemberReports() {
		switch {
		case r.OldBuild:
			old[r.ID] = true
		case r.Report != nil:
			out = append(out, leader.MemberClock{ID: r.ID, Offset: r.Offset})
		}
	}
	members := 0
	for _, mb := range m.fsm.Members() {
		if !old[mb.ID] {
			members++
		}
	}
	return out, members
}
