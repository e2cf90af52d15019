package rules

import (
	"context"
	"errors"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// The `task` module: task.submit{...} schedules an API task from a rule's
// on_failed hook, the compensation that a rule decides itself (ask the
// manager when the owner's reminder could not be delivered):
//
//	local ok, err = task.submit {
//	  key   = "follow-undelivered-" .. d.id, -- deterministic: on_failed runs at least once
//	  rule  = "follow_up",
//	  after = "10m",                         -- from the run's slot; or due_at = "RFC 3339"
//	  data  = { owner = run.data.owner, undelivered = true },
//	}
//
// It returns true once the task is replicated (or was already there with
// the same body), else nil and the reason. Bad arguments raise an error.
//
// Only on_failed may call it: recipients and message are evaluated again by
// every leader and by preview, and must not change anything. on_failed
// itself runs at least once (a leader can die after the hook ran and before
// it recorded so), which is why the key must be built from what the hook is
// given (the delivery's id, the run's key), never from a counter or the
// clock: the engine answers the same key and body with the task it already
// has, so a second run of the hook adds nothing.

const (
	fnTaskSubmit   = "task.submit"
	errOnlyFailed  = "task.submit is only available in on_failed and on_event"
	fieldTaskKey   = "key"
	fieldTaskRule  = "rule"
	fieldTaskDueAt = "due_at"
	fieldTaskAfter = "after"
	fieldTaskIn    = "in" // an alias of after, as in `herald task submit --in`; a Lua keyword, so written ["in"]
	fieldTaskData  = "data"
)

// submitter is what task.submit needs during one on_failed call.
type submitter struct {
	fn engine.SubmitFunc // nil: the caller gave none (preview, a test)
	// ops are on_event's other task operations; nil in on_failed.
	ops *engine.TaskOps
	// ruleProblem says why a task may not fire the named rule, or "".
	ruleProblem func(rule string) string
}

func (sb *sandbox) openTask() {
	sb.register("task", map[string]lua.LGFunction{"submit": sb.taskSubmit,
		"cancel": sb.taskCancel, "replace": sb.taskReplace, "pending": sb.taskPending})
}

func (sb *sandbox) taskSubmit(L *lua.LState) int {
	if sb.run == nil || sb.run.submit == nil {
		L.RaiseError(errOnlyFailed)
	}
	sub := sb.run.submit
	t, err := sb.taskArgs(sb.filled(L.CheckTable(1)), sub)
	if err != "" {
		sb.errorf(fnTaskSubmit, "%s", err)
	}
	if sub.fn == nil {
		L.Push(lua.LNil)
		L.Push(lua.LString("task.submit: no task submitter here (only a leader's on_failed can submit tasks)"))
		return 2
	}
	ctx := L.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if _, e := sub.fn(ctx, t); e != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(fnTaskSubmit + ": " + e.Error()))
		return 2
	}
	L.Push(lua.LTrue)
	return 1
}

// taskArgs reads and checks task.submit's table; the error is "" when it
// is good.
func (sb *sandbox) taskArgs(args *lua.LTable, sub *submitter) (engine.SubmitTask, string) {
	var t engine.SubmitTask
	var bad string
	eachPair(args, func(k, _ lua.LValue) bool {
		switch ks, _ := k.(lua.LString); string(ks) {
		case fieldTaskKey, fieldTaskRule, fieldTaskDueAt, fieldTaskAfter, fieldTaskIn, fieldTaskData:
			return true
		}
		bad = fmt.Sprintf("unknown field %s; want key, rule, due_at or after, and data", k.String())
		return false
	})
	if bad != "" {
		return t, bad
	}
	str := func(field string) (string, string) {
		switch v := args.RawGetString(field).(type) {
		case *lua.LNilType:
			return "", ""
		case lua.LString:
			return string(v), ""
		default:
			return "", fmt.Sprintf("%s: want a string, got %s", field, v.Type())
		}
	}
	if t.Key, bad = str(fieldTaskKey); bad != "" {
		return t, bad
	}
	if bad = checkTaskKey(t.Key); bad != "" {
		return t, bad
	}
	if t.Rule, bad = str(fieldTaskRule); bad != "" {
		return t, bad
	}
	if t.Rule == "" {
		return t, "rule is required: the name of the rule the task fires"
	}
	if bad = sub.ruleProblem(t.Rule); bad != "" {
		return t, bad
	}
	if t.DueAt, bad = sb.taskDue(args); bad != "" {
		return t, bad
	}
	if v := args.RawGetString(fieldTaskData); v != lua.LNil {
		tbl, ok := v.(*lua.LTable)
		if !ok {
			return t, fmt.Sprintf("data: want a table, got %s", v.Type())
		}
		g, err := sb.toGo(tbl, maxPayload)
		if err != nil {
			return t, "data: " + err.Error()
		}
		if _, ok := g.(map[string]any); !ok {
			return t, "data: want a table with named fields (rules read it as run.data), not a list"
		}
		b, err := encodeJSON(g)
		if err != nil {
			return t, "data: " + err.Error()
		}
		if len(b) > maxPayload {
			return t, fmt.Sprintf("data is %d bytes of JSON, over the %d byte limit", len(b), maxPayload)
		}
		t.Data = b
	}
	return t, ""
}

// taskDue reads due_at (an RFC 3339 string or a time) or after (a
// duration counted from the run's slot, so that every leader computes the
// same due time).
func (sb *sandbox) taskDue(args *lua.LTable) (time.Time, string) {
	due, after, in := args.RawGetString(fieldTaskDueAt), args.RawGetString(fieldTaskAfter), args.RawGetString(fieldTaskIn)
	if after != lua.LNil && in != lua.LNil {
		return time.Time{}, `give after or ["in"], not both`
	}
	if in != lua.LNil {
		after = in
	}
	slot := sb.run.slot
	var at time.Time
	switch {
	case (due == lua.LNil) == (after == lua.LNil):
		return time.Time{}, `give exactly one of due_at (RFC 3339, like "2026-12-01T15:00:00+08:00") and after (a duration from the run's slot, like "10m")`
	case due != lua.LNil:
		switch v := due.(type) {
		case lua.LString:
			t, err := time.Parse(time.RFC3339, string(v))
			if err != nil {
				return time.Time{}, fmt.Sprintf("due_at %q: want RFC 3339 with offset, like 2026-12-01T15:00:00+08:00", string(v))
			}
			at = t
		case *lua.LUserData:
			t, ok := v.Value.(time.Time)
			if !ok {
				return time.Time{}, "due_at: want a time or an RFC 3339 string"
			}
			at = t
		default:
			return time.Time{}, fmt.Sprintf("due_at: want a time or an RFC 3339 string, got %s", due.Type())
		}
	default:
		var d time.Duration
		switch v := after.(type) {
		case lua.LString:
			var err error
			if d, err = time.ParseDuration(string(v)); err != nil {
				return time.Time{}, fmt.Sprintf("after %q: want a duration like \"10m\" or \"2h30m\"", string(v))
			}
		case lua.LNumber:
			var ok bool
			if d, ok = secondsDuration(float64(v)); !ok {
				return time.Time{}, fmt.Sprintf("after %g seconds: out of range", float64(v))
			}
		default:
			return time.Time{}, fmt.Sprintf("after: want a duration like \"10m\" or seconds, got %s", after.Type())
		}
		if d < 0 {
			return time.Time{}, fmt.Sprintf("after %s: must not be negative", d)
		}
		at = slot.Add(d)
	}
	if at.Sub(slot) > engine.MaxTaskAhead {
		return time.Time{}, "due more than ten years after the run's slot"
	}
	return at, ""
}

// checkTaskKey applies engine.CheckTaskKey, the HTTP API's rule for task
// keys, so that a hook cannot make a task the API cannot read or cancel.
// A missing key gets advice for a hook: on_failed runs at least once.
func checkTaskKey(k string) string {
	switch err := engine.CheckTaskKey(k); {
	case errors.Is(err, engine.ErrTaskKeyMissing):
		return "key is required: build it from the failed delivery (d.id) so that a second run of on_failed finds the same task"
	case err != nil:
		return err.Error()
	}
	return ""
}
