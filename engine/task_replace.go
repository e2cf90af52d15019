package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"encoding/json"
)

// ErrTaskNotPending answers a replace of a task that fired or was cancelled.
var ErrTaskNotPending = errors.New("task is no longer pending")

// ReplaceTask (CmdReplaceTask) moves a pending task: a new due time, new
// data, or both. A zero DueAt keeps the due time; absent (null) Data keeps
// the data ({} clears it). The same values again change nothing, so a
// hook that runs twice replaces once.
type ReplaceTask struct {
	Key   string          `json:"key"`
	DueAt time.Time       `json:"due_at,omitzero"`
	Data  json.RawMessage `json:"data"`
	Now   time.Time       `json:"now"`
}

// ReplaceResult is what Apply returns for CmdReplaceTask.
type ReplaceResult struct {
	Task    *Task
	Changed bool
}

func (a applier) replaceTask(c ReplaceTask) any {
	a.stamp(c.Now)
	t, ok := a.st.Tasks.Get(c.Key)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoTask, c.Key)
	}
	if t.State != TaskPending {
		at := t.FiredAt
		if t.State == TaskCancelled {
			at = t.CancelledAt
		}
		return fmt.Errorf("%w: task %q is %s (since %s); submit a new key", ErrTaskNotPending, c.Key, t.State, at.Format(time.RFC3339))
	}
	nt := *t
	if !c.DueAt.IsZero() {
		nt.DueAt = c.DueAt
	}
	if c.Data != nil && !bytes.Equal(bytes.TrimSpace(c.Data), []byte("null")) {
		nt.Data = c.Data
	}
	if nt.DueAt.Equal(t.DueAt) && bytes.Equal(nt.Data, t.Data) {
		return ReplaceResult{Task: t}
	}
	a.st.putTask(&nt)
	a.signalTasks()
	return ReplaceResult{Task: &nt, Changed: true}
}

// PendingTasks returns the pending tasks whose key starts with prefix, by
// key, at most limit. It walks the pending queue: its cost is in what
// waits.
func (f *FSM) PendingTasks(prefix string, limit int) []*Task {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Task
	f.st.taskQueue.Ascend(func(it dueItem) bool {
		if strings.HasPrefix(it.id, prefix) {
			out = append(out, f.st.Tasks.At(it.id))
		}
		return len(out) < limit
	})
	return out
}
