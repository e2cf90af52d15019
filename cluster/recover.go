package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/hclogslog"
)

// Recovery from a lost quorum (`herald cluster recover`, README "Lost
// quorum"). When most voters are gone for good, nothing can be committed
// again: not even the removal of the dead. Recover rewrites a stopped
// survivor's Raft configuration offline with raft.RecoverCluster, which
// restores the newest snapshot, replays every entry of the log, writes a
// snapshot carrying the new configuration and drops the log, so the new
// configuration is durable before the node starts. Started again (no
// --bootstrap, no --join needed) the node is the only voter, or one of the
// survivors named, and leads; fresh nodes join it as usual. The cluster id
// in raft.db is untouched, so they join the same cluster.
//
// The price: every entry the survivor holds counts as committed, those the
// old leader had not committed yet included, and entries it never received
// are gone. With several survivors, recover each with the same --voter
// list: the election then picks the one whose log is the most complete.

// Voter is one server of the configuration Recover writes.
type Voter struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

func (v Voter) String() string { return v.ID + "=" + v.RaftAddr }

// ParseVoter reads ID=RAFT_ADDR, as `herald cluster recover --voter` takes
// it.
func ParseVoter(s string) (Voter, error) {
	id, addr, ok := strings.Cut(s, "=")
	if !ok {
		return Voter{}, fmt.Errorf("%w: voter %q: want ID=RAFT_ADDR, e.g. n2=10.0.0.2:7101", ErrBadRequest, s)
	}
	v := Voter{ID: strings.TrimSpace(id), RaftAddr: strings.TrimSpace(addr)}
	return v, v.validate()
}

func (v Voter) validate() error {
	if !memberID.MatchString(v.ID) {
		return fmt.Errorf("%w: voter id %.80q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrBadRequest, v.ID)
	}
	if err := checkRaftAddr(v.RaftAddr, false); err != nil {
		return fmt.Errorf("%w: voter %s: raft address %v", ErrBadRequest, v.ID, err)
	}
	return nil
}

// RecoverConfig says whose data dir Recover rewrites, and to what.
type RecoverConfig struct {
	// DataDir is the stopped node's data dir.
	DataDir string
	// NodeID is the node's id. "" takes the one its data dir recorded
	// (every start of this build records it); one that differs from the
	// recorded id is refused.
	NodeID string
	// Voters are the other survivors, to be voters beside this node. This
	// node may be named too (so every survivor can be given the same
	// list); its address is then taken from here, else from the old
	// configuration.
	Voters []Voter
	// Logger receives what Recover did, and raft's logs. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Recovery is what Recover did. The recovered node, once it leads, records
// it in the audit trail (action "cluster.recover").
type Recovery struct {
	// At is when Recover ran.
	At        time.Time `json:"at"`
	NodeID    string    `json:"node_id"`
	ClusterID string    `json:"cluster_id,omitempty"`
	// Old is the configuration before, New the one written.
	Old []Voter `json:"old"`
	New []Voter `json:"new"`
	// LastIndex and LastTerm are those of the last entry the node had:
	// every entry up to it is in the snapshot Recover wrote.
	LastIndex uint64 `json:"last_index"`
	LastTerm  uint64 `json:"last_term"`
}

// recoveryKey keeps, in raft.db, the recoveries the node has not yet put in
// the audit trail (a JSON array of Recovery).
var recoveryKey = []byte("HeraldRecoveries")

// ActorRecover is the audit actor of a recovery: someone who ran `herald
// cluster recover` on the node's machine while it was stopped.
const ActorRecover = "herald-cluster-recover"

// Recover rewrites the Raft configuration of the stopped node whose data
// dir cfg names (see the comment at the top of this file). sm is a fresh
// state machine of the node's kind; Recover leaves it unusable. It refuses
// a data dir a running node holds (ErrDataDirInUse), one without Raft
// state, a damaged one (ErrDataDirDamaged), and bad voters
// (ErrBadRequest).
func Recover(cfg RecoverConfig, sm StateMachine) (Recovery, error) {
	log := cmp.Or(cfg.Logger, slog.Default())
	if cfg.DataDir == "" {
		return Recovery{}, fmt.Errorf("%w: data dir is empty", ErrBadRequest)
	}
	if cfg.NodeID != "" && !memberID.MatchString(cfg.NodeID) {
		return Recovery{}, fmt.Errorf("%w: node id %.80q: want 1 to 64 letters, digits, '.', '_' or '-'", ErrBadRequest, cfg.NodeID)
	}
	for _, v := range cfg.Voters {
		if err := v.validate(); err != nil {
			return Recovery{}, err
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft.db")); errors.Is(err, os.ErrNotExist) && len(snapshotDirs(cfg.DataDir)) == 0 {
		return Recovery{}, noState(cfg.DataDir) // not even a raft.db made for nothing
	}
	store, err := openStore(cfg.DataDir)
	if err != nil {
		return Recovery{}, err
	}
	defer store.Close()
	rec := Recovery{At: time.Now().UTC()}
	if rec.NodeID, err = recoveringID(store, cfg); err != nil {
		return Recovery{}, err
	}
	if id, err := store.Get(clusterIDKey); err == nil {
		rec.ClusterID = string(id)
	}
	if err := checkSnapshotMeta(cfg.DataDir); err != nil {
		return Recovery{}, err
	}
	level, _ := parseLevel(DefaultRaftLogLevel)
	hlog := hclogslog.New(log, hclogslog.Options{Name: "raft", Level: level})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, DefaultSnapshotRetain, hlog)
	if err != nil {
		return Recovery{}, fmt.Errorf("open snapshot store: %w", err)
	}
	if has, err := raft.HasExistingState(store, store, snaps); err != nil {
		return Recovery{}, fmt.Errorf("read raft state: %w", err)
	} else if !has {
		return Recovery{}, noState(cfg.DataDir)
	}
	_, trans := raft.NewInmemTransport("") // only encodes addresses into the snapshot: nothing is sent
	defer trans.Close()
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(rec.NodeID)
	rc.Logger = hlog

	// The configuration before, from the newest snapshot's and the log's
	// entries (NoSnapshotRestoreOnStart: nothing is restored for it).
	peek := *rc
	peek.NoSnapshotRestoreOnStart = true
	old, err := raft.GetConfiguration(&peek, &fsm{sm: sm}, store, store, snaps, trans)
	if err != nil {
		return Recovery{}, fmt.Errorf("read the raft configuration: %w", err)
	}
	for _, s := range old.Servers {
		rec.Old = append(rec.Old, Voter{ID: string(s.ID), RaftAddr: string(s.Address)})
	}
	if rec.New, err = recoveredVoters(rec.NodeID, rec.Old, cfg.Voters); err != nil {
		return Recovery{}, err
	}
	next := raft.Configuration{}
	for _, v := range rec.New {
		next.Servers = append(next.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.ID), Address: raft.ServerAddress(v.RaftAddr)})
	}

	firstIndex, err := store.FirstIndex()
	if err != nil {
		return Recovery{}, damaged(cfg.DataDir, filepath.Join(cfg.DataDir, "raft.db"), err)
	}
	// The same checks as a start: a damaged newest snapshot is not stood
	// in for by an older one.
	rfsm := &fsm{sm: sm, starting: true, firstIndex: firstIndex, dataDir: cfg.DataDir}
	if err := raft.RecoverCluster(rc, rfsm, store, store, snapshotWatch{snaps, rfsm}, trans, next); err != nil {
		if cause := rfsm.lastRestoreErr(); cause != nil {
			return Recovery{}, fmt.Errorf("recover: %w: %w", err, cause)
		}
		return Recovery{}, fmt.Errorf("recover: %w", err)
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return Recovery{}, fmt.Errorf("recover: the snapshot written cannot be listed: %v", err)
	}
	rec.LastIndex, rec.LastTerm = list[0].Index, list[0].Term
	if err := addRecovery(store, rec); err != nil {
		return Recovery{}, err
	}
	log.Warn("recovered the cluster: the raft configuration was rewritten offline",
		"component", "cluster", "node_id", rec.NodeID, "data_dir", cfg.DataDir, "old", rec.Old, "new", rec.New,
		"last_index", rec.LastIndex, "last_term", rec.LastTerm, "cluster_id", rec.ClusterID)
	return rec, nil
}

func noState(dataDir string) error {
	return fmt.Errorf("%w: %s holds no Raft state: there is nothing to recover (a node with an empty data dir joins with --join)",
		ErrBadRequest, dataDir)
}

// recoveringID is the id of the node whose data dir is recovered.
func recoveringID(store *raftboltdb.BoltStore, cfg RecoverConfig) (string, error) {
	recorded, err := store.Get(nodeIDKey)
	if len(recorded) == 0 {
		err = errors.New("not recorded")
	}
	switch {
	case err != nil && cfg.NodeID == "":
		return "", fmt.Errorf("%w: %s does not record its node's id (a build before ids were recorded last ran on it): give --node-id",
			ErrBadRequest, cfg.DataDir)
	case err != nil:
		return cfg.NodeID, nil
	case cfg.NodeID != "" && cfg.NodeID != string(recorded):
		return "", fmt.Errorf("%w: %s is the data dir of node %s, not %s", ErrBadRequest, cfg.DataDir, recorded, cfg.NodeID)
	}
	return string(recorded), nil
}

// recoveredVoters is the new configuration: this node first, then the
// other voters named.
func recoveredVoters(self string, old, named []Voter) ([]Voter, error) {
	me := Voter{ID: self}
	for _, v := range old {
		if v.ID == self {
			me.RaftAddr = v.RaftAddr
		}
	}
	var others []Voter
	for i, v := range named {
		for _, w := range named[:i] {
			if w.ID == v.ID {
				return nil, fmt.Errorf("%w: voter %s is named twice", ErrBadRequest, v.ID)
			}
		}
		if v.ID == self {
			me.RaftAddr = v.RaftAddr
			continue
		}
		others = append(others, v)
	}
	if me.RaftAddr == "" {
		return nil, fmt.Errorf("%w: %s is not in its own raft configuration (was it removed?): name its raft address with --voter %s=RAFT_ADDR",
			ErrBadRequest, self, self)
	}
	out := append([]Voter{me}, others...)
	ids, addrs := map[string]bool{}, map[string]string{}
	for _, v := range out {
		if ids[v.ID] {
			return nil, fmt.Errorf("%w: voter %s is named twice", ErrBadRequest, v.ID)
		}
		if other, ok := addrs[v.RaftAddr]; ok {
			return nil, fmt.Errorf("%w: voters %s and %s have the same raft address %s", ErrBadRequest, other, v.ID, v.RaftAddr)
		}
		ids[v.ID], addrs[v.RaftAddr] = true, v.ID
	}
	return out, nil
}

func addRecovery(store *raftboltdb.BoltStore, rec Recovery) error {
	recs, err := pendingRecoveries(store)
	if err != nil {
		return err
	}
	b, err := json.Marshal(append(recs, rec))
	if err != nil {
		return err
	}
	if err := store.Set(recoveryKey, b); err != nil {
		return fmt.Errorf("store the recovery note: %w", err)
	}
	return nil
}

// pendingRecoveries are the recoveries not yet in the audit trail.
func pendingRecoveries(store *raftboltdb.BoltStore) ([]Recovery, error) {
	b, err := store.Get(recoveryKey)
	if err != nil || len(b) == 0 {
		return nil, nil //nolint:nilerr // not found: none pending
	}
	var recs []Recovery
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("read the recovery note: %w", err)
	}
	return recs, nil
}

// auditRecoveries runs while this node leads: it records the recoveries
// Recover noted in this node's data dir in the audit trail, then forgets
// them. A record refused for now (a member record still naming an older
// build; pruneRecords drops those of the lost members) is tried again on
// the next pass.
func (n *Node) auditRecoveries(ctx context.Context) {
	recs, err := pendingRecoveries(n.store)
	if err != nil {
		n.log.Warn("recoveries cannot be audited", "err", err)
		return
	}
	if len(recs) == 0 {
		return
	}
	for _, r := range recs {
		cmd, err := engine.Encode(engine.CmdRecordAudit, engine.RecordAudit{
			At: r.At, Actor: ActorRecover, Role: "admin", Action: "cluster.recover",
			Target: r.target(), Status: 200, Node: n.cfg.NodeID,
		})
		if err == nil {
			_, err = n.Apply(ctx, cmd)
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				n.log.Warn("recording the recovery in the audit trail failed; will retry", "err", err)
			}
			return // the ones recorded are recorded again then: rare, and harmless
		}
	}
	if err := n.store.Set(recoveryKey, []byte{}); err != nil {
		n.log.Warn("forgetting the recorded recoveries failed", "err", err)
		return
	}
	n.log.Info("recorded the recovery in the audit trail", "recoveries", len(recs))
}

// target is the audit record's target: the voters after and before.
func (r Recovery) target() string {
	ids := func(vs []Voter) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = v.ID
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprintf("voters %s (were %s), last index %d", ids(r.New), ids(r.Old), r.LastIndex)
}
