package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// A leader restoring a backup reads it whole twice: once to check every
// record and give it this cluster's members before Raft sees a byte
// (RewriteSnapshot), and once more when Raft has it restore the snapshot
// so written. At ten million tasks each read is a minute, with Raft's
// loop waiting on the second. StageRestore keeps the state the first read
// made, and the Restore of exactly the bytes it wrote installs that state
// instead of reading them again.

// stagedState is a state read by StageRestore, for the Restore of the
// snapshot it was written as: the one whose header names token and whose
// bytes after the header hash to sum.
type stagedState struct {
	st      *state
	applied uint64
	token   string
	sum     []byte
}

// StageRestore is RewriteSnapshot that also keeps the state it read: the
// next Restore of the bytes written to w, and of no other, installs it
// without reading them again. A Restore of any other snapshot, or
// Unstage, lets it go; a later StageRestore replaces it.
func (f *FSM) StageRestore(r io.Reader, w io.Writer, members []Member) (SnapshotInfo, error) {
	f.Unstage() // not two states held besides the one served
	in := sha256.New()
	st, info, err := readSnapshot(io.TeeReader(r, in))
	if err != nil {
		return info, err
	}
	setMembers(st, members)
	// The token names what the state was made of, the bytes read and the
	// members given (no randomness on the state side): a snapshot whose
	// header names it was written from the same state.
	m, err := json.Marshal(members)
	if err != nil {
		return info, err
	}
	in.Write(m)
	s := &fsmSnapshot{st: st, applied: info.Applied, staged: hex.EncodeToString(in.Sum(nil)), sum: sha256.New()}
	if err := s.Persist(w); err != nil {
		return info, err
	}
	f.mu.Lock()
	f.staged = &stagedState{st: st, applied: info.Applied, token: s.staged, sum: s.sum.Sum(nil)}
	f.mu.Unlock()
	return info, nil
}

// Unstage lets a state kept by StageRestore go.
func (f *FSM) Unstage() {
	f.mu.Lock()
	f.staged = nil
	f.mu.Unlock()
}

// restoreStaged is Restore of the snapshot staged was written as, its
// header read from br: the rest must be the bytes StageRestore wrote.
// The state served meanwhile is kept; if the bytes differ (the file
// changed on its way through Raft's store), the node has nothing it can
// install and stops, as for a body that does not read.
func (f *FSM) restoreStaged(br io.Reader, staged *stagedState) error {
	sum := sha256.New()
	_, err := io.Copy(sum, br)
	if err == nil && !bytes.Equal(sum.Sum(nil), staged.sum) {
		err = errors.New("its bytes are not those written for the state staged for it")
	}
	if err != nil {
		err = fmt.Errorf("read snapshot: %w", err)
		if f.letGo() {
			f.haltWith(&RestoreError{Applied: staged.applied, Err: err})
		}
		return err
	}
	f.install(staged.st, staged.applied)
	return nil
}
