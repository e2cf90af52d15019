package cluster

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the status for people: who answered, then one row per
// member. `herald cluster status` uses it.
func (s Status) WriteTable(w io.Writer) error {
	leader := s.LeaderID
	if leader == "" {
		leader = "(none)"
	}
	if _, err := fmt.Fprintf(w, "node %s is %s; leader %s; term %d; applied index %d\n\n",
		s.NodeID, s.State, leader, s.Term, s.AppliedIndex); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDR\tHTTP ADDR\tSUFFRAGE\tLEADER")
	for _, m := range s.Members {
		http := m.HTTPAddr
		if http == "" {
			http = "-"
		}
		suff := m.Suffrage
		if suff == "" { // a node of a build before read replicas answered
			suff = map[bool]string{true: "voter", false: "nonvoter"}[m.Voter]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.RaftAddr, http, suff, yesNo(m.Leader))
	}
	if len(s.Members) == 0 {
		fmt.Fprintln(tw, "(no members: this node is not in a cluster yet)")
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
