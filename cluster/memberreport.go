package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/buffered"
)

// The member report channel: while it leads, a node asks every other member
// every ReportInterval what only that member can see of itself (its disk,
// its failed writes, its clock), so that the leader can raise what a
// follower cannot: a follower has no way to propose anything. Raft's own
// RPCs carry none of this. The answers are kept in memory, for this term
// only, and read through MemberReports.
//
// The request carries no proof of the secret (it changes nothing, and a
// proof's timestamp would be refused by the member whose clock is off, the
// one that must be heard); with a secret the answer proves it instead, over
// the leader's fresh nonce (peerReads). A member on an older build answers
// 404 and shows as unknown.

// reportPath is where a member answers with its Report.
const reportPath = clusterPrefix + "report"

// Report is what a member says of itself (GET /v1/cluster/report).
type Report struct {
	NodeID string `json:"node_id"`
	// Now is the member's wall clock (UTC) when it answered.
	Now time.Time `json:"now"`
	// DataDirFreeBytes is the space left to this process in the data dir's
	// file system; DataDirError says why it is unknown (then 0).
	DataDirFreeBytes uint64 `json:"data_dir_free_bytes"`
	DataDirError     string `json:"data_dir_error,omitempty"`
	// Log covers the Raft log and stable store (raft.db), Snapshot the
	// snapshots this member wrote or received.
	Log      WriteHealth `json:"log"`
	Snapshot WriteHealth `json:"snapshot"`
}

// MemberReport is one member's latest report as the leader holds it.
type MemberReport struct {
	ID string
	// Report is nil while the member's state is unknown: it did not answer
	// (Unknown says why), or runs a build without reports.
	Report  *Report
	Unknown string
	// OldBuild: the member runs a build without reports (it answered
	// 404); it cannot report, rather than failed to.
	OldBuild bool
	// Sent and Received bracket the request on this node's clock. Offset
	// is the member's clock minus this node's, Report.Now minus the
	// midpoint of Sent and Received (off by at most RTT/2); RTT is the
	// round trip. This node's own report has Offset and RTT zero, Sent and
	// Received at its Now.
	Sent, Received time.Time
	Offset, RTT    time.Duration
}

// Report is this node's own report, as it answers the leader.
func (n *Node) Report() Report {
	r := Report{NodeID: n.cfg.NodeID, Log: n.stores.log.report(), Snapshot: n.stores.snapshot.report()}
	free, err := freeBytes(n.cfg.DataDir)
	if err != nil {
		r.DataDirError = err.Error()
	} else {
		r.DataDirFreeBytes = free
	}
	r.Now = time.Now().UTC()
	return r
}

// freeBytes is the space in dir's file system that an unprivileged
// writer may still use (what bbolt, not root, can get).
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil //nolint:gosec // Bsize is a positive block size
}

// MemberReports is the latest report of every member this node knows of,
// ordered by id, this node's own taken now. While this node leads, the
// others are from its poll (at most ReportInterval old, unknown for a
// member that did not answer); a member added since the last poll, and
// every other member on a node that does not lead, is missing.
func (n *Node) MemberReports() []MemberReport {
	own := n.Report()
	out := []MemberReport{{ID: n.cfg.NodeID, Report: &own, Sent: own.Now, Received: own.Now}}
	n.reportsMu.Lock()
	for _, r := range n.reports {
		out = append(out, r)
	}
	n.reportsMu.Unlock()
	slices.SortFunc(out, func(a, b MemberReport) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (n *Node) handleReport(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, n.Report())
}

// provenRead answers a read in peerReads with the reply HMAC over the
// caller's nonce when this node has a secret and the caller sent one.
// Without a nonce the answer is plain: a read behind the API's token
// like any other, which the leader does not take from a member when it has
// a secret itself.
func (n *Node) provenRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		nonce := r.Header.Get(PeerNonceHeader)
		if !n.peer.enabled() || nonce == "" {
			h(w, r)
			return
		}
		if len(nonce) > 64 {
			writeError(w, http.StatusBadRequest, PeerNonceHeader+" is over 64 characters")
			return
		}
		path := r.URL.Path
		sr := &signedReply{Writer: buffered.Writer{ResponseWriter: w}, mac: func(status int, body []byte) string {
			return n.peer.readReplyMAC(path, nonce, status, body)
		}}
		h(sr, r)
		sr.flush()
	}
}

// Report asks the node at Addr for its report.
func (c *Client) Report(ctx context.Context) (Report, error) {
	var r Report
	err := c.Do(ctx, http.MethodGet, reportPath, nil, &r)
	return r, err
}

// pollReports runs while this node leads: every ReportInterval it asks
// every other member for its report. The reports are this term's: they
// are dropped when it ends.
func (n *Node) pollReports(ctx context.Context) {
	defer func() {
		n.reportsMu.Lock()
		n.reports = nil
		n.reportsMu.Unlock()
	}()
	_ = poll(ctx, n.shutdownCh, n.cfg.ReportInterval, func() bool {
		n.refreshReports(ctx)
		return false // until the term ends or the node stops
	})
}

// refreshReports asks every other member at once and keeps the answers.
func (n *Node) refreshReports(ctx context.Context) {
	var (
		mu  sync.Mutex
		got = map[string]MemberReport{}
		wg  sync.WaitGroup
	)
	for _, m := range n.sm.Members() {
		if m.ID == n.cfg.NodeID {
			continue
		}
		wg.Go(func() {
			r := n.askReport(ctx, m)
			mu.Lock()
			got[m.ID] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the term ended: what came back now is not worth keeping
	}
	n.reportsMu.Lock()
	n.reports = got
	n.reportsMu.Unlock()
}

// askReport asks member m for its report, within one ReportInterval.
func (n *Node) askReport(ctx context.Context, m engine.Member) MemberReport {
	mr := MemberReport{ID: m.ID}
	if m.HTTPAddr == "" {
		mr.Unknown = "no HTTP address recorded yet"
		return mr
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ReportInterval)
	defer cancel()
	mr.Sent = time.Now()
	rep, err := n.clientFor(m.HTTPAddr).Report(ctx)
	mr.Received = time.Now()
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		mr.Unknown, mr.OldBuild = "its build has no reports (an older build)", true
	case err != nil:
		mr.Unknown = err.Error()
	case rep.NodeID != m.ID:
		mr.Unknown = fmt.Sprintf("%s answered as node %s", m.HTTPAddr, rep.NodeID)
	default:
		mr.Report = &rep
		mr.RTT = mr.Received.Sub(mr.Sent)
		// rep.Now has no monotonic reading, so this compares wall clocks.
		mr.Offset = rep.Now.Sub(mr.Sent.Add(mr.RTT / 2))
	}
	return mr
}
