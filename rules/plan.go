package rules

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// Plan evaluates a rule for one run: recipients(run), then message(run, to)
// for each recipient, in the order recipients returned them (a userid
// returned twice is planned once; a message of nil skips that recipient).
// An error fails this run only.
func (s *Set) Plan(ctx context.Context, rule string, run engine.RunContext) ([]engine.Planned, error) {
	v := s.cur.Load()
	c, ok := v.rules[rule]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	people, err := s.peopleFor(v, run.DirectoryHash)
	if err != nil {
		return nil, err
	}
	var out []engine.Planned
	err = s.withSandbox(ctx, v, rule, func(sb *sandbox) error {
		sb.nextPeople = people
		defer func() { sb.nextPeople = nil }()
		msgs, err := sb.plan(ctx, c, run, s.cfg.CallTimeout)
		if len(msgs) > 0 {
			out = make([]engine.Planned, 0, len(msgs))
		}
		for _, m := range msgs {
			out = append(out, engine.Planned{Recipient: m.userid, Payload: m.payload, Zone: m.zone, Quiet: m.quiet})
		}
		return err
	})
	if err != nil {
		return nil, s.atLimit(ctx, v, err)
	}
	return out, nil
}

// atLimit is err as an *engine.LimitError when the call was stopped at one
// of the set's limits: the run was too big for them, and the planner's
// alert says which and what to change. Stopped by its caller's context
// (the planner's own time limit), it is left as it is: the caller names
// its limit.
func (s *Set) atLimit(ctx context.Context, v *version, err error) error {
	switch {
	case errors.Is(err, ErrMemory):
		// The node setting cmd/herald reads into MemoryLimit.
		return &engine.LimitError{Limit: "rule memory limit", Value: FormatSize(v.env.memoryLimit), Setting: "rule_memory_limit", Err: err}
	case errors.Is(err, ErrTimeout) && ctx.Err() == nil:
		// The node setting cmd/herald reads into CallTimeout.
		return &engine.LimitError{Limit: "rule time limit", Value: s.cfg.CallTimeout.String(), Setting: "rule_timeout", Err: err}
	}
	return err
}

// OnFailed runs the rule's on_failed(run, delivery) hook, where delivery
// is {id, recipient, state, attempts, error}. A rule without the hook (or
// no longer loaded) returns nil. The hook may call task.submit, which
// submits through submit (nil: task.submit fails).
func (s *Set) OnFailed(ctx context.Context, rule string, run engine.RunContext, failed engine.FailedDelivery, submit engine.SubmitFunc) error {
	v := s.cur.Load()
	c, ok := v.rules[rule]
	if !ok || !c.hasOnFailed {
		return nil
	}
	sub := &submitter{fn: submit, ruleProblem: func(name string) string {
		switch r, ok := v.rules[name]; {
		case !ok:
			return fmt.Sprintf("rule %q is not loaded", name)
		case r.rule.Schedule != "":
			// Its task would run under its own key beside the rule's slot:
			// the same message twice.
			return fmt.Sprintf("rule %q has a schedule: tasks fire only rules without one", name)
		}
		return ""
	}}
	return s.withSandbox(ctx, v, rule, func(sb *sandbox) error {
		defer func() { sb.run = nil }()
		rt, runTbl, err := sb.begin(ctx, c, run, s.cfg.CallTimeout)
		if err != nil {
			return err
		}
		sb.run.submit = sub // after the file's top level: only the hook itself may submit
		d := sb.L.CreateTable(0, 5)
		d.RawSetString("id", lua.LString(failed.ID))
		d.RawSetString("recipient", lua.LString(failed.Recipient))
		d.RawSetString("state", lua.LString(failed.State.String()))
		d.RawSetString("attempts", lua.LNumber(failed.Attempts))
		d.RawSetString("error", lua.LString(failed.Error))
		_, err = sb.call(ctx, s.cfg.CallTimeout, c.file, rt.RawGetString(keyOnFailed), 0, runTbl, d)
		return err
	})
}

// stuckGrace is how long past a call's deadline the watchdog waits for a
// state stuck inside a Go function (where Lua's interrupt cannot reach)
// before it gives up on it.
func (s *Set) stuckGrace() time.Duration { return max(s.cfg.CallTimeout, 500*time.Millisecond) }

// withSandbox runs f with a pooled state of v on its own goroutine. Lua
// code is interrupted at its deadline by the state's context; the
// watchdog here covers the rest (a pattern match that backtracks for
// minutes, people.where over a million people): the caller gets an
// error, and the state is abandoned, never returned to the pool. who
// names the rule (or the file, at load) for the log and the error.
func (s *Set) withSandbox(ctx context.Context, v *version, who string, f func(*sandbox) error) error {
	sb := v.pool.get()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil { // a bug in a helper must not take the node down
				sb.broken = true
				done <- fmt.Errorf("%w: rule panicked: %v", ErrRule, p)
			}
		}()
		done <- f(sb)
	}()
	grace := s.stuckGrace()
	timer := time.NewTimer(s.cfg.CallTimeout + grace)
	defer timer.Stop()
	for {
		select {
		case err := <-done:
			v.pool.put(sb)
			return err
		case now := <-timer.C:
			dl := sb.deadline.Load()
			if dl != 0 && now.UnixNano() > dl+int64(grace) {
				s.cfg.Logger.Error("rules: a rule call is stuck in a library function past the rule time limit; its state is abandoned",
					"rule", who, "limit", s.cfg.CallTimeout)
				return fmt.Errorf("%w: a call of rule %s is stuck in a library function past the rule time limit of %s", ErrTimeout, who, s.cfg.CallTimeout)
			}
			wait := grace
			if dl != 0 {
				wait = time.Duration(dl + int64(grace) - now.UnixNano())
			}
			timer.Reset(max(wait, 10*time.Millisecond))
		}
	}
}

// message is one recipient's planned payload.
type message struct {
	userid  string
	name    string
	payload json.RawMessage
	zone    string            // the recipient's zone for this rule
	quiet   engine.QuietHours // the recipient's quiet window for this rule
}

// begin sets the run up in sb: the run state library functions read, a
// fresh rule table (fresh closures and globals: nothing leaks from one run
// to the next), and the `run` table.
func (sb *sandbox) begin(ctx context.Context, c *compiled, run engine.RunContext, timeout time.Duration) (*lua.LTable, *lua.LTable, error) {
	zone := run.Zone
	if zone == "" {
		zone = c.rule.Timezone
	}
	if zone == "" {
		zone = "UTC"
	}
	loc, err := loadZone(zone)
	if err != nil {
		return nil, nil, &RuleError{File: c.file, Msg: fmt.Sprintf("run zone %q: %v", zone, err)}
	}
	slot := run.Slot.In(loc)
	sb.run = &runState{rule: c.rule.Name, file: c.file, calendar: c.rule.Calendar, zone: loc, slot: slot, people: sb.nextPeople}
	val, err := sb.evalFile(ctx, c.proto, timeout, false)
	if err != nil {
		return nil, nil, err
	}
	rt, ok := val.(*lua.LTable)
	if !ok {
		return nil, nil, &RuleError{File: c.file, Msg: "the file no longer returns a rule table"}
	}
	L := sb.L
	runTbl := L.CreateTable(0, 6)
	runTbl.RawSetString("rule", lua.LString(c.rule.Name))
	runTbl.RawSetString("key", lua.LString(run.Key))
	runTbl.RawSetString("slot", lua.LString(slot.Format(time.RFC3339)))
	runTbl.RawSetString("date", lua.LString(slot.Format(time.DateOnly)))
	runTbl.RawSetString("zone", lua.LString(zone))
	data := lua.LValue(L.NewTable())
	if len(bytes.TrimSpace(run.Data)) > 0 && !bytes.Equal(bytes.TrimSpace(run.Data), []byte("null")) {
		if len(run.Data) > maxStringLen {
			return nil, nil, &RuleError{File: c.file, Msg: fmt.Sprintf("run data of %d bytes is over the %d byte limit", len(run.Data), maxStringLen)}
		}
		var d any
		if err := json.Unmarshal(run.Data, &d); err != nil {
			return nil, nil, &RuleError{File: c.file, Msg: fmt.Sprintf("run data is not JSON: %v", err)}
		}
		if data, err = sb.protect(func() lua.LValue { return sb.fromGo(d, 0) }); err != nil {
			return nil, nil, &RuleError{File: c.file, Msg: "run data: " + err.Error()}
		}
	}
	runTbl.RawSetString("data", data)
	return rt, runTbl, nil
}

// protect runs a Go helper that may raise a Lua error outside a Lua call.
func (sb *sandbox) protect(f func() lua.LValue) (v lua.LValue, err error) {
	defer func() {
		if p := recover(); p != nil {
			if ae, ok := p.(*lua.ApiError); ok {
				err = fmt.Errorf("%s", ae.Object.String())
				return
			}
			err = fmt.Errorf("%v", p)
		}
	}()
	return f(), nil
}

// plan runs recipients and message for one run.
func (sb *sandbox) plan(ctx context.Context, c *compiled, run engine.RunContext, timeout time.Duration) ([]message, error) {
	defer func() { sb.run = nil }()
	rt, runTbl, err := sb.begin(ctx, c, run, timeout)
	if err != nil {
		return nil, err
	}
	out, err := sb.call(ctx, timeout, c.file, rt.RawGetString(keyRecipients), 1, runTbl)
	if err != nil {
		return nil, err
	}
	recips, err := sb.readRecipients(c, out[0])
	if err != nil {
		return nil, err
	}
	msgFn := rt.RawGetString(keyMessage)
	msgs := make([]message, 0, len(recips))
	runZone := zoneName(cmp.Or(run.Zone, c.rule.Timezone))
	// A zone's run is for the people of its zone. Read from the run's key,
	// not from the rule as it is now: a run started before its rule was
	// edited to one zone for everybody (or the other way) keeps the shape
	// it was started with, so nobody gets the day twice or not at all.
	zoneRun := run.Zone != "" && run.Key == engine.ZoneRunKey(c.rule.Name, run.Zone, run.Slot)
	for i, r := range recips {
		// Ours is the last reference to a recipient's table once its
		// message is built (unless the rule kept one): dropping it lets the
		// collector free the people already planned while the rest are
		// planned, so a run holds its people or its messages, not both.
		recips[i].to = nil
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		zone := c.personZone(sb.env.people, r.userid)
		if zoneRun && zone != runZone {
			continue // this run is for the people of another zone
		}
		if r.to == nil {
			r.to = sb.recipientTable(r)
		}
		sb.filled(r.to) // in full for message, and ours alone to drop after
		missed := sb.L.CreateTable(len(run.Missed[r.userid]), 0)
		for _, m := range run.Missed[r.userid] {
			missed.Append(lua.LString(m))
		}
		r.to.RawSetString(fieldMissed, missed)
		out, err := sb.call(ctx, timeout, c.file, msgFn, 1, runTbl, r.to)
		if err != nil {
			var re *RuleError
			if errors.As(err, &re) {
				re.Msg = fmt.Sprintf("message for %q: %s", r.userid, re.Msg) // whose data to look at
			}
			return nil, err
		}
		if out[0] == lua.LNil {
			continue
		}
		payload, err := sb.payloadJSON(out[0])
		if err != nil {
			return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("message for %s: %v", r.userid, err)}
		}
		msgs = append(msgs, message{userid: r.userid, name: luaString(r.to.RawGetString(fieldName)), payload: payload,
			zone: zone, quiet: c.personQuiet(sb.env.people, r.userid)})
	}
	return msgs, nil
}

type recipient struct {
	userid string
	// to is the table the rule returned; nil for a userid, whose table is
	// built just before its message (from person, the directory's entry,
	// if any), so a run returning 100,000 userids holds one such table at a
	// time, not all of them.
	to     *lua.LTable
	person *Person
}

// recipientTable is `to` for a recipient the rule gave as a userid: the
// directory's fields, or the userid alone for someone not in it.
func (sb *sandbox) recipientTable(r recipient) *lua.LTable {
	if r.person != nil {
		return sb.personTable(r.person)
	}
	t := sb.L.CreateTable(0, 2)
	t.RawSetString(fieldUserID, lua.LString(r.userid))
	return t
}

// readRecipients reads what recipients(run) returned: a list of people
// tables or userid strings (nil means nobody). A userid that is in the
// directory gets the directory's fields.
func (sb *sandbox) readRecipients(c *compiled, v lua.LValue) ([]recipient, error) {
	if v == lua.LNil {
		return nil, nil
	}
	list, ok := v.(*lua.LTable)
	if !ok {
		return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("recipients must return a list of people or userids, got %s", v.Type())}
	}
	n := list.Len()
	if n > maxRecipients {
		return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("recipients returned %d people, over the limit of %d", n, maxRecipients)}
	}
	out := make([]recipient, 0, n)
	seen := make(map[string]bool, n)
	for i := 1; i <= n; i++ {
		var r recipient
		switch x := list.RawGetInt(i).(type) {
		case lua.LString:
			r.userid = string(x)
			if p, ok := sb.dir().Get(r.userid); ok {
				r.userid, r.person = p.UserID, p // as the directory writes it
			}
		case *lua.LTable:
			id := sb.userid(x)
			if id == "" {
				return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("recipients[%d] has no userid", i)}
			}
			r.userid, r.to = id, x
		default:
			return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("recipients[%d]: want a person or a userid, got %s", i, x.Type())}
		}
		if len(r.userid) > 256 {
			return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("recipients[%d]: userid longer than 256 bytes", i)}
		}
		if seen[foldID(r.userid)] { // WeCom userids ignore case
			continue
		}
		seen[foldID(r.userid)] = true
		out = append(out, r)
	}
	return out, nil
}

// payloadJSON turns what message returned into the channel's JSON body: a
// table (written with sorted keys), or a string that is already JSON.
func (sb *sandbox) payloadJSON(v lua.LValue) (json.RawMessage, error) {
	var b []byte
	switch v := v.(type) {
	case lua.LString:
		b = bytes.TrimSpace([]byte(v))
		if !json.Valid(b) || b[0] != '{' {
			return nil, fmt.Errorf("message returned a string that is not a JSON object; return a table like {msgtype = \"text\", content = \"…\"}")
		}
	case *lua.LTable:
		g, err := sb.toGo(v, maxPayload)
		if err != nil {
			return nil, err
		}
		if _, ok := g.(map[string]any); !ok {
			return nil, fmt.Errorf("message must return a table like {msgtype = \"text\", content = \"…\"}, not a list")
		}
		if b, err = encodeJSON(g); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("message must return a table, got %s", v.Type())
	}
	if len(b) > maxPayload {
		return nil, fmt.Errorf("message is %d bytes of JSON, over the %d byte limit", len(b), maxPayload)
	}
	return json.RawMessage(b), nil
}
