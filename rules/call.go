package rules

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// call runs fn with args under timeout and the memory limit and returns
// nret results. Its memory is measured from the last collection (see
// memWatch.begin). Lua code is interrupted between instructions when the
// time is up or the memory watch stops the call (L.SetContext); the state
// is then marked broken so that it is never reused.
func (sb *sandbox) call(ctx context.Context, timeout time.Duration, file string, fn lua.LValue, nret int, args ...lua.LValue) ([]lua.LValue, error) {
	return sb.callFrom(ctx, false, timeout, file, fn, nret, args...)
}

// callFrom is call with, when fresh, a collection first (before the time
// limit starts), so that the memory base is the live heap as the call
// begins: a file's top level checked at load is then measured exactly,
// where the last collection's live heap may hold a previous load's
// tables, garbage now, and forgive as much growth. Only compileFile asks
// for it, once per changed file: a collection per run would cost every
// run a full mark of the heap.
func (sb *sandbox) callFrom(ctx context.Context, fresh bool, timeout time.Duration, file string, fn lua.LValue, nret int, args ...lua.LValue) ([]lua.LValue, error) {
	if fresh {
		runtime.GC()
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if dl, ok := cctx.Deadline(); ok {
		sb.deadline.Store(dl.UnixNano())
	}
	defer sb.deadline.Store(0)
	limit := sb.env.memoryLimit
	if limit == 0 {
		limit = DefaultMemoryLimit
	}
	mctx, end := watch.begin(cctx, limit)
	defer end()
	L := sb.L
	L.SetContext(mctx)
	defer L.RemoveContext()
	top := L.GetTop()
	err := L.CallByParam(lua.P{Fn: fn, NRet: nret, Protect: true}, args...)
	if err != nil {
		L.SetTop(top)
		var me *MemoryError
		if errors.As(context.Cause(mctx), &me) {
			sb.broken = true
			re := runtimeError(file, err)
			re.Err, re.Msg = ErrMemory, "stopped: "+me.Error()
			return nil, re
		}
		if cerr := cctx.Err(); cerr != nil {
			sb.broken = true
			re := runtimeError(file, err)
			re.Err = ErrTimeout
			if errors.Is(cerr, context.DeadlineExceeded) && ctx.Err() == nil {
				re.Msg = fmt.Sprintf("stopped after %s: a rule function may run at most that long", timeout)
			} else {
				re.Msg = "stopped: " + context.Cause(ctx).Error()
			}
			return nil, re
		}
		return nil, runtimeError(file, err)
	}
	if me := callMemory(mctx).settle(); me != nil { // its results still on the stack: live
		L.SetTop(top)
		sb.broken = true
		return nil, &RuleError{File: file, Err: ErrMemory, Msg: "stopped as it returned: " + me.Error()}
	}
	out := make([]lua.LValue, nret)
	for i := range nret {
		out[i] = L.Get(top + 1 + i)
	}
	L.SetTop(top)
	return out, nil
}
