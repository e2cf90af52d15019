package engine

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// persistBytes writes f's state as a snapshot.
func persistBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		t.Fatalf("persist: %v", err)
	}
	return buf.Bytes()
}

// FuzzRestore restores arbitrary bytes as a snapshot, as a member does
// with one sent by the leader or read from a backup. Properties: no panic;
// a refused snapshot leaves the state where it was (it costs no data); an
// accepted one writes back out to bytes that restore to the same bytes
// again (Persist is deterministic, Restore loses nothing of it).
// Seeds in testdata/fuzz/FuzzRestore are real snapshots of a busy FSM
// (versions 1 and 2), cut short and with a byte flipped.
func FuzzRestore(f *testing.F) {
	f.Add([]byte(`{"version":2,"applied":1,"fsm_version":1}` + "\n"))
	f.Add([]byte(`{"version":1,"applied":3}` + "\n" + `{"tasks":{},"deliveries":{}}` + "\n"))
	f.Add([]byte(`{"version":9}` + "\n"))
	f.Add([]byte("\n"))
	// One FSM for every input, as a member keeps its state across
	// snapshots: a refusal must leave it at the index it was at. (Each
	// Persist allocates a 1 MiB buffer: persisting only after a success
	// keeps the iterations fast.)
	// A body that does not read after the header did stops a member that
	// held a state (its halt func; it is then started again, empty).
	var halted error
	newFSM := func() *FSM {
		f := NewFSM()
		f.SetHalt(func(err error) { halted = err; panic(haltedRestore{}) })
		return f
	}
	fsm := newFSM()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip()
		}
		was := fsm.AppliedIndex()
		halted = nil
		// A check, which keeps no task (a leader's of a backup), refuses
		// what Restore refuses, for the same reason.
		_, checked := InspectSnapshot(bytes.NewReader(data))
		err := restoreRecovering(fsm, data)
		if (checked == nil) != (err == nil) || (halted == nil && err != nil && checked.Error() != err.Error()) {
			t.Fatalf("the check says %v, Restore %v", checked, err)
		}
		if err != nil {
			if halted != nil {
				var re *RestoreError
				if !errors.As(halted, &re) || was == 0 {
					t.Fatalf("halted with %v at index %d", halted, was)
				}
				fsm = newFSM()
				return
			}
			if strings.Contains(err.Error(), "panic") {
				t.Fatalf("restore panicked: %v", err)
			}
			if got := fsm.AppliedIndex(); got != was {
				t.Fatalf("a refused restore (%v) moved the state from index %d to %d", err, was, got)
			}
			return
		}
		once := persistBytes(t, fsm)
		again := NewFSM()
		if err := again.Restore(bytes.NewReader(once)); err != nil {
			t.Fatalf("a restored state written out does not restore: %v", err)
		}
		if twice := persistBytes(t, again); !bytes.Equal(once, twice) {
			t.Fatalf("restore of a written snapshot changed it:\n%q\n%q", once, twice)
		}
		// Rewritten for a restore with the members it holds, the input
		// restores to the same state.
		var rewritten bytes.Buffer
		if _, err := RewriteSnapshot(bytes.NewReader(data), &rewritten, fsm.Members()); err != nil {
			t.Fatalf("a snapshot that restores does not rewrite: %v", err)
		}
		third := NewFSM()
		if err := third.Restore(&rewritten); err != nil {
			t.Fatalf("a rewritten snapshot does not restore: %v", err)
		}
		if thrice := persistBytes(t, third); !bytes.Equal(once, thrice) {
			t.Fatalf("a rewritten snapshot restored to another state:\n%q\n%q", once, thrice)
		}
	})
}
