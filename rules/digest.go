package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// Digest runs rule's digest.message(to, items) for recipient: to is the
// person (the directory's fields, or just the userid), items a list of
// {id, key, slot, zone, data, payload}, one per folded delivery, in the
// order given. The file's top level runs with the first item's run as
// `run` (time.now() is its slot). A message of nil means: send the items
// one by one.
func (s *Set) Digest(ctx context.Context, rule, recipient string, items []engine.DigestItem) (json.RawMessage, error) {
	v := s.cur.Load()
	c, ok := v.rules[rule]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	if c.rule.Digest == 0 {
		return nil, &RuleError{File: c.file, Msg: "the rule has no digest"}
	}
	if len(items) == 0 {
		return nil, nil
	}
	var out json.RawMessage
	err := s.withSandbox(ctx, v, c.rule.Name, func(sb *sandbox) error {
		defer func() { sb.run = nil }()
		first := items[0]
		rt, _, err := sb.begin(ctx, c, engine.RunContext{Rule: rule, Key: first.RunKey, Slot: first.Slot, Zone: first.Zone}, s.cfg.CallTimeout)
		if err != nil {
			return err
		}
		dt, ok := rt.RawGetString(keyDigest).(*lua.LTable)
		if !ok {
			return &RuleError{File: c.file, Msg: "the file no longer returns a digest table"}
		}
		to := sb.L.CreateTable(0, 2)
		if p, ok := sb.env.people.Get(recipient); ok {
			to = sb.personTable(p)
		} else {
			to.RawSetString(fieldUserID, lua.LString(recipient))
		}
		list := sb.L.CreateTable(len(items), 0)
		for _, it := range items {
			t, err := sb.digestItem(c, it)
			if err != nil {
				return err
			}
			list.Append(t)
		}
		res, err := sb.call(ctx, s.cfg.CallTimeout, c.file, dt.RawGetString("message"), 1, to, list)
		if err != nil {
			return err
		}
		if res[0] == lua.LNil {
			return nil
		}
		if out, err = sb.payloadJSON(res[0]); err != nil {
			return &RuleError{File: c.file, Msg: fmt.Sprintf("digest for %s: %v", recipient, err)}
		}
		return nil
	})
	return out, err
}

// digestItem is one folded delivery as digest.message sees it.
func (sb *sandbox) digestItem(c *compiled, it engine.DigestItem) (*lua.LTable, error) {
	t := sb.L.CreateTable(0, 6)
	t.RawSetString("id", lua.LString(it.ID))
	t.RawSetString("key", lua.LString(it.RunKey))
	slot := it.Slot
	if loc, err := loadZone(zoneName(it.Zone)); err == nil {
		slot = slot.In(loc)
	}
	t.RawSetString("slot", lua.LString(slot.Format(time.RFC3339)))
	t.RawSetString("zone", lua.LString(zoneName(it.Zone)))
	for _, f := range []struct {
		key string
		raw json.RawMessage
	}{{"data", it.Data}, {"payload", it.Payload}} {
		val := lua.LValue(sb.L.NewTable())
		if !isEmptyData(f.raw) {
			var g any
			if err := json.Unmarshal(f.raw, &g); err != nil {
				return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("digest item %s: %s is not JSON: %v", it.ID, f.key, err)}
			}
			var err error
			if val, err = sb.protect(func() lua.LValue { return sb.fromGo(g, 0) }); err != nil {
				return nil, &RuleError{File: c.file, Msg: fmt.Sprintf("digest item %s: %s: %v", it.ID, f.key, err)}
			}
		}
		t.RawSetString(f.key, val)
	}
	return t, nil
}

var _ engine.DigestBuilder = (*Set)(nil)
