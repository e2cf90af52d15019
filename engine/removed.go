package engine

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"time"
)

// Removed members. A member removed by an operator (herald cluster remove,
// or leave) still holds the cluster secret, a token and a certificate the
// CA signed; nothing of them can be taken back. So its id is recorded as
// removed, replicated, and every member refuses it: on join (the leader)
// and on the Raft port (the certificate's common name is the id), until an
// admin readmits it (herald cluster readmit). Since FSM version 4.

// FSMRemovedMembers is the FSM version that first applied RevokeMember:
// a snapshot holding a removed member needs it (snapshotFSM).
const FSMRemovedMembers uint16 = 4

// RevokeMember records member ID as removed (CmdRevokeMember). At and By
// are the leader's stamp and the actor who removed it.
type RevokeMember struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}

// ReadmitMember lets a removed member's id join again
// (CmdReadmitMember).
type ReadmitMember struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}

// RemovedMember is a removed member's record: who removed it, when.
type RemovedMember struct {
	ID string
	At time.Time
	By string
}

// ErrNotRemoved answers a readmit of an id that is not removed.
var ErrNotRemoved = errors.New("not a removed member")

// revokeMember applies CmdRevokeMember; a repeated removal keeps the
// first record.
func (a applier) revokeMember(c RevokeMember) any {
	if c.ID == "" {
		return errors.New("revoke member: empty id")
	}
	if _, ok := a.st.Removed[c.ID]; !ok {
		a.st.Removed[c.ID] = RemovedMember(c)
	}
	return nil
}

// readmitMember applies CmdReadmitMember.
func (a applier) readmitMember(c ReadmitMember) any {
	if _, ok := a.st.Removed[c.ID]; !ok {
		return ErrNotRemoved
	}
	delete(a.st.Removed, c.ID)
	return nil
}

// RemovedMember returns the record of removed member id, if it is one.
func (f *FSM) RemovedMember(id string) (RemovedMember, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.st.Removed[id]
	return r, ok
}

// RemovedMembers lists the removed members, by id.
func (f *FSM) RemovedMembers() []RemovedMember {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := slices.Collect(maps.Values(f.st.Removed))
	slices.SortFunc(out, func(a, b RemovedMember) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
