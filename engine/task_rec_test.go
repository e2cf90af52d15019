package engine

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestTaskRecordGivesBackWhatItTook: a task comes back from the state's
// form as it went in, instants with their very location (== on each
// field, not only the same instant), whichever of its fields is set (each
// field of Task in turn, found by reflection, so a field added later that
// the compact form forgets fails here); a pending task whose times are
// UTC, Local or an RFC 3339 offset of whole hours takes the compact form.
func TestTaskRecordGivesBackWhatItTook(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, unsafe.Sizeof(taskRec{}), uintptr(64))
	same := func(t *testing.T, want, got *Task) {
		t.Helper()
		require.Equal(t, want, got)
		wv, gv := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
		for i := range wv.NumField() {
			if w, ok := wv.Field(i).Interface().(time.Time); ok {
				require.True(t, w == gv.Field(i).Interface().(time.Time), "%s: %v, got %v", wv.Type().Field(i).Name, w, gv.Field(i))
			}
		}
	}
	roundTrip := func(t *testing.T, task *Task) *taskRec {
		t.Helper()
		r := compactTask(task)
		same(t, task, r.task())
		require.Equal(t, task.State, r.state())
		require.True(t, task.DueAt.Equal(r.due()))
		return r
	}
	// As a command decodes: the times parsed from RFC 3339.
	parse := func(s string) time.Time {
		var at time.Time
		require.NoError(t, json.Unmarshal([]byte(`"`+s+`"`), &at))
		return at
	}
	pending := func(due, submitted string) *Task {
		return &Task{Key: "enquiry-1", Rule: nameOf("enquiry_timeout"), DueAt: parse(due), Data: json.RawMessage(`{"a":1}`),
			State: TaskPending, SubmittedAt: parse(submitted)}
	}
	for _, c := range []struct{ due, submitted string }{
		{"2026-12-05T09:00:00Z", "2026-12-04T21:00:00.123456789Z"},
		{"2026-12-05T09:00:00+08:00", "2026-12-04T21:00:00Z"},
		{"2026-12-05T09:00:00-05:00", "2026-12-04T21:00:00+14:00"},
		// Local, as parsed where the offset is the machine's at that instant
		// (whatever the zone and today's date).
		{time.Date(2026, 12, 5, 9, 0, 0, 0, time.Local).Format(time.RFC3339), "2026-12-04T21:00:00Z"},
	} {
		r := roundTrip(t, pending(c.due, c.submitted))
		require.Nil(t, r.full, "%s, %s: held whole", c.due, c.submitted)
	}
	// Not compact, and still given back: an offset of a half hour (a
	// Location of its own; made, not parsed, which on a machine at +05:30
	// would give Local), a monotonic reading, the zero time; and compact
	// with no data.
	halfHour := pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z")
	halfHour.DueAt = time.Date(2026, 12, 5, 9, 0, 0, 0, time.FixedZone("", 5*3600+1800))
	require.NotNil(t, roundTrip(t, halfHour).full)
	mono := pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z")
	mono.SubmittedAt = time.Now()
	require.NotNil(t, roundTrip(t, mono).full)
	zero := pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z")
	zero.SubmittedAt = time.Time{}
	require.NotNil(t, roundTrip(t, zero).full)
	noData := pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z")
	noData.Data = nil
	require.Nil(t, roundTrip(t, noData).full)
	emptyData := pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z")
	emptyData.Data = json.RawMessage{}
	require.NotNil(t, roundTrip(t, emptyData).full, "empty data is not nil data")

	// The data handed out is the record's, not a copy (a listing reads
	// every task it passes); appending to it cannot reach past it.
	r := roundTrip(t, pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z"))
	got := r.task()
	require.Equal(t, unsafe.StringData(r.kd[r.keyLen:]), unsafe.SliceData(got.Data))
	require.Equal(t, len(got.Data), cap(got.Data))

	// The map's key and the record's are one string: the key's bytes are
	// held once.
	var m taskMap
	task := pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z")
	k := m.Set(task.Key, task)
	require.Equal(t, task.Key, k)
	require.Equal(t, unsafe.StringData(m.record(k).kd), unsafe.StringData(k))
	for mk := range m.records() {
		require.Equal(t, unsafe.StringData(k), unsafe.StringData(mk))
	}

	// Every field set in turn: given back either way.
	base := pending("2026-12-05T09:00:00Z", "2026-12-04T21:00:00Z")
	tv := reflect.TypeFor[Task]()
	for i := range tv.NumField() {
		task := *base
		f := reflect.ValueOf(&task).Elem().Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString(f.String() + "-x")
		case time.Time:
			f.Set(reflect.ValueOf(parse("2027-01-01T00:00:00+08:00")))
		case json.RawMessage:
			f.Set(reflect.ValueOf(json.RawMessage(`{"b":2}`)))
		case TaskState:
			f.Set(reflect.ValueOf(TaskFired))
		default:
			t.Fatalf("field %s (%s): teach this test and taskRec about it", tv.Field(i).Name, f.Type())
		}
		roundTrip(t, &task)
	}
}

// TestTaskMapScansWithoutMakingTasks: the index rebuild and the snapshot
// read a compact task's state and due time off its record, in the order
// of the task indexes.
func TestTaskMapScansWithoutMakingTasks(t *testing.T) {
	t.Parallel()
	st := newState()
	due := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	for i, key := range []string{"c", "a", "b"} {
		st.putTask(&Task{Key: key, Rule: "r", DueAt: due.Add(time.Duration(i) * time.Minute), State: TaskPending, SubmittedAt: due.Add(-time.Hour)})
	}
	fired := &Task{Key: "z", Rule: "r", DueAt: due.Add(-time.Minute), State: TaskFired, SubmittedAt: due.Add(-time.Hour), FiredAt: due}
	st.putTask(fired)
	var keys []string
	for r := range st.taskRecords() {
		keys = append(keys, r.task().Key)
	}
	require.Equal(t, []string{"z", "c", "a", "b"}, keys)
	require.Same(t, fired, st.Tasks.At("z"), "a fired task is held whole")
	require.Nil(t, st.Tasks.record("c").full)
}
