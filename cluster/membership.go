package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/backoff"
)

// Membership errors.
var (
	// ErrUnknownMember: the id is neither in the Raft configuration nor in
	// the member records.
	ErrUnknownMember = errors.New("no such member")
	// ErrLastVoter: the only voter cannot leave or be removed (the cluster
	// would have no one left to decide).
	ErrLastVoter = errors.New("cannot remove the only voter")
	// ErrBadRequest wraps every invalid join/remove request.
	ErrBadRequest = errors.New("bad request")
	// ErrMemberConflict: a join request clashes with a member that is
	// still running (the leader itself, or a live node with the same id).
	ErrMemberConflict = errors.New("member conflict")
	// ErrRaftUnreachable: the leader cannot open a connection to a joining
	// node's Raft address, so it does not add it (HTTP 502).
	ErrRaftUnreachable = errors.New("raft address does not answer")
	// ErrQuorumAtRisk: removing a member would leave voters too few of
	// whom answer to make a majority (HTTP 409).
	ErrQuorumAtRisk = errors.New("the cluster would lose its quorum")
)

// memberID is what a new member's id may be: it names the node in logs,
// metrics labels, file names and the replicated member record.
var memberID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (r JoinRequest) validate() error {
	if r.ID == "" {
		return fmt.Errorf("%w: id is empty", ErrBadRequest)
	}
	if !memberID.MatchString(r.ID) {
		return fmt.Errorf("%w: id %.80q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrBadRequest, r.ID)
	}
	if err := checkRaftAddr(r.RaftAddr, false); err != nil {
		return fmt.Errorf("%w: raft_addr %v", ErrBadRequest, err)
	}
	if err := checkHTTPAddr(r.HTTPAddr); err != nil {
		return fmt.Errorf("%w: http_addr %v", ErrBadRequest, err)
	}
	return nil
}

// joinVia asks the node at addr to add this node, retrying with backoff for
// JoinTimeout while nothing answers or the cluster has no leader.
func (n *Node) joinVia(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.JoinTimeout)
	defer cancel()
	c := n.clientFor(addr)
	req := JoinRequest{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, NonVoter: n.cfg.NonVoter}
	b := backoff.Doubling{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	var last error // the last real failure: the deadline itself says nothing
	for {
		var resp JoinResponse
		err := c.Do(ctx, http.MethodPost, "/v1/cluster/join", req, &resp)
		if err == nil {
			n.log.Info("joined the cluster", "via", addr, "cluster_id", resp.ClusterID)
			if resp.ClusterID != "" {
				return n.setClusterID(resp.ClusterID)
			}
			return nil
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		if ctx.Err() == nil && !retryable(err) {
			return fmt.Errorf("cannot join via %s: %w", addr, err)
		}
		wait := b.Next()
		n.log.Debug("join attempt failed; retrying", "via", addr, "err", err, "in", wait)
		if !backoff.Sleep(ctx, wait, n.shutdownCh) {
			if ctx.Err() == nil {
				return ErrShutdown
			}
			return fmt.Errorf("cannot join via %s (gave up after %s): %w", addr, n.cfg.JoinTimeout, last)
		}
	}
}

// addMember runs on the leader: it makes id a voter (a non-voter with
// req.NonVoter) at raftAddr and records
// its HTTP address. An id already present at the same address is a no-op
// for Raft; at a new address raft's AddVoter moves it (the old address is
// stale: one id is one node). Another id holding the same Raft address is a
// dead predecessor (two processes cannot bind one address) and is removed.
func (n *Node) addMember(ctx context.Context, req JoinRequest) error {
	if err := req.validate(); err != nil {
		return err
	}
	if err := n.refuseRemoved(req.ID); err != nil {
		return err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftErr(err)
	}
	if err := n.checkJoinConflict(ctx, req); err != nil {
		return err
	}
	current := cf.Configuration().Servers
	// A join never changes a member's suffrage: a non-voter restarted
	// without non_voter stays one, a promoted one stays a voter (promote
	// alone changes it).
	present := slices.ContainsFunc(current, func(s raft.Server) bool {
		return string(s.ID) == req.ID && string(s.Address) == req.RaftAddr && s.Suffrage != raft.Staging
	})
	nonVoter := req.NonVoter
	if i := slices.IndexFunc(current, func(s raft.Server) bool { return string(s.ID) == req.ID }); i >= 0 {
		nonVoter = current[i].Suffrage == raft.Nonvoter
	}
	if !present {
		if err := n.probeRaft(req.ID, req.RaftAddr); err != nil {
			return err
		}
	}
	for _, s := range current {
		switch {
		case string(s.ID) == req.ID && string(s.Address) == req.RaftAddr:
		case string(s.ID) == req.ID:
			n.log.Info("member rejoins at a new raft address; replacing the stale one",
				"id", req.ID, "old", s.Address, "new", req.RaftAddr)
		case string(s.Address) == req.RaftAddr:
			n.log.Info("removing a stale member that had the joining node's raft address",
				"stale_id", s.ID, "raft_addr", s.Address, "id", req.ID)
			if err := n.removeServer(ctx, string(s.ID)); err != nil {
				return err
			}
		}
	}
	switch {
	case present:
	case nonVoter:
		f := n.raft.AddNonvoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, n.timeout(ctx))
		if err := wait(ctx, f); err != nil {
			return fmt.Errorf("add non-voter %s: %w", req.ID, mapRaftErr(err))
		}
		n.log.Info("added non-voter", "id", req.ID, "raft_addr", req.RaftAddr)
	default:
		f := n.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, n.timeout(ctx))
		if err := wait(ctx, f); err != nil {
			return fmt.Errorf("add voter %s: %w", req.ID, mapRaftErr(err))
		}
		n.log.Info("added voter", "id", req.ID, "raft_addr", req.RaftAddr)
	}
	m := engine.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr}
	for _, old := range n.sm.Members() {
		if old.ID == m.ID {
			m.FSMVersion, m.Build = old.FSMVersion, old.Build // until recordVersions asks again
		}
	}
	if m.FSMVersion == 0 {
		// A new member's build, asked now rather than at the next
		// recordVersions: until it is known the member counts as FSM
		// version 1, and every newer command (the join's own audit record
		// among them) would be refused for a few seconds.
		if st, ok := n.statusOf(ctx, req.HTTPAddr); ok && st.NodeID == req.ID {
			m.FSMVersion, m.Build = st.FSMVersion, memberBuild(st.Build)
		}
	}
	if slices.Contains(n.sm.Members(), m) {
		return nil
	}
	return n.upsertMember(ctx, m)
}

// checkJoinConflict refuses a join that would evict a running member: one
// claiming this leader's id or Raft address (the leader would remove or
// move itself), an id whose current holder still answers at its old
// address — two processes with one id are a copied config, not a move —
// or a Raft address whose current holder, another id, still answers.
func (n *Node) checkJoinConflict(ctx context.Context, req JoinRequest) error {
	switch {
	case req.ClusterID != "" && n.ClusterID() != "" && req.ClusterID != n.ClusterID():
		return fmt.Errorf("%w: %s holds the state of cluster %s, this is cluster %s: start it with an empty data dir to join",
			ErrForeignCluster, req.ID, req.ClusterID, n.ClusterID())
	case req.ID == n.cfg.NodeID && (req.RaftAddr != n.cfg.RaftAddr || req.HTTPAddr != n.cfg.HTTPAddr):
		return fmt.Errorf("%w: %s is the leader's own id; it runs at raft address %s", ErrMemberConflict, req.ID, n.cfg.RaftAddr)
	case req.ID != n.cfg.NodeID && req.RaftAddr == n.cfg.RaftAddr:
		return fmt.Errorf("%w: raft address %s belongs to the leader, %s", ErrMemberConflict, req.RaftAddr, n.cfg.NodeID)
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftErr(err)
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == req.ID && string(s.Address) != req.RaftAddr && n.stillRunning(ctx, req.ID, string(s.Address)) {
			return fmt.Errorf("%w: %s is still running at raft address %s: stop it first, or if the joining node is another one, give it another id",
				ErrMemberConflict, req.ID, s.Address)
		}
		// Another id at the joining node's Raft address is removed as a
		// dead predecessor, but the address is only the request's claim:
		// a live member there answers the Raft probe too, so ask it.
		if string(s.ID) != req.ID && string(s.Address) == req.RaftAddr && n.stillRunning(ctx, string(s.ID), string(s.Address)) {
			return fmt.Errorf("%w: raft address %s belongs to %s, which is still running: give the joining node its own raft address",
				ErrMemberConflict, req.RaftAddr, s.ID)
		}
		// The same member at a new HTTP address: moved, unless it still
		// answers at the recorded one and says that is its address.
		if string(s.ID) == req.ID && string(s.Address) == req.RaftAddr {
			if old := n.memberHTTP(req.ID); old != "" && old != req.HTTPAddr {
				if st, ok := n.statusOf(ctx, old); ok && st.NodeID == req.ID && st.RaftAddr == req.RaftAddr && st.HTTPAddr != req.HTTPAddr {
					return fmt.Errorf("%w: %s is still running at HTTP address %s: its record keeps that address (a node that moved no longer answers there)",
						ErrMemberConflict, req.ID, old)
				}
			}
		}
	}
	return nil
}

// stillRunning asks the HTTP address recorded for id whether a node with
// that id still runs at raftAddr. Any failure to answer means no: a moved
// or rebuilt node's old process is gone.
func (n *Node) stillRunning(ctx context.Context, id, raftAddr string) bool {
	addr := n.memberHTTP(id)
	if addr == "" {
		return false
	}
	st, ok := n.statusOf(ctx, addr)
	return ok && st.NodeID == id && st.RaftAddr == raftAddr
}

// statusOf asks the node at HTTP address addr for its status, waiting at
// most DialTimeout. (A busy node may take more than a second to answer; a
// dead one refuses at once.)
func (n *Node) statusOf(ctx context.Context, addr string) (Status, bool) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
	defer cancel()
	st, err := n.clientFor(addr).Status(ctx)
	return st, err == nil
}

// probeRaft dials addr as the Raft transport would (TLS included) before
// it becomes voter id's address. A voter nobody can reach costs quorum: in a
// one-node cluster the quorum becomes two of two, the leader steps down and
// no one can be elected again. With the Raft peer check on, the node's
// certificate must also name id (raftpeers.go): the members would refuse
// every connection of a node whose certificate names another (it could
// never be elected), and one naming another member means the address is
// that member's.
func (n *Node) probeRaft(id, addr string) error {
	c, err := n.stream.Dial(raft.ServerAddress(addr), n.cfg.DialTimeout)
	if err != nil {
		return fmt.Errorf("%w: %s: %v (is the node running, and is this the address the other members can reach?)",
			ErrRaftUnreachable, addr, err)
	}
	defer c.Close()
	if own := ownCertificate(n.cfg.TLS); own == nil || !certNames(own, n.cfg.NodeID) {
		return nil
	}
	if peer := peerCertificate(c); peer != nil && !certNames(peer, id) {
		return fmt.Errorf("%w: the node at raft_addr %s presents a certificate whose common name is %q, not %q: "+
			"the members would refuse its Raft connections (check raft_addr; issue its certificate with herald tls init --nodes %s)",
			ErrBadRequest, addr, peer.Subject.CommonName, id, id)
	}
	return nil
}

// removeMember runs on the leader for another member, at the request r:
// it records id as removed (removed.go), then drops the server from Raft,
// then its record.
func (n *Node) removeMember(ctx context.Context, r *http.Request, id string) error {
	if id == "" {
		return fmt.Errorf("%w: id is empty", ErrBadRequest)
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftErr(err)
	}
	inRaft := slices.ContainsFunc(cf.Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == id })
	inRecords := slices.ContainsFunc(n.sm.Members(), func(m engine.Member) bool { return m.ID == id })
	if !inRaft && !inRecords {
		return fmt.Errorf("%w: %s", ErrUnknownMember, id)
	}
	if inRaft {
		if err := n.checkQuorumWithout(ctx, id, cf.Configuration().Servers); err != nil {
			return err
		}
	}
	// Recorded first: once out of the configuration, it must find no
	// member that would take it back.
	if err := n.revoke(ctx, r, id); err != nil {
		return err
	}
	if inRaft {
		return n.removeServer(ctx, id)
	}
	return n.removeRecord(ctx, id)
}

// checkQuorumWithout refuses to remove voter id when a majority of the
// voters left would not answer. raft uses a new configuration as soon as
// it is appended, so the change itself must be committed by that
// majority: without it the leader steps down, and nobody can be elected
// until the silent members return. Removing a member that does not answer
// never makes this worse, so the dead are removed first. A voter answers
// when its HTTP address reports its id and Raft address (stillRunning).
func (n *Node) checkQuorumWithout(ctx context.Context, id string, servers []raft.Server) error {
	var rest []raft.Server
	removesVoter := false
	for _, s := range servers {
		switch {
		case s.Suffrage != raft.Voter:
		case string(s.ID) == id:
			removesVoter = true
		default:
			rest = append(rest, s)
		}
	}
	if !removesVoter || len(rest) == 0 {
		return nil
	}
	answers := make([]bool, len(rest))
	var wg sync.WaitGroup
	for i, s := range rest {
		wg.Go(func() {
			answers[i] = string(s.ID) == n.cfg.NodeID || n.stillRunning(ctx, string(s.ID), string(s.Address))
		})
	}
	wg.Wait()
	var silent []string
	for i, s := range rest {
		if !answers[i] {
			silent = append(silent, string(s.ID))
		}
	}
	if live := len(rest) - len(silent); live < len(rest)/2+1 {
		return fmt.Errorf("%w: removing %s leaves %d voters, and these do not answer: %s; no majority of them could commit anything, "+
			"this change included: bring them back, or remove them first",
			ErrQuorumAtRisk, id, len(rest), strings.Join(silent, ", "))
	}
	return nil
}

// removeServer drops id from Raft and its member record (if any).
func (n *Node) removeServer(ctx context.Context, id string) error {
	if err := wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.timeout(ctx))); err != nil {
		return fmt.Errorf("remove server %s: %w", id, mapRaftErr(err))
	}
	n.log.Info("removed server", "id", id)
	return n.removeRecord(ctx, id)
}

// removeRecord drops id's member record, if there is one.
func (n *Node) removeRecord(ctx context.Context, id string) error {
	if !slices.ContainsFunc(n.sm.Members(), func(m engine.Member) bool { return m.ID == id }) {
		return nil
	}
	cmd, err := engine.Encode(engine.CmdRemoveMember, engine.RemoveMember{ID: id})
	if err != nil {
		return err
	}
	_, err = n.Apply(ctx, cmd)
	return err
}

// transferLeadership hands leadership to another voter and waits until
// someone else leads, so the caller can forward to the new leader (which
// removes this one: refused here first if that removal would be).
func (n *Node) transferLeadership(ctx context.Context) error {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftErr(err)
	}
	others := slices.ContainsFunc(cf.Configuration().Servers, func(s raft.Server) bool {
		return string(s.ID) != n.cfg.NodeID && s.Suffrage == raft.Voter
	})
	if !others {
		return ErrLastVoter
	}
	// The new leader would refuse to remove this one for the same reason:
	// refuse before leadership moves for nothing.
	if err := n.checkQuorumWithout(ctx, n.cfg.NodeID, cf.Configuration().Servers); err != nil {
		return err
	}
	n.log.Info("transferring leadership before leaving")
	_, err := n.transferTo(ctx, "")
	return err
}

// reconcileSelf runs on a node restarted with existing state: until the
// replicated record carries this node's current addresses, it asks the
// leader (or cfg.Join) to re-add it. That covers a restart at a new HTTP
// address (and, with --join, a new Raft address); with unchanged addresses
// it ends at the first check once the state machine has caught up. A node
// whose record is gone (it was removed) is re-added only with --join.
func (n *Node) reconcileSelf(ctx context.Context) {
	self := n.selfMember()
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i := slices.IndexFunc(n.sm.Members(), func(m engine.Member) bool { return m.ID == self.ID })
		switch {
		case i >= 0 && sameAddrs(n.sm.Members()[i], self):
			n.log.Debug("member record is current")
			return
		case i < 0 && n.cfg.Join == "":
			// Not replayed yet, or removed on purpose: only an explicit
			// --join adds a node back.
			continue
		}
		if n.IsLeader() {
			continue // RunLeader records the leader's own member
		}
		target := n.LeaderHTTPAddr()
		if target == "" {
			target = n.cfg.Join
		}
		if target == "" || target == n.cfg.HTTPAddr {
			continue
		}
		c := n.clientFor(target)
		req := JoinRequest{ID: self.ID, RaftAddr: self.RaftAddr, HTTPAddr: self.HTTPAddr, ClusterID: n.ClusterID(), NonVoter: n.cfg.NonVoter}
		if err := c.Join(ctx, req); err != nil {
			var ae *APIError
			if errors.As(err, &ae) && ae.Status/100 == 4 {
				// Refused for good (another cluster's data, a live
				// namesake): say so loudly, asking again changes nothing.
				n.log.Error("the cluster refuses to refresh this node's member record", "via", target, "err", err)
				return
			}
			n.log.Debug("refreshing own member record failed; will retry", "via", target, "err", err)
			continue
		}
		n.log.Info("refreshed own member record", "via", target)
	}
}

// pruneRecords drops the member records of ids the Raft configuration has
// lacked at two passes in a row (absent carries them from one pass to the
// next). Such a record is left by a recovery from a lost quorum (the lost
// members), or by a removal whose second step failed; kept, it would hold
// back every newer command forever if it named an older build (Admit), and
// nobody could refresh it. Records are read before the configuration: a
// join adds the voter before its record, so a record read first whose id
// the configuration then lacks is not a join under way; the second pass
// covers a member removed and re-added between the two reads.
func (n *Node) pruneRecords(ctx context.Context, absent map[string]bool) {
	records := n.sm.Members()
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	inRaft := map[string]bool{n.cfg.NodeID: true}
	for _, s := range cf.Configuration().Servers {
		inRaft[string(s.ID)] = true
	}
	seen := map[string]bool{}
	for _, m := range records {
		if inRaft[m.ID] {
			continue
		}
		seen[m.ID] = true
		if !absent[m.ID] {
			continue
		}
		if err := n.removeRecord(ctx, m.ID); err != nil {
			n.log.Warn("dropping the record of a member not in the raft configuration failed; will retry", "id", m.ID, "err", err)
			continue
		}
		n.log.Info("dropped the record of a member not in the raft configuration", "id", m.ID, "raft_addr", m.RaftAddr)
	}
	clear(absent)
	maps.Copy(absent, seen)
}
