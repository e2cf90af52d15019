package rules

import (
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// Rule fields of issue 10: each person's local time, quiet hours, digests.

// recipientZone is the timezone value that fires a rule in each
// recipient's own zone.
const recipientZone = "recipient"

// defaultRecipientZone is the zone of people who name none, in a
// per-recipient rule without default_timezone.
const defaultRecipientZone = "Asia/Shanghai"

// maxDigestWindow bounds a digest window: a day's reminders in one
// message is a report, not a digest.
const maxDigestWindow = 24 * time.Hour

// readRecipientZone turns timezone = "recipient" into a per-recipient
// rule whose Timezone is the zone of people without one.
func (c *compiled) readRecipientZone(defaultZone string, fail func(string, string, ...any) error) error {
	r := &c.rule
	if r.Timezone != recipientZone {
		if defaultZone != "" {
			return fail(keyDefaultTimezone, "default_timezone needs timezone = %q (the zone of people who name none); this rule fires in %s", recipientZone, zoneName(r.Timezone))
		}
		return nil
	}
	r.PerRecipient = true
	r.Timezone = defaultRecipientZone
	if defaultZone != "" {
		if defaultZone == "Local" || defaultZone == recipientZone {
			return fail(keyDefaultTimezone, "default_timezone %q: name an IANA zone like Asia/Shanghai", defaultZone)
		}
		if _, err := loadZone(defaultZone); err != nil {
			return fail(keyDefaultTimezone, "unknown default_timezone %q: want an IANA zone like Asia/Shanghai", defaultZone)
		}
		r.Timezone = defaultZone
	}
	return nil
}

// readQuietHours reads quiet_hours = { from = "22:00", to = "08:00" } and
// quiet_hours_strict = true.
func (c *compiled) readQuietHours(t *lua.LTable, fail func(string, string, ...any) error) error {
	switch v := t.RawGetString(keyQuietStrict).(type) {
	case *lua.LNilType:
	case lua.LBool:
		c.rule.QuietStrict = bool(v)
	default:
		return fail(keyQuietStrict, "quiet_hours_strict: want true or false, got %s", v.Type())
	}
	v := t.RawGetString(keyQuietHours)
	if v == lua.LNil {
		return nil
	}
	const want = `quiet_hours: want { from = "22:00", to = "08:00" }`
	qt, ok := v.(*lua.LTable)
	if !ok {
		return fail(keyQuietHours, "%s, got %s", want, v.Type())
	}
	var from, to string
	var err error
	eachPair(qt, func(k, v lua.LValue) bool {
		s, isStr := v.(lua.LString)
		switch ks := luaString(k); {
		case ks != "from" && ks != "to":
			err = fail(keyQuietHours, "quiet_hours: unknown field %q (from, to)", ks)
		case !isStr:
			err = fail(keyQuietHours, "quiet_hours.%s: want a time of day like \"22:00\", got %s", ks, v.Type())
		case ks == "from":
			from = string(s)
		default:
			to = string(s)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if from == "" || to == "" {
		return fail(keyQuietHours, "%s: both from and to are required", want)
	}
	q, err := engine.ParseQuietHours(from, to)
	if err != nil {
		return fail(keyQuietHours, "%v", err)
	}
	c.quiet = q
	return nil
}

// readDigest reads digest = { window = "10m", message = function(to, items) … end }.
func (c *compiled) readDigest(v lua.LValue, fail func(string, string, ...any) error) error {
	if v == lua.LNil {
		return nil
	}
	const want = `digest: want { window = "10m", message = function(to, items) ... end }`
	dt, ok := v.(*lua.LTable)
	if !ok {
		return fail(keyDigest, "%s, got %s", want, v.Type())
	}
	var err error
	hasMessage := false
	eachPair(dt, func(k, v lua.LValue) bool {
		switch ks := luaString(k); ks {
		case "window":
			s, ok := v.(lua.LString)
			d, perr := time.ParseDuration(string(s))
			switch {
			case !ok || perr != nil || d <= 0:
				err = fail(keyDigest, "digest.window: want a positive duration like \"10m\", got %s", v.String())
			case d < time.Second || d%time.Second != 0:
				err = fail(keyDigest, "digest.window %s: want a whole number of seconds, at least 1s", d)
			case d > maxDigestWindow:
				err = fail(keyDigest, "digest.window %s: at most %s", d, maxDigestWindow)
			default:
				c.rule.Digest = d
			}
		case "message":
			if _, ok := v.(*lua.LFunction); !ok {
				err = fail(keyDigest, "digest.message: want a function(to, items), got %s", v.Type())
			}
			hasMessage = true
		default:
			err = fail(keyDigest, "digest: unknown field %q (window, message)", ks)
		}
		return err == nil
	})
	switch {
	case err != nil:
		return err
	case c.rule.Digest == 0:
		return fail(keyDigest, "%s: window is required", want)
	case !hasMessage:
		return fail(keyDigest, "%s: message is required", want)
	}
	deadline := c.rule.Deadline
	if deadline == 0 {
		deadline = engine.DefaultDeadline
	}
	if c.rule.Digest >= deadline {
		// A digest goes at the end of its window: with a deadline no
		// longer than the window, every folded message would expire.
		return fail(keyDigest, "digest.window %s must be shorter than the rule's deadline %s", c.rule.Digest, deadline)
	}
	return nil
}
