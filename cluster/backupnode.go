package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heraldhq/herald/engine"
)

// SnapshotPath is where the API serves backups: GET takes one (any
// member), PUT restores one (the leader; a follower forwards it).
const SnapshotPath = "/v1/snapshot"

// ErrRestoreRefused is a restore this cluster cannot take now (a member
// that could not apply the state); the file itself may be fine.
var ErrRestoreRefused = errors.New("restore refused")

// openBackup takes a snapshot of the state on this node, which may be a
// follower (once it applied what the leader had: catchUpForBackup), and
// opens it: raft persists it to the snapshot store (streamed, as any
// snapshot), and it is read back from there, so the state is never
// buffered whole a second time. It is the state at the returned header's index.
func (n *Node) openBackup(ctx context.Context) (BackupHeader, io.ReadCloser, error) {
	if err := n.catchUpForBackup(ctx); err != nil {
		return BackupHeader{}, nil, err
	}
	f := n.raft.Snapshot()
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return BackupHeader{}, nil, errors.New("this node has applied nothing yet: there is no state to back up")
		}
		return BackupHeader{}, nil, fmt.Errorf("take snapshot: %w", err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return BackupHeader{}, nil, fmt.Errorf("open snapshot: %w", err)
	}
	return BackupHeader{
		ClusterID: n.ClusterID(), NodeID: n.cfg.NodeID, Index: meta.Index, Term: meta.Term,
		// The snapshot was just written by this build.
		FSMVersion: engine.FSMVersion, Build: engine.Build,
		Created: time.Now().UTC(), Size: meta.Size,
	}, rc, nil
}

// backupCatchUp bounds how long a follower waits to apply what the
// leader had applied before it takes a backup.
const backupCatchUp = 10 * time.Second

// catchUpForBackup waits, on a follower, until it has applied everything
// the leader had applied when asked, so that a backup holds every write
// acknowledged before it was asked for: Raft tells a follower that an
// entry committed only with the leader's next message, and a backup
// asked for just after a write lacked it (`herald bench tasks`: 995 of
// 1,000 tasks). Raft gives no notice of a follower's applied index, hence
// the short poll, bounded. A follower that cannot ask the leader (none
// known, or it does not answer) backs up what it has and logs so: the
// backup of a cluster without a quorum is what a recovery needs.
func (n *Node) catchUpForBackup(ctx context.Context) error {
	if n.raft.State() == raft.Leader {
		return nil // it applied every write it acknowledged
	}
	leader := n.leaderID()
	if leader == "" {
		n.log.Warn("backup: no leader is known; backing up this node's state, which may lack the latest writes", "applied", n.raft.AppliedIndex())
		return nil
	}
	target, err := n.askLeaderApplied(ctx, leader)
	if err != nil {
		n.log.Warn("backup: the leader's progress is unknown; backing up this node's state, which may lack the latest writes",
			"leader", leader, "applied", n.raft.AppliedIndex(), "err", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, backupCatchUp)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for n.raft.AppliedIndex() < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("this node has applied index %d, behind the leader's %d after %s: back up through the leader, or again once this node caught up",
				n.raft.AppliedIndex(), target, backupCatchUp)
		case <-tick.C:
		}
	}
	return nil
}

// SaveBackup writes a backup of the replicated state, as of now, to w.
func (n *Node) SaveBackup(ctx context.Context, w io.Writer) (BackupHeader, error) {
	h, rc, err := n.openBackup(ctx)
	if err != nil {
		return h, err
	}
	defer rc.Close()
	return h, WriteBackup(w, h, rc)
}

// RestoreBackup replaces the whole replicated state, cluster wide, with a
// backup's, through Raft (raft.Restore: the leader installs it and sends
// it to every follower as a snapshot). It runs on the leader only.
//
// Nothing changes unless the whole file checks: its envelope and checksum,
// its FSM version, and every record of its state, read into a file in the
// data dir before raft sees a byte (raft stops the node on a state it
// cannot restore). The cluster keeps its own Raft configuration and its
// own member records; everything else is the backup's. The leader's work
// is stopped for the restore and starts again from the restored state, as
// after an election.
func (n *Node) RestoreBackup(ctx context.Context, r io.Reader) (BackupInfo, error) {
	if !n.IsLeader() {
		return BackupInfo{}, n.errNotLeader()
	}
	h, body, err := OpenBackup(r)
	if err != nil {
		return BackupInfo{}, err
	}
	info := BackupInfo{Header: h}
	if err := checkBackupVersion(h); err != nil {
		return info, err
	}
	members := n.sm.Members()
	for _, m := range members {
		if m.AppliesFSM() < engine.FSMVersion {
			return info, fmt.Errorf("%w: member %s runs build %s, which applies FSM version %d, older than this leader's %d: finish the rolling upgrade, then restore",
				ErrRestoreRefused, m.ID, m.Build, m.AppliesFSM(), engine.FSMVersion)
		}
	}
	spool, err := os.CreateTemp(n.cfg.DataDir, "restore-*.tmp")
	if err != nil {
		return info, fmt.Errorf("restore: spool file: %w", err)
	}
	defer func() {
		spool.Close()
		_ = os.Remove(spool.Name())
	}()
	if info.State, info.SHA256, err = spoolBackup(body, spool, members); err != nil {
		return info, err
	}
	size, err := spool.Seek(0, io.SeekCurrent)
	if err != nil {
		return info, fmt.Errorf("restore: spool file: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return info, fmt.Errorf("restore: spool file: %w", err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: h.Index, Term: h.Term, Size: size}
	n.log.Warn("restoring a backup: the cluster's state is being replaced",
		"backup_cluster", h.ClusterID, "backup_index", h.Index, "backup_created", h.Created, "bytes", size)
	err = n.withoutLeadWork(ctx, func() error {
		if !n.IsLeader() {
			return n.errNotLeader()
		}
		return n.restoreRaft(meta, bufio.NewReaderSize(spool, 1<<20))
	})
	if err != nil {
		return info, fmt.Errorf("restore: %w", err)
	}
	n.log.Warn("backup restored", "backup_cluster", h.ClusterID, "backup_index", h.Index, "index", n.raft.AppliedIndex())
	return info, nil
}

// spoolBackup writes the body of a backup (OpenBackup's) to spool as the
// snapshot Raft restores, with members for its member records
// (engine.RewriteSnapshot), and returns what it read and the body's
// checksum. It is checked on its way to the spool, not kept: Raft's
// Restore then reads it once, after the state served is let go (one
// state held at a time, not two). A write that fails is this node's
// disk, not a bad backup.
func spoolBackup(body io.Reader, spool io.Writer, members []engine.Member) (engine.SnapshotInfo, string, error) {
	bw := bufio.NewWriterSize(spool, 1<<20)
	state, err := engine.RewriteSnapshot(body, bw, members)
	if ferr := bw.Flush(); ferr != nil { // bufio keeps the first error
		return state, "", fmt.Errorf("restore: spool file: %w", ferr)
	}
	// As in InspectBackup: the checksum first, then the state's reason.
	if _, derr := io.Copy(io.Discard, body); derr != nil {
		return state, "", derr
	}
	if err != nil {
		return state, "", fmt.Errorf("%w: the checksum matches but the state does not read: %v", ErrBadBackup, err)
	}
	return state, body.(*backupBody).sumHex(), nil
}

// restoreRaft installs the state read from r through raft.Restore, with no
// timeout: raft's timer runs from the call, not from the enqueue, and
// once it has fired (a state of millions of records takes minutes to
// restore) the no-op raft appends after the restore is refused as
// ErrEnqueueTimeout half the time, on a cluster that did restore. Raft's
// loop answers both requests in every role (a follower's: not leader),
// so neither waits for ever.
func (n *Node) restoreRaft(meta *raft.SnapshotMeta, r io.Reader) error {
	return mapRaftErr(n.raft.Restore(meta, r, 0))
}

// RestoreAnswer is the body of a PUT /v1/snapshot that restored.
type RestoreAnswer struct {
	Backup   BackupHeader             `json:"backup"`
	SHA256   string                   `json:"sha256"`
	Sections []engine.SnapshotSection `json:"sections"`
	// Index is the Raft index the cluster's state is at now.
	Index uint64 `json:"index"`
}

// SnapshotHandler serves SnapshotPath. The API mounts it behind its admin
// role and audit; a follower's forwarding sends a PUT to the leader.
func (n *Node) SnapshotHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			n.serveBackup(w, r)
		case http.MethodPut:
			n.serveRestore(w, r)
		default:
			w.Header().Set("Allow", "GET, PUT")
			writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+SnapshotPath+"; use GET (save) or PUT (restore)")
		}
	})
}

func (n *Node) serveBackup(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h, rc, err := n.openBackup(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="herald-%d.backup"`, h.Index))
	if r.Method == http.MethodHead {
		return
	}
	if err := WriteBackup(w, h, rc); err != nil {
		n.log.Error("backup not sent whole", "err", err, "remote", r.RemoteAddr)
		panic(http.ErrAbortHandler) // the client must see a broken stream, not an end
	}
	n.log.Info("backup saved", "index", h.Index, "bytes", h.Size, "took", time.Since(start).Round(time.Millisecond), "remote", r.RemoteAddr)
}

func (n *Node) serveRestore(w http.ResponseWriter, r *http.Request) {
	// A large backup takes longer to arrive than the server's ReadTimeout.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	info, err := n.RestoreBackup(r.Context(), r.Body)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, RestoreAnswer{Backup: info.Header, SHA256: info.SHA256, Sections: info.State.Sections, Index: n.raft.AppliedIndex()})
	case errors.Is(err, ErrBadBackup):
		writeError(w, http.StatusBadRequest, "nothing was changed: "+err.Error())
	case errors.Is(err, ErrRestoreRefused):
		writeError(w, http.StatusConflict, "nothing was changed: "+err.Error())
	case errors.Is(err, engine.ErrNotLeader):
		writeError(w, http.StatusServiceUnavailable, "this node no longer leads, retry: "+err.Error())
	default:
		n.log.Error("restore failed", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}
