package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// ErrDataDirDamaged means a file of the data dir cannot be read as Raft
// wrote it (raft.db, or a snapshot under snapshots/). Such a node must not
// start: what it would vote and apply is no longer what it acknowledged.
// The error names the file and the way back (wipeAndRejoin).
var ErrDataDirDamaged = errors.New("data dir is damaged")

// nodeIDKey keeps, beside raft's own keys in raft.db, the id of the node
// the data dir belongs to: `herald cluster recover` works on a stopped
// node's dir and must know which server of the configuration is this one.
var nodeIDKey = []byte("HeraldNodeID")

// wipeAndRejoin is the way back from a damaged data dir, told in the error
// (README, "A corrupt data dir"). The node's state lives on the other
// members: a node with an empty dir that joins gets all of it from the
// leader.
func wipeAndRejoin(dataDir string) string {
	return fmt.Sprintf("the way back (README, \"A corrupt data dir\"): keep this node stopped, move %s aside, "+
		"then start it with an empty data dir and --join HTTP_ADDR_OF_A_MEMBER (or start it empty and add it with "+
		"`herald cluster join`): it gets the cluster's whole state from the leader", dataDir)
}

// damaged is ErrDataDirDamaged for file, with the cause and the way back.
func damaged(dataDir, file string, cause error) error {
	return fmt.Errorf("%w: %s cannot be read (%v); this node cannot start from it; %s",
		ErrDataDirDamaged, file, cause, wipeAndRejoin(dataDir))
}

// openStore opens DATA_DIR/raft.db, raft's log and stable store, for New
// and Recover alike. A second process on the dir fails after a second with
// ErrDataDirInUse instead of waiting on bbolt's file lock forever; a file
// bbolt cannot open fails with ErrDataDirDamaged.
func openStore(dataDir string) (store *raftboltdb.BoltStore, err error) {
	dbPath := filepath.Join(dataDir, "raft.db")
	// A raft.db that is gone or empty beside snapshots was lost or
	// replaced (raft.db is created before any snapshot): bbolt would make a
	// new one, and the node would forget its term and vote, and so could
	// vote twice in one term.
	if fi, serr := os.Stat(dbPath); (serr != nil && errors.Is(serr, os.ErrNotExist)) || (serr == nil && fi.Size() == 0) {
		if names := snapshotDirs(dataDir); len(names) > 0 {
			return nil, damaged(dataDir, dbPath, fmt.Errorf("it is missing or empty, yet %d snapshots are in %s",
				len(names), filepath.Join(dataDir, "snapshots")))
		}
	}
	// bbolt panics on some damaged pages rather than returning an error;
	// at open that is a damaged file like any other.
	defer func() {
		if p := recover(); p != nil {
			if store != nil {
				store.Close()
			}
			store, err = nil, damaged(dataDir, dbPath, fmt.Errorf("%v", p))
		}
	}()
	store, err = raftboltdb.New(raftboltdb.Options{
		Path:        dbPath,
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	switch {
	case errors.Is(err, bbolt.ErrTimeout):
		return nil, fmt.Errorf("%w: %s", ErrDataDirInUse, dataDir)
	case errors.Is(err, bbolt.ErrInvalid), errors.Is(err, bbolt.ErrChecksum), errors.Is(err, bbolt.ErrVersionMismatch):
		return nil, damaged(dataDir, dbPath, err)
	case err != nil:
		return nil, fmt.Errorf("open raft store %s: %w", dbPath, err)
	}
	// Read once what New reads first, so a damaged log page panics here.
	if _, err := store.LastIndex(); err != nil {
		store.Close()
		return nil, damaged(dataDir, dbPath, err)
	}
	return store, nil
}

// snapshotDirs names the finished snapshots under DATA_DIR/snapshots
// (raft writes one as NAME.tmp and renames it when complete).
func snapshotDirs(dataDir string) []string {
	entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
	}
	return names
}

// checkSnapshotMeta refuses a finished snapshot whose meta.json cannot be
// read. raft's snapshot store skips such a snapshot without a word and
// starts from an older one, or from none: with the log compacted past it,
// raft then panics at the hole ("log not found"). A finished snapshot
// always has its meta.json (raft writes it before the rename), so one that
// does not decode is damage.
func checkSnapshotMeta(dataDir string) error {
	for _, name := range snapshotDirs(dataDir) {
		path := filepath.Join(dataDir, "snapshots", name, "meta.json")
		b, err := os.ReadFile(path)
		if err != nil {
			return damaged(dataDir, path, err)
		}
		var meta struct {
			ID    string
			Index uint64
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			return damaged(dataDir, path, err)
		}
		if meta.ID != name || meta.Index == 0 {
			return damaged(dataDir, path, fmt.Errorf("it describes snapshot %q at index %d", meta.ID, meta.Index))
		}
	}
	return nil
}

// snapshotFile is the state file of snapshot id, for messages.
func snapshotFile(dataDir, id string) string {
	return filepath.Join(dataDir, "snapshots", id, "state.bin")
}

// recordNodeID keeps the node's id in its data dir (see nodeIDKey).
func recordNodeID(store *raftboltdb.BoltStore, id string) error {
	if old, err := store.Get(nodeIDKey); err == nil && string(old) == id {
		return nil
	}
	if err := store.Set(nodeIDKey, []byte(id)); err != nil {
		return fmt.Errorf("store node id: %w", err)
	}
	return nil
}
