package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/heraldhq/herald/engine"
)

// Test-only command types, far from the engine's numbers.
const (
	cmdSet  engine.CommandType = 200 // body kv: set Key to Value, respond with the log index
	cmdFail engine.CommandType = 201 // respond with an error value
	// cmdStamp's body is a time: the leader's stamp, as engine.FSM keeps
	// the time its commands carry (LastStamp).
	cmdStamp engine.CommandType = 202
)

type kv struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func setCmd(key, value string) []byte {
	b, err := encodeTest(cmdSet, kv{key, value})
	if err != nil {
		panic(err)
	}
	return b
}

// encodeTest frames a test command as engine.Encode frames the engine's:
// type byte, body version 1, JSON.
func encodeTest(t engine.CommandType, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	return append([]byte{byte(t), 1}, b...), err
}

// Admit lets every command through: the test state machine has one build.
func (s *testSM) Admit(cmd []byte) ([]byte, error) { return cmd, nil }

// errRefused is what cmdFail responds with.
var errRefused = errors.New("refused by the state machine")

// testSM is a tiny StateMachine: a KV map plus member records.
type testSM struct {
	mu       sync.Mutex
	data     map[string]string
	members  map[string]engine.Member
	removed  map[string]engine.RemovedMember
	audits   []engine.RecordAudit
	restores int
	// restoreErr, when set, is what Restore fails with (a snapshot from a
	// newer version, say).
	restoreErr error
	// refuseKey, when set, makes Restore fail on a snapshot holding that
	// key: only the snapshots taken after it was written are unreadable.
	refuseKey string
	stamp     *engine.Stamp // the last cmdStamp
}

var _ StateMachine = (*testSM)(nil)

func newTestSM() *testSM {
	return &testSM{data: map[string]string{}, members: map[string]engine.Member{}, removed: map[string]engine.RemovedMember{}}
}

func (s *testSM) Apply(index, term uint64, cmd []byte) any {
	// RecordAudit has a second body version (the unchanged flag), the
	// same JSON with one more field: this state machine reads both.
	if len(cmd) < 2 || (cmd[1] != 1 && engine.CommandType(cmd[0]) != engine.CmdRecordAudit) {
		panic(fmt.Sprintf("test sm: bad command %q", cmd))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	body := cmd[2:]
	switch t := engine.CommandType(cmd[0]); t {
	case cmdSet:
		var b kv
		mustUnmarshal(body, &b)
		s.data[b.Key] = b.Value
		return index
	case cmdFail:
		return errRefused
	case cmdStamp:
		var at time.Time
		mustUnmarshal(body, &at)
		s.stamp = &engine.Stamp{Index: index, At: at}
		return nil
	case engine.CmdUpsertMember:
		var m engine.Member
		mustUnmarshal(body, &m)
		s.members[m.ID] = m
		return nil
	case engine.CmdRemoveMember:
		var r engine.RemoveMember
		mustUnmarshal(body, &r)
		delete(s.members, r.ID)
		return nil
	case engine.CmdRevokeMember:
		var r engine.RevokeMember
		mustUnmarshal(body, &r)
		s.removed[r.ID] = engine.RemovedMember(r)
		return nil
	case engine.CmdReadmitMember:
		var r engine.ReadmitMember
		mustUnmarshal(body, &r)
		delete(s.removed, r.ID)
		return nil
	case engine.CmdRecordAudit:
		var r engine.RecordAudit
		mustUnmarshal(body, &r)
		s.audits = append(s.audits, r)
		return nil
	default:
		panic(fmt.Sprintf("test sm: unknown command %s", t))
	}
}

// LastStamp is the last cmdStamp's (see engine.FSM.LastStamp).
func (s *testSM) LastStamp() (engine.Stamp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stamp == nil {
		return engine.Stamp{}, false
	}
	return *s.stamp, true
}

func mustUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(err)
	}
}

type smState struct {
	Data    map[string]string               `json:"data"`
	Members map[string]engine.Member        `json:"members"`
	Removed map[string]engine.RemovedMember `json:"removed"`
	Audits  []engine.RecordAudit            `json:"audits"`
}

type smSnapshot struct{ st smState }

func (s *smSnapshot) Persist(w io.Writer) error { return json.NewEncoder(w).Encode(s.st) }
func (s *smSnapshot) Release()                  {}

func (s *testSM) Snapshot() (engine.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &smSnapshot{st: smState{Data: maps.Clone(s.data), Members: maps.Clone(s.members), Removed: maps.Clone(s.removed), Audits: slices.Clone(s.audits)}}, nil
}

func (s *testSM) Restore(r io.Reader) error {
	if s.restoreErr != nil {
		return s.restoreErr
	}
	var st smState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return err
	}
	if st.Data == nil {
		st.Data = map[string]string{}
	}
	if st.Members == nil {
		st.Members = map[string]engine.Member{}
	}
	if st.Removed == nil {
		st.Removed = map[string]engine.RemovedMember{}
	}
	if _, ok := st.Data[s.refuseKey]; ok && s.refuseKey != "" {
		return fmt.Errorf("snapshot holds %q: written by a newer version", s.refuseKey)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data, s.members, s.removed, s.audits = st.Data, st.Members, st.Removed, st.Audits
	s.restores++
	return nil
}

func (s *testSM) Members() []engine.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]engine.Member, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, m)
	}
	return out
}

func (s *testSM) RemovedMember(id string) (engine.RemovedMember, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.removed[id]
	return r, ok
}

func (s *testSM) get(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[key]
}

func (s *testSM) member(id string) engine.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[id]
}

func (s *testSM) restoreCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restores
}

func (s *testSM) auditRecords() []engine.RecordAudit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.audits)
}
