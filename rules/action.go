package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// OnAction runs the rule's on_action(run, to, action) hook for a click on
// delivery d's card: to is the recipient as message saw them, action is
// {key, userid, at, event, delivery}. Inside it task.submit, task.cancel,
// task.replace and task.pending act through ops, as in on_event. It
// returns the replacement card the hook returned (a template_card message
// body), or nil. A rule without the hook (or no longer loaded) returns
// nil. Like on_event it runs at least once.
func (s *Set) OnAction(ctx context.Context, rule string, run engine.RunContext, d *engine.Delivery, a engine.CardAction, ops engine.TaskOps) (json.RawMessage, error) {
	v := s.cur.Load()
	c, ok := v.rules[rule]
	if !ok || !c.hasOnAction {
		return nil, nil
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
	var card json.RawMessage
	err := s.withSandbox(ctx, v, rule, func(sb *sandbox) error {
		defer func() { sb.run = nil }()
		rt, runTbl, err := sb.begin(ctx, c, run, s.cfg.CallTimeout)
		if err != nil {
			return err
		}
		sb.run.submit = sub
		r := recipient{userid: d.Recipient}
		if p, ok := sb.dir().Get(d.Recipient); ok {
			r.person = p
		}
		to := sb.recipientTable(r)
		act := sb.L.CreateTable(0, 5)
		act.RawSetString("key", lua.LString(a.Key))
		act.RawSetString("userid", lua.LString(a.UserID))
		act.RawSetString("at", lua.LString(a.At.In(sb.run.zone).Format(time.RFC3339)))
		act.RawSetString("event", lua.LString(a.Event))
		act.RawSetString("delivery", lua.LString(d.ID))
		out, err := sb.call(ctx, s.cfg.CallTimeout, c.file, rt.RawGetString(keyOnAction), 1, runTbl, to, act)
		if err != nil || out[0] == lua.LNil {
			return err
		}
		if card, err = sb.payloadJSON(out[0]); err != nil {
			return &RuleError{File: c.file, Msg: "on_action: " + err.Error()}
		}
		var m struct {
			MsgType string `json:"msgtype"`
		}
		if json.Unmarshal(card, &m) != nil || m.MsgType != "template_card" {
			return &RuleError{File: c.file, Msg: `on_action: return nil or a card to replace the clicked one, {msgtype = "template_card", template_card = {…}}`}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return card, nil
}

var _ engine.ActionRules = (*Set)(nil)
