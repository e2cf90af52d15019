package rules

import (
	"context"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// task.cancel, task.replace and task.pending: what on_event adds to
// task.submit. An event hook runs at least once (a leader can die after
// it ran and before the event was marked handled), so each call must be
// one that a second run repeats harmlessly: cancelling a cancelled task,
// replacing with the same values, submitting the same key and body.
//
//	on_event = function(ev)
//	  local key = "enquiry-" .. ev.data.external_userid
//	  if ev.data.origin == 3 then
//	    if not task.replace { key = key, after = "15m" } then
//	      task.submit { key = key, rule = "enquiry_timeout", after = "15m", data = {…} }
//	    end
//	  else
//	    task.cancel(key)
//	  end
//	end
//
// In on_event, after (and ["in"]) count from the event's time (ev.at),
// which every run of the hook sees the same.

const (
	fnTaskCancel   = "task.cancel"
	fnTaskReplace  = "task.replace"
	fnTaskPending  = "task.pending"
	errOnlyEvent   = "is only available in on_event"
	maxPendingList = 100
)

// eventOps reports the task operations of the on_event call in progress.
func (sb *sandbox) eventOps(L *lua.LState, fn string) *engine.TaskOps {
	if sb.run == nil || sb.run.submit == nil || sb.run.submit.ops == nil {
		L.RaiseError("%s %s", fn, errOnlyEvent)
	}
	return sb.run.submit.ops
}

func luaCtx(L *lua.LState) context.Context {
	if ctx := L.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// taskCancel: task.cancel(key) → true, or nil and the reason (no such
// task; fired and already sent).
func (sb *sandbox) taskCancel(L *lua.LState) int {
	ops := sb.eventOps(L, fnTaskCancel)
	key := L.CheckString(1)
	if bad := checkTaskKey(key); bad != "" {
		sb.errorf(fnTaskCancel, "%s", bad)
	}
	if _, err := ops.Cancel(luaCtx(L), key); err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(fnTaskCancel + ": " + err.Error()))
		return 2
	}
	L.Push(lua.LTrue)
	return 1
}

// taskReplace: task.replace{key, due_at or after, data} → true, or nil
// and the reason (no such task; it fired or was cancelled).
func (sb *sandbox) taskReplace(L *lua.LState) int {
	ops := sb.eventOps(L, fnTaskReplace)
	args := sb.filled(L.CheckTable(1))
	key, _ := args.RawGetString(fieldTaskKey).(lua.LString)
	if bad := checkTaskKey(string(key)); bad != "" {
		sb.errorf(fnTaskReplace, "%s", bad)
	}
	// The same checks as task.submit, with the rule of the task itself.
	probe := sb.L.NewTable()
	eachPair(args, func(k, v lua.LValue) bool {
		probe.RawSet(k, v)
		return true
	})
	probe.RawSetString(fieldTaskRule, lua.LString("-"))
	hasDue := args.RawGetString(fieldTaskDueAt) != lua.LNil || args.RawGetString(fieldTaskAfter) != lua.LNil || args.RawGetString(fieldTaskIn) != lua.LNil
	if !hasDue {
		probe.RawSetString(fieldTaskAfter, lua.LNumber(0))
	}
	noRule := &submitter{ruleProblem: func(string) string { return "" }}
	t, bad := sb.taskArgs(probe, noRule)
	if bad != "" {
		sb.errorf(fnTaskReplace, "%s", bad)
	}
	c := engine.ReplaceTask{Key: string(key), Data: t.Data}
	if hasDue {
		c.DueAt = t.DueAt
	}
	if _, err := ops.Replace(luaCtx(L), c); err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(fnTaskReplace + ": " + err.Error()))
		return 2
	}
	L.Push(lua.LTrue)
	return 1
}

// taskPending: task.pending(prefix) → a list of {key, rule, due_at, data}
// of the pending tasks whose key starts with prefix (at most 100, by due
// time): how a hook finds the timer it started for a customer.
func (sb *sandbox) taskPending(L *lua.LState) int {
	ops := sb.eventOps(L, fnTaskPending)
	prefix := L.CheckString(1)
	out := L.CreateTable(0, 0)
	for i, t := range ops.Pending(prefix, maxPendingList) {
		e := L.CreateTable(0, 4)
		e.RawSetString("key", lua.LString(t.Key))
		e.RawSetString("rule", lua.LString(t.Rule))
		e.RawSetString("due_at", lua.LString(t.DueAt.In(sb.run.zone).Format(time.RFC3339)))
		e.RawSetString("data", sb.jsonTable(t.Data))
		out.RawSetInt(i+1, e)
	}
	L.Push(out)
	return 1
}
