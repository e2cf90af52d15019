package cluster

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/heraldhq/herald/engine"
)

// FuzzInspectBackup reads arbitrary bytes as a backup file, as herald
// snapshot inspect and restore do with a file an operator hands them. The
// fuzzed bytes are read as the whole file (raw) and as the state inside a
// well-formed envelope (so the fuzzer reaches the state reader past the
// checksum). Properties: no panic; every refusal wraps ErrBadBackup; an
// enveloped state is accepted exactly when engine.InspectSnapshot accepts
// it, with its checksum reported.
func FuzzInspectBackup(f *testing.F) {
	var snap bytes.Buffer
	s, err := engine.NewFSM().Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Persist(&snap); err != nil {
		f.Fatal(err)
	}
	f.Add(false, snap.Bytes())
	var whole bytes.Buffer
	if err := WriteBackup(&whole, BackupHeader{ClusterID: "c1", NodeID: "n1", FSMVersion: engine.FSMVersion, Size: int64(snap.Len())}, bytes.NewReader(snap.Bytes())); err != nil {
		f.Fatal(err)
	}
	f.Add(true, whole.Bytes())                                                   // a whole backup file
	f.Add(true, whole.Bytes()[:whole.Len()-10])                                  // cut short in its trailer
	f.Add(true, bytes.Replace(whole.Bytes(), []byte(`"n1"`), []byte(`"n2"`), 1)) // checksum no longer matches
	f.Add(true, snap.Bytes())
	f.Add(true, []byte("HERALD-BACKUP 1\n{\"size\":3}\nabc{\"sha256\":\"00\"}\n"))
	f.Add(true, []byte("HERALD-BACKUP 2\n"))
	f.Add(true, []byte("HERALD-BACKUP 1\n{\"size\":-1}\n"))
	f.Add(true, []byte("HERALD-BACKUP 1\n{\"size\":9223372036854775807,\"fsm_version\":65535}\n"))
	f.Fuzz(func(t *testing.T, raw bool, data []byte) {
		if len(data) > 64<<10 {
			t.Skip()
		}
		if raw {
			if _, err := InspectBackup(bytes.NewReader(data)); err != nil && !errors.Is(err, ErrBadBackup) {
				t.Fatalf("error %v does not wrap ErrBadBackup", err)
			}
			return
		}
		if len(data) == 0 {
			return // a header gives a state of at least one byte
		}
		var file bytes.Buffer
		h := BackupHeader{ClusterID: "c", NodeID: "n1", Index: 1, Term: 1, FSMVersion: engine.FSMVersion,
			Build: engine.Build, Created: time.Unix(0, 0).UTC(), Size: int64(len(data))}
		if err := WriteBackup(&file, h, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		info, err := InspectBackup(&file)
		got := info.Header
		got.Created = h.Created // compared with Equal: JSON does not keep the Location
		_, serr := engine.InspectSnapshot(bytes.NewReader(data))
		switch {
		case err != nil && !errors.Is(err, ErrBadBackup):
			t.Fatalf("error %v does not wrap ErrBadBackup", err)
		case (err == nil) != (serr == nil):
			t.Fatalf("backup: %v; its state alone: %v", err, serr)
		case err == nil && (len(info.SHA256) != 64 || got != h || !info.Header.Created.Equal(h.Created)):
			t.Fatalf("info %+v for header %+v", info, h)
		}
	})
}
