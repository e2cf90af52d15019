package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// OnEvent runs the rule's on_event(ev) hook, where ev is {id, type, at,
// data}; inside it task.submit, task.cancel, task.replace and
// task.pending act through ops. A rule without the hook (or no longer
// loaded) returns nil.
func (s *Set) OnEvent(ctx context.Context, rule string, ev engine.EventContext, ops engine.TaskOps) error {
	v := s.cur.Load()
	c, ok := v.rules[rule]
	if !ok || !c.hasOnEvent {
		return nil
	}
	sub := &submitter{fn: ops.Submit, ops: &ops, ruleProblem: func(name string) string {
		switch r, ok := v.rules[name]; {
		case !ok:
			return fmt.Sprintf("rule %q is not loaded", name)
		case r.rule.Schedule != "":
			return fmt.Sprintf("rule %q has a schedule: tasks fire only rules without one", name)
		}
		return ""
	}}
	return s.withSandbox(ctx, v, c.rule.Name, func(sb *sandbox) error {
		defer func() { sb.run = nil }()
		// The event's time is the "slot" that after counts from.
		rt, _, err := sb.begin(ctx, c, engine.RunContext{Rule: rule, Key: "event:" + ev.ID, Slot: ev.At}, s.cfg.CallTimeout)
		if err != nil {
			return err
		}
		sb.run.submit = sub
		L := sb.L
		e := L.CreateTable(0, 4)
		e.RawSetString("id", lua.LString(ev.ID))
		e.RawSetString("type", lua.LString(ev.Type))
		e.RawSetString("at", lua.LString(ev.At.In(sb.run.zone).Format(time.RFC3339)))
		e.RawSetString("data", sb.jsonTable(ev.Data))
		_, err = sb.call(ctx, s.cfg.CallTimeout, c.file, rt.RawGetString(keyOnEvent), 0, e)
		return err
	})
}

// jsonTable is a JSON object as a Lua table (an empty one for none or
// for what does not decode: event data was checked when recorded).
func (sb *sandbox) jsonTable(raw json.RawMessage) lua.LValue {
	if len(bytes.TrimSpace(raw)) == 0 || len(raw) > maxStringLen {
		return sb.L.NewTable()
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var d any
	if err := dec.Decode(&d); err != nil {
		return sb.L.NewTable()
	}
	v, err := sb.protect(func() lua.LValue { return sb.fromGo(d, 0) })
	if err != nil {
		return sb.L.NewTable()
	}
	return v
}
