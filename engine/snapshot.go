package engine

import (
	"bufio"
	"cmp"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"runtime"
	"slices"
	"time"
)

// SnapshotVersion is written at the head of every snapshot. Restore reads
// it and every version before it, and refuses newer ones.
//
//   - 1: the header line, then the whole state as one JSON document.
//   - 2: the header line, then a gob stream of sections, each a section
//     record and its records one by one, in a fixed order, ended by the
//     section "end". Records stream in and out one at a time, so neither
//     side holds the whole encoding, and gob is several times faster than
//     JSON both ways.
const SnapshotVersion = 2

// snapshotHeader heads every snapshot, as one line of JSON.
type snapshotHeader struct {
	Version int    `json:"version"`
	Applied uint64 `json:"applied"`
	// FSMVersion is the log version the snapshot needs (absent before FSM
	// versions: 1): the writing build's, except that a state holding
	// nothing of version 3 says 2 (snapshotFSM), so that a member still on
	// a version 2 build takes the snapshots of an upgraded leader. A build
	// refuses a snapshot from a newer FSM version: it may hold sections or
	// fields it would drop.
	FSMVersion uint16 `json:"fsm_version,omitempty"`
	// Members, when present, are the member records a restore of the
	// snapshot installs in place of those its body holds: a backup
	// restored into a cluster takes that cluster's members
	// (RewriteSnapshot). Such a header says FSMSnapshotMembers at least,
	// so that a build that would keep the body's members refuses it.
	Members *[]Member `json:"members,omitempty"`
}

// FSMSnapshotMembers is the FSM version that first read the members of a
// snapshot's header.
const FSMSnapshotMembers uint16 = 7

// section heads Count records of one part of the state in a version-2
// snapshot.
type section struct {
	Name  string
	Count int
}

// Wire forms of the state's map entries that are not records themselves.
type (
	timeEntry struct {
		Key string
		At  time.Time
	}
	missedEntry struct {
		Rule, Recipient string
		Slots           []string
	}
	// dirEntry is the directory in force ("current") or held ("held").
	dirEntry struct {
		Kind   string
		Record DirectoryRecord
	}
	// dayEntry carries DayStats as JSON: it holds a map, which gob would
	// write in random order, and snapshots must be deterministic.
	dayEntry struct {
		Date, Rule string
		Stats      []byte
	}
	// clockEntry carries the last ClockSeen as JSON, for the same reason
	// (its Clocks map).
	clockEntry struct {
		Seen []byte
	}
)

const sectionEnd = "end"

type fsmSnapshot struct {
	st      *state
	applied uint64
}

// Snapshot captures the state as it is now; Persist encodes it later while
// Apply goes on. Raft holds off Apply while it runs, so it only freezes
// the big maps (constant time, see cowMap) and copies the small ones. It
// takes the write lock: freezing starts a new generation of the maps.
func (f *FSM) Snapshot() (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fsmSnapshot{st: f.st.clone(), applied: f.applied}, nil
}

// Release does nothing: the captured maps are garbage once unreferenced.
func (s *fsmSnapshot) Release() {}

// Persist writes the header line, then the state as a version-2 stream.
// The same state always gives the same bytes.
func (s *fsmSnapshot) Persist(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	h, err := json.Marshal(snapshotHeader{Version: SnapshotVersion, Applied: s.applied, FSMVersion: snapshotFSM(s.st)})
	if err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	if _, err := bw.Write(append(h, '\n')); err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	enc := gob.NewEncoder(bw)
	st := s.st
	// Records, each made a Delivery as it is written: not every delivery
	// made at once (512 bytes each) beside the state.
	deliveries := slices.SortedFunc(st.Deliveries.recordValues(), func(a, b *deliveryRec) int { return cmp.Compare(a.getID(), b.getID()) })
	daily := make([]dayEntry, 0, len(st.Daily))
	for _, date := range slices.Sorted(maps.Keys(st.Daily)) {
		for _, rule := range slices.Sorted(maps.Keys(st.Daily[date])) {
			b, err := json.Marshal(st.Daily[date][rule])
			if err != nil {
				return fmt.Errorf("write snapshot: daily %s %s: %w", date, rule, err)
			}
			daily = append(daily, dayEntry{Date: date, Rule: rule, Stats: b})
		}
	}
	var missed []missedEntry
	for _, rule := range slices.Sorted(maps.Keys(st.Missed)) {
		for _, who := range slices.Sorted(maps.Keys(st.Missed[rule])) {
			missed = append(missed, missedEntry{Rule: rule, Recipient: who, Slots: st.Missed[rule][who]})
		}
	}
	var compensate []string
	for _, id := range slices.Sorted(maps.Keys(st.Compensate)) {
		if st.Compensate[id] {
			compensate = append(compensate, id)
		}
	}
	err = cmp.Or(
		writeSection(enc, "runs", slices.SortedFunc(st.Runs.Values(), func(a, b *Run) int { return cmp.Compare(a.Key, b.Key) })),
		writeSectionAs(enc, "deliveries", deliveries, (*deliveryRec).delivery),
		writeSection(enc, "cursors", timeEntries(maps.All(st.Cursors))),
		writeSection(enc, "members", sortedValues(st.Members)),
		writeSection(enc, "alerts", sortedValues(st.Alerts)),
		writeSection(enc, "missed", missed),
		// Tasks go in due order, read off their indexes: no sorting here,
		// and little in Restore.
		writeTasks(enc, st, packedTasks(st)),
		writeSection(enc, "ledger", timeEntries(st.Ledger.All())),
		writeSection(enc, "compensate", compensate),
		writeSection(enc, "daily", daily),
		writePaused(enc, st),
		writeDirectory(enc, st),
		writeAudit(enc, st),
		writeClock(enc, st),
		writeEvents(enc, st),
		writeRemoved(enc, st),
		writeSection[int](enc, sectionEnd, nil),
	)
	if err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return bw.Flush()
}

// writeDirectory writes the directory section only when there is a
// directory: a cluster that never configured one writes the same
// snapshots as builds that do not know the section.
func writeDirectory(enc *gob.Encoder, st *state) error {
	var entries []dirEntry
	if st.Directory != nil {
		entries = append(entries, dirEntry{Kind: "current", Record: *st.Directory})
	}
	if st.DirectoryHeld != nil {
		entries = append(entries, dirEntry{Kind: "held", Record: *st.DirectoryHeld})
	}
	if len(entries) == 0 {
		return nil
	}
	return writeSection(enc, "directory", entries)
}

// auditHead is the audit section's counters, written before its records.
type auditHead struct {
	Seq, Capped uint64
}

// writePaused writes the paused section, only when a rule is paused: an
// FSM version 1 build (which a member may still run during a rolling
// upgrade, with nothing paused, pausing being version 2) refuses a section
// it does not know, even an empty one, and could not take the snapshot.
func writePaused(enc *gob.Encoder, st *state) error {
	if len(st.Paused) == 0 {
		return nil
	}
	return writeSection(enc, "paused", sortedValues(st.Paused))
}

// writeAudit writes the audit sections only once a record was ever made,
// for the same reason as writeDirectory.
func writeAudit(enc *gob.Encoder, st *state) error {
	if st.Audit.Seq == 0 {
		return nil
	}
	err := cmp.Or(
		writeSection(enc, "audit_head", []auditHead{{Seq: st.Audit.Seq, Capped: st.Audit.Capped}}),
		writeSection(enc, "audit", st.Audit.Records),
	)
	if err != nil || len(st.Audit.Folds) == 0 {
		return err
	}
	// Only a version-4 cluster folds (snapshotFSM says 4 then).
	folds := make([]auditFoldEntry, 0, len(st.Audit.Folds))
	for _, seq := range slices.Sorted(maps.Keys(st.Audit.Folds)) {
		folds = append(folds, auditFoldEntry{Seq: seq, AuditFold: st.Audit.Folds[seq]})
	}
	return writeSection(enc, "audit_folds", folds)
}

// snapshotFSM is the FSM version a snapshot of st needs: 3 once a clock
// observation is in it (the only part of the state version 3 added). A
// part of the state a later version adds raises it the same way, only
// once that part holds something, so that members one version behind still
// take an upgraded leader's snapshots.
func snapshotFSM(st *state) uint16 {
	if packedTasks(st) {
		return FSMPackedTasks // tasks_packed (snapshot_tasks.go)
	}
	if len(st.Audit.Folds) > 0 {
		return FSMAuditFolds // audit_folds (audit_fold.go)
	}
	if hasEvents(st) {
		return FSMEvents
	}
	if len(st.Removed) > 0 {
		return FSMRemovedMembers
	}
	if st.usesV4 {
		return 4 // a hold, a recall or a fire's token (Run, Delivery fields)
	}
	if st.Clock == nil {
		return 2
	}
	return FSMClocks
}

// writeRemoved writes the removed members only when there is one, for
// the same reason as writeDirectory.
func writeRemoved(enc *gob.Encoder, st *state) error {
	if len(st.Removed) == 0 {
		return nil
	}
	return writeSection(enc, "removed", sortedValues(st.Removed))
}

// writeClock writes the clock section only once an observation was
// applied, for the same reason as writeDirectory.
func writeClock(enc *gob.Encoder, st *state) error {
	if st.Clock == nil {
		return nil
	}
	b, err := json.Marshal(st.Clock)
	if err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	return writeSection(enc, "clock", []clockEntry{{Seen: b}})
}

func sortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

func timeEntries(m iter.Seq2[string, time.Time]) []timeEntry {
	var out []timeEntry
	for k, at := range m {
		out = append(out, timeEntry{Key: k, At: at})
	}
	slices.SortFunc(out, func(a, b timeEntry) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

func writeSection[T any](enc *gob.Encoder, name string, items []T) error {
	return writeSectionAs(enc, name, items, func(it T) T { return it })
}

// writeSectionAs writes items as what as makes of each.
func writeSectionAs[T, U any](enc *gob.Encoder, name string, items []T, as func(T) U) error {
	if err := enc.Encode(section{Name: name, Count: len(items)}); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, it := range items {
		if err := enc.Encode(as(it)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// Restore replaces the whole state with a snapshot's, of this version or
// an earlier one.
//
// Once the header reads (its version and FSM version are ones this build
// applies), the state being replaced is let go before the new one is
// read: a node holds one state at a time, not two (ten million pending
// tasks are gigabytes of each). Reads meanwhile see an empty state. A
// snapshot refused by its header leaves the state as it was; one whose
// body then does not read stops the node through its halt func when it
// held a state (SetHalt: Raft would otherwise go on applying its log to
// an empty state), and is an error for a node that held none (a node
// starting, which falls back to an older snapshot or its log).
func (f *FSM) Restore(r io.Reader) error {
	br, h, info, err := readSnapshotHeader(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	held := f.applied > 0
	f.st, f.applied = newState(), 0
	f.mu.Unlock()
	if held {
		// The state let go is garbage now: collected before the new one
		// is read, its pages hold the new one. Otherwise the collector
		// paces itself by the old state's size and lets the heap grow to
		// half again that first, the two side by side: restoring ten
		// million tasks over ten million took a heap of 2,887 MiB, and
		// 2,455 with this, in the same time. The collection marks only
		// what is still live, which is little.
		runtime.GC()
	}
	st, info, err := readSnapshotBody(br, h, info, false)
	if err != nil {
		if held {
			f.haltWith(&RestoreError{Applied: info.Applied, Err: err})
		}
		return err
	}
	f.mu.Lock()
	f.st, f.applied = st, info.Applied
	f.mu.Unlock()
	f.notify(AnyChange | TasksChange) // every task may have changed
	return nil
}

// RestoreError is a snapshot whose body did not read after the node had
// let its state go for it (Restore): the node must stop.
type RestoreError struct {
	Applied uint64 // the index the snapshot says it is at
	Err     error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("the snapshot at index %d does not read (%v): this node let its state go to restore it and stops; started again, it restores from its own data dir or a leader's snapshot", e.Applied, e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// SnapshotInfo describes a snapshot read whole (InspectSnapshot,
// RewriteSnapshot).
type SnapshotInfo struct {
	// Version is the snapshot's layout (SnapshotVersion), FSMVersion the
	// FSM version it needs (its header's), Applied the index of the last
	// command in it.
	Version    int
	FSMVersion uint16
	Applied    uint64
	// Sections are the parts of the state in stream order; a version-1
	// snapshot (one JSON document) has no sizes.
	Sections []SnapshotSection
}

// SnapshotSection is one section of a snapshot: its records and the bytes
// of the stream they took (the section's head and gob's type definitions
// included).
type SnapshotSection struct {
	Name  string
	Count int
	Bytes int64
}

// InspectSnapshot reads a whole snapshot as Restore would, without
// installing it: an error is what Restore would refuse it with. It checks
// the tasks without keeping them (state.checkTasks).
func InspectSnapshot(r io.Reader) (SnapshotInfo, error) {
	br, h, info, err := readSnapshotHeader(r)
	if err != nil {
		return info, err
	}
	_, info, err = readSnapshotBody(br, h, info, true)
	return info, err
}

// RewriteSnapshot reads a whole snapshot as Restore would and writes it to
// w with members for its member records. A backup restored into another
// cluster keeps that cluster's members (their addresses, their builds):
// the old cluster's would send forwarded writes to machines that are
// gone.
//
// What it writes is the snapshot's header naming members (and
// FSMSnapshotMembers), then its body as it came: the body is read on its
// way through, to refuse what Restore would refuse, but not kept. A
// leader restoring a backup of ten million tasks so holds the state it
// serves and not a second one beside it, and reads the backup whole only
// once more, in Restore, after letting the state it served go. When an
// error is returned, what w holds is not a snapshot to restore.
func RewriteSnapshot(r io.Reader, w io.Writer, members []Member) (SnapshotInfo, error) {
	br, h, info, err := readSnapshotHeader(r)
	if err != nil {
		return info, err
	}
	own := slices.Clone(members)
	if own == nil {
		own = []Member{} // "members": [], not null, which names none
	}
	h.Members = &own
	h.FSMVersion = max(h.FSMVersion, FSMSnapshotMembers)
	line, err := json.Marshal(h)
	if err != nil {
		return info, fmt.Errorf("write snapshot header: %w", err)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		return info, fmt.Errorf("write snapshot header: %w", err)
	}
	body := bufio.NewReaderSize(io.TeeReader(br, w), 1<<20)
	if _, info, err = readSnapshotBody(body, h, info, true); err != nil {
		return info, err
	}
	// And whatever follows the end, as Restore would find it.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return info, err
	}
	return info, nil
}

// setMembers replaces st's member records with members.
func setMembers(st *state, members []Member) {
	st.Members = make(map[string]Member, len(members))
	for _, m := range members {
		st.Members[m.ID] = m
	}
}

// readSnapshotHeader reads a snapshot's header line and refuses a layout
// or an FSM version this build does not read; the body follows in the
// reader returned.
func readSnapshotHeader(r io.Reader) (*bufio.Reader, snapshotHeader, SnapshotInfo, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	line, err := br.ReadBytes('\n')
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, snapshotHeader{}, SnapshotInfo{}, fmt.Errorf("read snapshot header: %w", err)
	}
	var h snapshotHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, h, SnapshotInfo{}, fmt.Errorf("read snapshot header: %w", err)
	}
	info := SnapshotInfo{Version: h.Version, FSMVersion: max(h.FSMVersion, 1), Applied: h.Applied}
	if h.FSMVersion > FSMVersion {
		return nil, h, info, fmt.Errorf("snapshot written by a build that applies FSM version %d; this build (%s) applies %d: upgrade this node to the build the other members run", h.FSMVersion, Build, FSMVersion)
	}
	if h.Version != 1 && h.Version != 2 {
		return nil, h, info, fmt.Errorf("snapshot version %d: this binary reads versions 1 to %d", h.Version, SnapshotVersion)
	}
	return br, h, info, nil
}

// readSnapshotBody reads the state that follows a header read by
// readSnapshotHeader into a fresh state. A check reads and checks every
// record but keeps no task (checkTasks): what it returns is the rest of
// the state.
func readSnapshotBody(br *bufio.Reader, h snapshotHeader, info SnapshotInfo, check bool) (*state, SnapshotInfo, error) {
	st := newState()
	st.checkTasks = check
	defer func() { st.checkTasks = false }()
	var err error
	switch h.Version {
	case 1:
		err = readVersion1(br, st)
		if err == nil {
			info.Sections = st.sectionCounts()
		}
	case 2:
		info.Sections, err = readVersion2(br, st)
	}
	if err != nil {
		return nil, info, fmt.Errorf("read snapshot: %w", err)
	}
	for _, d := range st.Deliveries.All() {
		if d.State == StateClaimed && d.Claim == nil {
			return nil, info, fmt.Errorf("read snapshot: delivery %s is claimed without a claim", d.ID)
		}
	}
	if h.Members != nil {
		setMembers(st, *h.Members)
	}
	st.reindex()
	return st, info, nil
}

// sectionCounts are the records of a version-1 snapshot, read, by the
// sections a version-2 one would have.
func (s *state) sectionCounts() []SnapshotSection {
	return []SnapshotSection{
		{Name: "runs", Count: s.Runs.Len()}, {Name: "deliveries", Count: s.Deliveries.Len()},
		{Name: "cursors", Count: len(s.Cursors)}, {Name: "members", Count: len(s.Members)},
		{Name: "alerts", Count: len(s.Alerts)}, {Name: "tasks", Count: s.Tasks.Len()},
		{Name: "ledger", Count: s.Ledger.Len()}, {Name: "paused", Count: len(s.Paused)},
	}
}

// countingReader counts the bytes gob consumed. It is an io.ByteReader,
// so gob reads through it exactly what it decodes (it buffers a reader
// that is not), and the count ends where each record ends.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// stateV1 is the layout of a version-1 snapshot: the state as one JSON
// document.
type stateV1 struct {
	Runs          map[string]*Run                 `json:"runs"`
	Deliveries    map[string]*Delivery            `json:"deliveries"`
	Cursors       map[string]time.Time            `json:"cursors"`
	Members       map[string]Member               `json:"members"`
	Alerts        map[string]*Alert               `json:"alerts"`
	Missed        map[string]map[string][]string  `json:"missed"`
	Tasks         map[string]*Task                `json:"tasks"`
	Ledger        map[string]time.Time            `json:"ledger"`
	Compensate    map[string]bool                 `json:"compensate"`
	Paused        map[string]*Pause               `json:"paused,omitempty"`
	Daily         map[string]map[string]*DayStats `json:"daily"`
	Directory     *DirectoryRecord                `json:"directory,omitempty"`
	DirectoryHeld *DirectoryRecord                `json:"directory_held,omitempty"`
}

// v1 is st in the version-1 layout (for tests: this build writes version 2).
func (s *state) v1() stateV1 {
	return stateV1{
		Runs: s.Runs.toMap(), Deliveries: s.Deliveries.toMap(), Cursors: s.Cursors, Members: s.Members,
		Alerts: s.Alerts, Missed: s.Missed, Tasks: s.Tasks.toMap(), Ledger: s.Ledger.toMap(),
		Compensate: s.Compensate, Paused: s.Paused, Daily: s.Daily, Directory: s.Directory, DirectoryHeld: s.DirectoryHeld,
	}
}

// keyedBy checks that each record of m is stored under its own id.
func keyedBy[V any](what string, m map[string]*V, id func(*V) string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch v := m[k]; {
		case v == nil:
			return fmt.Errorf("%s %q is null", what, k)
		case id(v) != k:
			return fmt.Errorf("%s stored under %q names itself %q", what, k, id(v))
		}
	}
	return nil
}

func readVersion1(r io.Reader, st *state) error {
	var v stateV1
	if err := json.NewDecoder(r).Decode(&v); err != nil {
		return err
	}
	if v.Runs == nil || v.Deliveries == nil || v.Cursors == nil || v.Members == nil || v.Alerts == nil || v.Missed == nil {
		return errors.New("a section is missing")
	}
	// A version-2 snapshot keys each record by its own id; a version-1
	// one by the JSON object's key, which Herald always wrote as that id.
	// One that differs (or a null record) is not a snapshot Herald wrote:
	// taken as it is, it came out of the next snapshot keyed otherwise.
	if err := errors.Join(keyedBy("run", v.Runs, func(r *Run) string { return r.Key }),
		keyedBy("delivery", v.Deliveries, func(d *Delivery) string { return d.ID }),
		keyedBy("task", v.Tasks, func(t *Task) string { return t.Key })); err != nil {
		return err
	}
	st.Runs.fromMap(v.Runs)
	st.Deliveries.fromMap(v.Deliveries)
	st.Tasks.fromMap(v.Tasks)
	st.Ledger.fromMap(v.Ledger)
	st.Cursors, st.Members, st.Alerts, st.Missed = v.Cursors, v.Members, v.Alerts, v.Missed
	st.Directory, st.DirectoryHeld = v.Directory, v.DirectoryHeld
	// Sections added later are absent from older snapshots: start empty
	// (newState made them).
	if v.Compensate != nil {
		st.Compensate = v.Compensate
	}
	if v.Daily != nil {
		st.Daily = v.Daily
	}
	if v.Paused != nil {
		st.Paused = v.Paused
	}
	return nil
}

// sectionReaders read one record of each section of a version-2 snapshot
// into the state. Each decodes into a fresh value: gob leaves the fields
// that a record omits (zero values) as they were.
var sectionReaders = map[string]func(*gob.Decoder, *state) error{
	"runs": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(r *Run) {
			r.Rule = nameOf(r.Rule)
			st.Runs.Set(r.Key, r)
		})
	},
	"deliveries": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(d *Delivery) {
			// Share what the applied deliveries shared (see planShare).
			if c := d.Claim; c != nil && *c == (Claim{Seq: c.Seq}) {
				d.Claim = settledClaim(c.Seq)
			}
			d.Channel = nameOf(d.Channel)
			if p, ok := st.payloads[string(d.Payload)]; ok {
				d.Payload = p
			} else {
				st.payloads[string(d.Payload)] = d.Payload
			}
			st.Deliveries.Set(d.ID, d)
		})
	},
	"cursors": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(e *timeEntry) { st.Cursors[e.Key] = e.At })
	},
	"members": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(m *Member) { st.Members[m.ID] = *m })
	},
	"alerts": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(a *Alert) { st.Alerts[a.ID] = a })
	},
	"missed": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(e *missedEntry) {
			if st.Missed[e.Rule] == nil {
				st.Missed[e.Rule] = map[string][]string{}
			}
			st.Missed[e.Rule][e.Recipient] = e.Slots
		})
	},
	"tasks": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(t *Task) {
			t.Rule = nameOf(t.Rule)
			if !st.checkTasks {
				k := st.Tasks.Set(t.Key, t)
				st.taskTree(t).ReplaceOrInsert(newDue(t.DueAt, k)) // see reindex
			}
		})
	},
	"ledger": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(e *timeEntry) { st.Ledger.Set(e.Key, e.At) })
	},
	"compensate": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(id *string) { st.Compensate[*id] = true })
	},
	"paused": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(p *Pause) { st.Paused[p.Rule] = p })
	},
	"directory": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(e *dirEntry) {
			r := e.Record
			if e.Kind == "held" {
				st.DirectoryHeld = &r
			} else {
				st.Directory = &r
			}
		})
	},
	"audit_head": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(h *auditHead) { st.Audit.Seq, st.Audit.Capped = h.Seq, h.Capped })
	},
	"audit": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(r *AuditRecord) { st.Audit.Records = append(st.Audit.Records, r) })
	},
	"audit_folds": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(e *auditFoldEntry) {
			if st.Audit.Folds == nil {
				st.Audit.Folds = map[uint64]AuditFold{}
			}
			st.Audit.Folds[e.Seq] = e.AuditFold
		})
	},
	"events": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(e *Event) { st.Events.byID[e.ID] = e })
	},
	"kf_cursors": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(e *kfEntry) { st.Events.kf[e.Key] = e.Cursor })
	},
	"removed": func(dec *gob.Decoder, st *state) error {
		return readRecord(dec, func(r *RemovedMember) { st.Removed[r.ID] = *r })
	},
	"clock": func(dec *gob.Decoder, st *state) error {
		var e clockEntry
		if err := dec.Decode(&e); err != nil {
			return err
		}
		seen := new(ClockSeen)
		if err := json.Unmarshal(e.Seen, seen); err != nil {
			return fmt.Errorf("clock: %w", err)
		}
		st.Clock = seen
		return nil
	},
	"daily": func(dec *gob.Decoder, st *state) error {
		var e dayEntry
		if err := dec.Decode(&e); err != nil {
			return err
		}
		s := new(DayStats)
		if err := json.Unmarshal(e.Stats, s); err != nil {
			return fmt.Errorf("daily %s %s: %w", e.Date, e.Rule, err)
		}
		if st.Daily[e.Date] == nil {
			st.Daily[e.Date] = map[string]*DayStats{}
		}
		st.Daily[e.Date][e.Rule] = s
		return nil
	},
}

func readRecord[T any](dec *gob.Decoder, put func(*T)) error {
	v := new(T)
	if err := dec.Decode(v); err != nil {
		return err
	}
	put(v)
	return nil
}

func readVersion2(r *bufio.Reader, st *state) ([]SnapshotSection, error) {
	cr := &countingReader{r: r}
	dec := gob.NewDecoder(cr)
	st.payloads = map[string]json.RawMessage{}
	defer func() { st.payloads = nil }()
	seen := map[string]bool{}
	var sections []SnapshotSection
	// tasks_packed is reported as part of tasks: a backup's tasks are how
	// many it holds, however they were written.
	var packed SnapshotSection
	for {
		start := cr.n
		var sec section
		if err := dec.Decode(&sec); err != nil {
			if errors.Is(err, io.EOF) {
				return sections, errors.New("truncated: no end section")
			}
			return sections, err
		}
		if sec.Name == sectionEnd {
			break
		}
		read, ok := sectionReaders[sec.Name]
		if !ok && sec.Name != "tasks_packed" {
			return sections, fmt.Errorf("unknown section %q", sec.Name)
		}
		if seen[sec.Name] {
			return sections, fmt.Errorf("section %q twice", sec.Name)
		}
		seen[sec.Name] = true
		if n := min(sec.Count, 1<<24); n > 0 { // sized for what comes, within reason
			switch sec.Name {
			case "runs":
				st.Runs.reserve(n)
			case "deliveries":
				st.Deliveries.reserve(n)
			case "tasks", "tasks_packed":
				if !st.checkTasks { // a check keeps none
					st.Tasks.reserve(n)
				}
			}
		}
		if sec.Name == "tasks_packed" {
			var scratch *taskBlock // a check reads every block into one
			if st.checkTasks {
				scratch = new(taskBlock)
			}
			for got := 0; got < sec.Count; {
				n, err := readTaskBlock(dec, st, sec.Count-got, scratch)
				got += n
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = io.ErrUnexpectedEOF
					}
					return sections, fmt.Errorf("%s: the block after record %d of %d: %w", sec.Name, got, sec.Count, err)
				}
			}
			packed = SnapshotSection{Name: "tasks", Count: sec.Count, Bytes: cr.n - start}
			continue
		}
		for i := range sec.Count {
			if err := read(dec, st); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return sections, fmt.Errorf("%s: record %d of %d: %w", sec.Name, i+1, sec.Count, err)
			}
		}
		sections = append(sections, SnapshotSection{Name: sec.Name, Count: sec.Count, Bytes: cr.n - start})
	}
	if i := slices.IndexFunc(sections, func(s SnapshotSection) bool { return s.Name == "tasks" }); i >= 0 {
		sections[i].Count += packed.Count
		sections[i].Bytes += packed.Bytes
	}
	for _, name := range requiredSections {
		if !seen[name] {
			return sections, fmt.Errorf("section %q is missing", name)
		}
	}
	return sections, nil
}

// requiredSections are the sections every version-2 snapshot has had since
// FSM version 1. A section added later is optional: a snapshot from before
// it has none, and its part of the state starts empty.
var requiredSections = []string{"runs", "deliveries", "cursors", "members", "alerts", "missed", "tasks", "ledger", "compensate", "daily"}
