package engine

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"encoding/json"
)

// TaskState is where an API task stands.
type TaskState uint8

// Append-only: task states are replicated and snapshotted.
const (
	// TaskPending: submitted, waiting in the due queue for DueAt. Entered
	// by SubmitTask; left by StartRun (fired) or CancelTask.
	TaskPending TaskState = 1
	// TaskFired: its run started (the scheduler's StartRun); what happened
	// next is in the run's deliveries. Left only by CancelTask while none
	// of them has been claimed yet.
	TaskFired TaskState = 2
	// TaskCancelled: final; cancelled before anything of it was sent.
	TaskCancelled TaskState = 3
)

func (s TaskState) String() string {
	switch s {
	case TaskPending:
		return "pending"
	case TaskFired:
		return "fired"
	case TaskCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("task-state(%d)", uint8(s))
}

// ParseTaskState reads "pending", "fired" or "cancelled".
func ParseTaskState(s string) (TaskState, error) {
	for st := TaskPending; st <= TaskCancelled; st++ {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("task state %q: want pending, fired or cancelled", s)
}

// Task is an API task: fire rule Rule once at DueAt with Data, unless it is
// cancelled first. Its run's key is TaskRunKey(Key).
type Task struct {
	Key         string          `json:"key"`
	Rule        string          `json:"rule"`
	DueAt       time.Time       `json:"due_at"`
	Data        json.RawMessage `json:"data,omitempty"`
	State       TaskState       `json:"state"`
	SubmittedAt time.Time       `json:"submitted_at"`
	FiredAt     time.Time       `json:"fired_at,omitzero"`
	CancelledAt time.Time       `json:"cancelled_at,omitzero"`
	// Alert is the alert this task notifies (tasks of the alert rule).
	Alert string `json:"alert,omitempty"`
}

// Errors of the task commands.
var (
	// ErrTaskConflict: the key exists with a different body (see
	// TaskConflictError for the differences).
	ErrTaskConflict = errors.New("a task with this key exists with a different body")
	// ErrNoTask: no task has this key.
	ErrNoTask = errors.New("no such task")
	// ErrTaskFired: the task fired and something of it was already sent
	// or attempted (see TaskFiredError).
	ErrTaskFired = errors.New("task already fired")
	// ErrTaskKeyUsed: the key belonged to a task that fired and was pruned.
	ErrTaskKeyUsed = errors.New("task key already used")
)

// SubmitTask is the body of CmdSubmitTask. The same key and body again is
// answered with the existing task; the same key with another body is
// refused with a TaskConflictError.
type SubmitTask struct {
	Key   string          `json:"key"`
	Rule  string          `json:"rule"`
	DueAt time.Time       `json:"due_at"`
	Data  json.RawMessage `json:"data,omitempty"`
	Now   time.Time       `json:"now"`
}

// SubmitTasks submits tasks in their order, as that many SubmitTask
// would (FSM version 5): one entry for the submissions a busy leader
// took together.
type SubmitTasks struct {
	Tasks []SubmitTask `json:"tasks"`
}

// SubmitResult is what Apply returns for CmdSubmitTask.
type SubmitResult struct {
	Task    *Task
	Created bool // false: the same task existed
}

// CancelTask is the body of CmdCancelTask.
type CancelTask struct {
	Key string    `json:"key"`
	Now time.Time `json:"now"`
}

// CancelResult is what Apply returns for CmdCancelTask.
type CancelResult struct {
	Task *Task
	// Cancelled deliveries of a fired task none of whose messages had been
	// attempted yet.
	Cancelled int
}

// TaskDifference is one field in which a submitted task differs from the
// stored one.
type TaskDifference struct {
	Field     string `json:"field"`
	Existing  string `json:"existing"`
	Submitted string `json:"submitted"`
}

// TaskConflictError answers a submit whose key exists with another body.
type TaskConflictError struct {
	Key         string
	Differences []TaskDifference
}

func (e *TaskConflictError) Error() string {
	fields := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		fields[i] = d.Field
	}
	return fmt.Sprintf("task %q exists with a different %s", e.Key, strings.Join(fields, ", "))
}

// Is makes errors.Is(err, ErrTaskConflict) true.
func (e *TaskConflictError) Is(target error) bool { return target == ErrTaskConflict }

// TaskFiredError answers a cancel that came too late.
type TaskFiredError struct {
	Task *Task
	// States counts the run's deliveries by state ("sent": 2, ...).
	States map[string]int
}

func (e *TaskFiredError) Error() string {
	keys := make([]string, 0, len(e.States))
	for k := range e.States {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", e.States[k], k)
	}
	what := "nothing planned yet"
	if len(parts) > 0 {
		what = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("task %q fired at %s (run %s) and cannot be cancelled: deliveries %s",
		e.Task.Key, e.Task.FiredAt.Format(time.RFC3339), TaskRunKey(e.Task.Key), what)
}

// Is makes errors.Is(err, ErrTaskFired) true.
func (e *TaskFiredError) Is(target error) bool { return target == ErrTaskFired }

// differences lists how c differs from the stored t.
func (t *Task) differences(c SubmitTask) []TaskDifference {
	var out []TaskDifference
	if t.Rule != c.Rule {
		out = append(out, TaskDifference{"rule", t.Rule, c.Rule})
	}
	if !t.DueAt.Equal(c.DueAt) {
		out = append(out, TaskDifference{"due_at", t.DueAt.Format(time.RFC3339Nano), c.DueAt.Format(time.RFC3339Nano)})
	}
	if !bytes.Equal(t.Data, c.Data) {
		out = append(out, TaskDifference{"data", string(t.Data), string(c.Data)})
	}
	return out
}

func (a applier) submitTask(c SubmitTask) any {
	if c.Key == "" || c.Rule == "" || c.DueAt.IsZero() {
		return errors.New("submit task: key, rule and due_at are required")
	}
	if old, ok := a.st.Tasks.Get(c.Key); ok {
		if diff := old.differences(c); len(diff) > 0 {
			return &TaskConflictError{Key: c.Key, Differences: diff}
		}
		return SubmitResult{Task: old}
	}
	if at, ok := a.st.Ledger.Get(TaskRunKey(c.Key)); ok {
		return fmt.Errorf("%w: task %q fired for %s and was pruned since; choose a new key", ErrTaskKeyUsed, c.Key, at.Format(time.RFC3339))
	}
	if _, ok := a.st.Runs.Get(TaskRunKey(c.Key)); ok {
		// A run of this key without a task record (older logs): the task
		// could never fire.
		return fmt.Errorf("%w: run %s exists; choose a new key", ErrTaskKeyUsed, TaskRunKey(c.Key))
	}
	t := &Task{Key: c.Key, Rule: nameOf(c.Rule), DueAt: c.DueAt, Data: c.Data, State: TaskPending, SubmittedAt: c.Now}
	a.st.putTask(t)
	a.signalTasks()
	return SubmitResult{Task: t, Created: true}
}

// submitTasks answers, per task and in order, what submitTask would: a
// SubmitResult, or the error that refused it (a refused task does not
// stop the others).
func (a applier) submitTasks(c SubmitTasks) any {
	out := make([]any, len(c.Tasks))
	for i, t := range c.Tasks {
		out[i] = a.submitTask(t)
	}
	return out
}

func (a applier) cancelTask(c CancelTask) any {
	t, ok := a.st.Tasks.Get(c.Key)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoTask, c.Key)
	}
	switch t.State {
	case TaskCancelled:
		return CancelResult{Task: t}
	case TaskFired:
		// Cancellable still if nothing of it was attempted: every delivery
		// pending and never tried.
		states := map[string]int{}
		ids := a.st.byRun[TaskRunKey(t.Key)]
		attempted := false
		for _, id := range ids {
			d := a.st.Deliveries.At(id)
			if d.Digest != "" {
				states["in digest"]++ // its message is already folded into another
				attempted = true
				continue
			}
			states[d.State.String()]++
			attempted = attempted || d.State != StatePending || d.Attempts > 0 || d.Claim != nil
		}
		if attempted {
			return &TaskFiredError{Task: t, States: states}
		}
		for _, id := range ids {
			nd := *a.st.Deliveries.At(id)
			nd.State, nd.EndedAt, nd.LastError = StateCancelled, c.Now, "task cancelled"
			a.st.putDelivery(&nd)
			a.count(&nd)
		}
		nt := *t
		nt.State, nt.CancelledAt = TaskCancelled, c.Now
		a.st.putTask(&nt)
		return CancelResult{Task: &nt, Cancelled: len(ids)}
	}
	nt := *t
	nt.State, nt.CancelledAt = TaskCancelled, c.Now
	a.st.putTask(&nt)
	a.signalTasks()
	return CancelResult{Task: &nt}
}

// fireTask marks the task of a starting run fired, or says why it cannot.
func (a applier) fireTask(c StartRun) error {
	t, ok := a.st.Tasks.Get(c.TaskKey)
	if !ok {
		if c.Rule == "" {
			return fmt.Errorf("%w: %q", ErrNoTask, c.TaskKey)
		}
		return nil // a run for a task key without a task record (older logs)
	}
	if t.State != TaskPending {
		return fmt.Errorf("start run: task %q is %s", t.Key, t.State)
	}
	nt := *t
	nt.State, nt.FiredAt = TaskFired, c.Now
	a.st.putTask(&nt)
	return nil
}

// Task returns the task with key, if any.
func (f *FSM) Task(key string) (*Task, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.Tasks.Get(key)
	return t, ok
}

// DueTasks returns up to limit pending tasks due at now, earliest first.
// It walks the due queue, so its cost is in what is due, not in what waits.
func (f *FSM) DueTasks(now time.Time, limit int) []*Task {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Task
	f.st.taskQueue.Ascend(func(it dueItem) bool {
		if it.after(now) || len(out) >= limit {
			return false
		}
		out = append(out, f.st.Tasks.At(it.id))
		return true
	})
	return out
}

// NextTaskDue returns the due time of the earliest pending task.
func (f *FSM) NextTaskDue() (time.Time, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	it, ok := f.st.taskQueue.Min()
	return it.time(), ok
}

// TaskFilter selects tasks for ListTasks. Zero fields match everything.
type TaskFilter struct {
	Rule     string
	State    TaskState
	From, To time.Time // due_at in [From, To)
	// After continues a listing: tasks after this (due_at, key) position.
	AfterDue time.Time
	AfterKey string
	Limit    int
}

// ListTasks returns the tasks matching f, by due time then key, and
// whether more follow.
func (f *FSM) ListTasks(flt TaskFilter) ([]*Task, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var start *dueItem
	switch {
	case !flt.AfterDue.IsZero() || flt.AfterKey != "":
		start = new(newDue(flt.AfterDue, flt.AfterKey+"\x00"))
	case !flt.From.IsZero():
		start = new(newDue(flt.From, ""))
	}
	tasks := f.st.tasksFrom(start)
	switch flt.State {
	case TaskPending:
		tasks = f.st.tasksOf(dueFrom(f.st.taskQueue, start))
	case TaskFired, TaskCancelled:
		tasks = f.st.tasksOf(dueFrom(f.st.taskDone, start))
	}
	var out []*Task
	more := false
	for t := range tasks {
		if !flt.To.IsZero() && !t.DueAt.Before(flt.To) {
			break
		}
		if (!flt.From.IsZero() && t.DueAt.Before(flt.From)) ||
			(flt.Rule != "" && t.Rule != flt.Rule) || (flt.State != 0 && t.State != flt.State) {
			continue
		}
		if flt.Limit > 0 && len(out) >= flt.Limit {
			more = true
			break
		}
		out = append(out, t)
	}
	return out, more
}
