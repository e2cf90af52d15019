package rules

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/schedule"
)

// Errors a rule file or a rule call can fail with.
var (
	// ErrRule is wrapped by every *RuleError.
	ErrRule = errors.New("rule error")
	// ErrTimeout: a rule function ran past CallTimeout (or its caller's
	// context ended) and was stopped.
	ErrTimeout = errors.New("rule call stopped: time limit")
	// ErrUnknownRule: no good rule of that name is loaded.
	ErrUnknownRule = errors.New("unknown rule")
)

// RuleError is an error in a rule file, with the line it was found on (0
// when unknown).
type RuleError struct {
	File string
	Line int
	Msg  string
	Err  error // a cause beyond ErrRule (ErrTimeout), or nil
}

func (e *RuleError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap makes errors.Is(err, ErrRule) true, and errors.Is(err,
// ErrTimeout) for a stopped call.
func (e *RuleError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrRule, e.Err}
	}
	return []error{ErrRule}
}

// The fields a rule table may have.
const (
	keyName        = "name"
	keyDescription = "description"
	keySchedule    = "schedule"
	keyTimezone    = "timezone"
	keyCalendar    = "calendar"
	keyShift       = "shift"
	keyChannel     = "channel"
	keyPriority    = "priority"
	keyStagger     = "stagger"
	keyRetry       = "retry"
	keyDeadline    = "deadline"
	keyCatchup     = "catchup"
	keyRecipients  = "recipients"
	keyMessage     = "message"
	keyOnFailed    = "on_failed"
	// Since issue 10: people's local time, quiet hours and digests.
	keyDefaultTimezone = "default_timezone"
	keyQuietHours      = "quiet_hours"
	keyQuietStrict     = "quiet_hours_strict"
	keyDigest          = "digest"
	// Since issue 21: events drive rules.
	keyEvents  = "events"
	keyOnEvent = "on_event"
	// Since issue 21: approval before a mass send, cards that answer back.
	keyApproval = "approval"
	keyOnAction = "on_action"
)

var ruleKeys = []string{keyName, keyDescription, keySchedule, keyTimezone, keyCalendar, keyShift,
	keyChannel, keyPriority, keyStagger, keyRetry, keyDeadline, keyCatchup, keyRecipients, keyMessage,
	keyOnFailed, keyDefaultTimezone, keyQuietHours, keyQuietStrict, keyDigest, keyEvents, keyOnEvent, keyApproval, keyOnAction}

// utf8BOM is the byte order mark some editors put at the start of a file.
var utf8BOM = []byte("\uFEFF")

var ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// compiled is one good rule file: its bytecode (shared by every state of
// every version while the file is unchanged) and what the engine needs.
type compiled struct {
	file        string
	hash        string
	proto       *lua.FunctionProto
	rule        engine.Rule
	description string
	sched       *schedule.Schedule // nil for rules triggered by API tasks
	hasOnFailed bool
	hasOnEvent  bool
	hasOnAction bool
	nameLine    int
	channelLine int // line of the channel field, for "not configured" errors
	catchupLine int // line of the catchup field, for "longer than the ledger" errors
	// quiet is the rule's quiet hours (zero: none); people may have their
	// own (the quiet_hours column).
	quiet engine.QuietHours
}

// contentHash names a file's content (and, joined, a rule set).
func contentHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// compileFile parses, compiles and evaluates one rule file in sb and
// checks its fields. Every error is a *RuleError naming the file and line.
func compileFile(ctx context.Context, sb *sandbox, file string, src []byte, timeout time.Duration) (*compiled, error) {
	// A UTF-8 byte order mark (Windows editors write one) is skipped, as
	// Lua 5.2 and later do; gopher-lua would call it a syntax error.
	chunk, err := parse.Parse(bytes.NewReader(bytes.TrimPrefix(src, utf8BOM)), file)
	if err != nil {
		return nil, syntaxError(file, src, err)
	}
	proto, err := lua.Compile(chunk, file)
	if err != nil {
		return nil, &RuleError{File: file, Msg: err.Error()}
	}
	lines, retLine := fieldLines(chunk)
	val, err := sb.evalFile(ctx, proto, timeout, true)
	if err != nil {
		return nil, err
	}
	t, ok := val.(*lua.LTable)
	if !ok {
		return nil, &RuleError{File: file, Line: retLine, Msg: fmt.Sprintf("the file must end with `return rule { ... }`, it returned %s", val.Type())}
	}
	c := &compiled{file: file, hash: contentHash(src), proto: proto}
	if err := c.readFields(t, sb, lines, retLine); err != nil {
		return nil, err
	}
	return c, nil
}

// evalFile runs a file's top level in a fresh environment and returns what
// it returned; checked (at load) measures its memory from a fresh
// collection (callFrom).
func (sb *sandbox) evalFile(ctx context.Context, proto *lua.FunctionProto, timeout time.Duration, checked bool) (lua.LValue, error) {
	sb.logLines = 0
	fn := sb.L.NewFunctionFromProto(proto)
	fn.Env = sb.runEnv()
	out, err := sb.callFrom(ctx, checked, timeout, proto.SourceName, fn, 1)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// syntaxError turns a parse error into a RuleError with the line. An
// error at the end of the file (an unclosed table or string) is put on
// the file's last line with content.
func syntaxError(file string, src []byte, err error) error {
	var pe *parse.Error
	if errors.As(err, &pe) {
		line := pe.Pos.Line
		msg := strings.TrimSpace(pe.Message)
		if line == parse.EOF {
			line = 1 + bytes.Count(bytes.TrimRight(src, " \t\r\n"), []byte("\n"))
			msg += " at end of file"
		} else if pe.Token != "" {
			msg += fmt.Sprintf(" near '%s'", clipToken(pe.Token))
		}
		if !strings.HasPrefix(msg, "syntax error") { // gopher-lua's own message is often just that
			msg = "syntax error: " + msg
		}
		return &RuleError{File: file, Line: line, Msg: msg}
	}
	return &RuleError{File: file, Msg: strings.TrimSpace(err.Error())}
}

// maxErrorToken bounds the token a syntax error quotes: the error goes to
// /v1/status, and an unterminated string's token is the rest of its line
// (a file that is not Lua at all would be quoted line by line).
const maxErrorToken = 24

// clipToken is tok cut to maxErrorToken bytes on a rune boundary, marked,
// with control characters (a newline in a long string) shown as '?'.
func clipToken(tok string) string {
	if len(tok) > maxErrorToken {
		cut := maxErrorToken
		for cut > 0 && !utf8.RuneStart(tok[cut]) {
			cut--
		}
		tok = tok[:cut] + "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, tok)
}

// luaErrorRE reads the "file:line:" that gopher-lua puts before a runtime
// error raised in Lua code; the message may have several lines.
var luaErrorRE = regexp.MustCompile(`(?s)^(?:<string>|[^:\s]+):(\d+):\s*(.*)$`)

// maxErrorMessage bounds a rule's error message: it becomes a run's error,
// replicated through the Raft log and kept with the run.
const maxErrorMessage = 4 << 10

// runtimeError turns an error from a Lua call into a RuleError.
func runtimeError(file string, err error) *RuleError {
	msg := err.Error()
	var ae *lua.ApiError
	if errors.As(err, &ae) && ae.Object != nil {
		msg = ae.Object.String()
	}
	msg = strings.TrimSpace(msg)
	if len(msg) > 2*maxErrorMessage {
		msg = msg[:2*maxErrorMessage] // the pattern need not read a megabyte (the time limit still runs)
	}
	re := &RuleError{File: file, Msg: msg}
	if m := luaErrorRE.FindStringSubmatch(msg); m != nil {
		re.Line, _ = strconv.Atoi(m[1])
		re.Msg = m[2]
	}
	if len(re.Msg) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && !utf8.RuneStart(re.Msg[cut]) {
			cut-- // not in the middle of a character
		}
		re.Msg = re.Msg[:cut] + "…"
	}
	return re
}

// fieldLines finds the table the file returns and the line of each of its
// fields, for error messages. It understands `return rule { ... }`,
// `return { ... }`, and a local holding either; otherwise only the return's
// line is known.
func fieldLines(chunk []ast.Stmt) (map[string]int, int) {
	lines := map[string]int{}
	locals := map[string]*ast.TableExpr{}
	unwrap := func(e ast.Expr) *ast.TableExpr {
		if call, ok := e.(*ast.FuncCallExpr); ok {
			if id, ok := call.Func.(*ast.IdentExpr); ok && id.Value == ruleFuncName && len(call.Args) == 1 {
				e = call.Args[0]
			}
		}
		if id, ok := e.(*ast.IdentExpr); ok {
			return locals[id.Value]
		}
		t, _ := e.(*ast.TableExpr)
		return t
	}
	retLine := 0
	var table *ast.TableExpr
	for _, st := range chunk {
		switch st := st.(type) {
		case *ast.LocalAssignStmt:
			for i, name := range st.Names {
				if i < len(st.Exprs) {
					if t := unwrap(st.Exprs[i]); t != nil {
						locals[name] = t
					}
				}
			}
		case *ast.ReturnStmt:
			retLine = st.Line()
			if len(st.Exprs) == 1 {
				table = unwrap(st.Exprs[0])
			}
		}
	}
	if table != nil {
		for _, f := range table.Fields {
			if k, ok := f.Key.(*ast.StringExpr); ok {
				lines[k.Value] = k.Line()
			}
		}
	}
	return lines, retLine
}

// readFields checks the rule table's fields and fills c.rule.
func (c *compiled) readFields(t *lua.LTable, sb *sandbox, lines map[string]int, retLine int) error {
	fail := func(key, format string, args ...any) error {
		line, ok := lines[key]
		if !ok {
			line = retLine
		}
		return &RuleError{File: c.file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	// A person given as the rule, or as one of its tables, is read as the
	// full person it stands for (its fields are then unknown fields).
	sb.filled(t)
	eachPair(t, func(_, v lua.LValue) bool {
		if vt, ok := v.(*lua.LTable); ok {
			sb.filled(vt)
		}
		return true
	})
	var err error
	eachPair(t, func(k, _ lua.LValue) bool {
		ks, ok := k.(lua.LString)
		if !ok {
			err = fail("", "rule fields are named; got a %s key", k.Type())
		} else if !slices.Contains(ruleKeys, string(ks)) {
			err = fail(string(ks), "unknown field %q (fields: %s)", string(ks), strings.Join(ruleKeys, ", "))
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	str := func(key string, required bool) (string, error) {
		switch v := t.RawGetString(key).(type) {
		case *lua.LNilType:
			if required {
				return "", fail(key, "%s is required", key)
			}
			return "", nil
		case lua.LString:
			if required && v == "" {
				return "", fail(key, "%s is required", key)
			}
			return string(v), nil
		default:
			return "", fail(key, "%s: want a string, got %s", key, v.Type())
		}
	}
	dur := func(key string) (time.Duration, error) {
		s, err := str(key, false)
		if err != nil || s == "" {
			return 0, err
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fail(key, "%s: %q is not a positive duration like \"90m\" or \"2h\"", key, s)
		}
		return d, nil
	}
	r := &c.rule
	r.File, r.Hash = c.file, c.hash
	c.nameLine = lines[keyName]
	if r.Name, err = str(keyName, true); err != nil {
		return err
	}
	if !ruleNameRE.MatchString(r.Name) {
		return fail(keyName, "name %q: use letters, digits, _ . - (at most 64)", r.Name)
	}
	if c.description, err = str(keyDescription, false); err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{keySchedule, &r.Schedule}, {keyTimezone, &r.Timezone}, {keyCalendar, &r.Calendar}, {keyShift, &r.Shift}} {
		if *f.dst, err = str(f.key, false); err != nil {
			return err
		}
	}
	defaultZone, err := str(keyDefaultTimezone, false)
	if err != nil {
		return err
	}
	if err := c.readRecipientZone(defaultZone, fail); err != nil {
		return err
	}
	if r.Channel, err = str(keyChannel, true); err != nil {
		return err
	}
	if c.channelLine = lines[keyChannel]; c.channelLine == 0 {
		c.channelLine = retLine
	}
	p, err := str(keyPriority, false)
	if err != nil {
		return err
	}
	if r.Priority, err = heraldtype.ParsePriority(p); err != nil {
		return fail(keyPriority, "%v", err)
	}
	if r.Deadline, err = dur(keyDeadline); err != nil {
		return err
	}
	if r.Catchup, err = dur(keyCatchup); err != nil {
		return err
	}
	if c.catchupLine = lines[keyCatchup]; c.catchupLine == 0 {
		c.catchupLine = retLine
	}
	if err := c.readTrigger(sb, fail); err != nil {
		return err
	}
	if err := c.readStagger(t.RawGetString(keyStagger), fail); err != nil {
		return err
	}
	if err := c.readRetry(t.RawGetString(keyRetry), fail); err != nil {
		return err
	}
	if err := c.readQuietHours(t, fail); err != nil {
		return err
	}
	if err := c.readDigest(t.RawGetString(keyDigest), fail); err != nil {
		return err
	}
	if err := c.readApproval(t.RawGetString(keyApproval), fail); err != nil {
		return err
	}
	for _, key := range []string{keyRecipients, keyMessage, keyOnFailed, keyOnAction} {
		switch t.RawGetString(key).(type) {
		case *lua.LFunction:
		case *lua.LNilType:
			if key != keyOnFailed && key != keyOnAction {
				return fail(key, "%s is required: a function(run%s)", key, map[bool]string{true: ", to"}[key == keyMessage])
			}
		default:
			return fail(key, "%s: want a function, got %s", key, t.RawGetString(key).Type())
		}
	}
	c.hasOnFailed = t.RawGetString(keyOnFailed) != lua.LNil
	c.hasOnAction = t.RawGetString(keyOnAction) != lua.LNil
	return c.readEvents(t, fail)
}

// maxEventTypes bounds a rule's events list.
const maxEventTypes = 32

// readEvents checks events = {"TYPE", …} and on_event, which go together.
func (c *compiled) readEvents(t *lua.LTable, fail func(string, string, ...any) error) error {
	evs, hook := t.RawGetString(keyEvents), t.RawGetString(keyOnEvent)
	switch hook.(type) {
	case *lua.LNilType, *lua.LFunction:
	default:
		return fail(keyOnEvent, "on_event: want a function(ev), got %s", hook.Type())
	}
	if evs == lua.LNil {
		if hook != lua.LNil {
			return fail(keyOnEvent, `on_event needs events = { "TYPE", … }: the event types it takes (like "wecom.kf.message")`)
		}
		return nil
	}
	list, ok := evs.(*lua.LTable)
	if !ok || list.Len() == 0 {
		return fail(keyEvents, `events: want a list of event types, like { "wecom.kf.message" }`)
	}
	if list.Len() > maxEventTypes {
		return fail(keyEvents, "events: at most %d types", maxEventTypes)
	}
	seen := map[string]bool{}
	for i := 1; i <= list.Len(); i++ {
		s, ok := list.RawGetInt(i).(lua.LString)
		if !ok || s == "" || len(s) > engine.MaxEventType {
			return fail(keyEvents, "events[%d]: want an event type (a string of at most %d bytes)", i, engine.MaxEventType)
		}
		if !seen[string(s)] {
			seen[string(s)] = true
			c.rule.Events = append(c.rule.Events, string(s))
		}
	}
	if hook == lua.LNil {
		return fail(keyEvents, "events without on_event: add on_event = function(ev) … end")
	}
	c.hasOnEvent = true
	return nil
}

// readTrigger checks schedule, timezone, calendar and shift together, as
// the engine will read them.
func (c *compiled) readTrigger(sb *sandbox, fail func(string, string, ...any) error) error {
	r := &c.rule
	if r.Timezone == "Local" {
		return fail(keyTimezone, "timezone \"Local\" depends on the machine; name an IANA zone like Asia/Shanghai")
	}
	if r.Timezone != "" {
		if _, err := loadZone(r.Timezone); err != nil {
			return fail(keyTimezone, "unknown timezone %q: want an IANA zone like Asia/Shanghai", r.Timezone)
		}
	}
	if r.Calendar != "" {
		if _, err := sb.env.calendars.Lookup(r.Calendar); err != nil {
			return fail(keyCalendar, "%v", err)
		}
	}
	if r.Schedule == "" {
		if r.Shift != "" {
			return fail(keyShift, "shift needs a schedule")
		}
		return nil
	}
	s, err := schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone, Calendar: r.Calendar, Shift: r.Shift}, sb.env.calendars)
	if err != nil {
		key := keySchedule
		if errors.Is(err, schedule.ErrBadShift) {
			key = keyShift
		}
		return fail(key, "%v", err)
	}
	if r.PerRecipient && strings.HasPrefix(strings.TrimSpace(r.Schedule), "@every") {
		// Its slots are instants, the same in every zone: a run per zone
		// changes nothing, and two slots an hour apart in a repeated autumn
		// hour would read as one local slot (one of them never sent).
		return fail(keyTimezone, "timezone = %q: %q slots are not tied to a time of day; name a zone, or use a cron spec", recipientZone, r.Schedule)
	}
	c.sched = s
	return nil
}

func (c *compiled) readStagger(v lua.LValue, fail func(string, string, ...any) error) error {
	if v == lua.LNil {
		return nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		return fail(keyStagger, "stagger: want { jitter = \"5m\" } or { batches = 10, spacing = \"1m\" }, got %s", v.Type())
	}
	var err error
	st := &c.rule.Stagger
	eachPair(t, func(k, v lua.LValue) bool {
		switch ks := luaString(k); ks {
		case "jitter", "spacing":
			s, ok := v.(lua.LString)
			d, perr := time.ParseDuration(string(s))
			if !ok || perr != nil || d <= 0 {
				err = fail(keyStagger, "stagger.%s: want a positive duration like \"5m\", got %s", ks, v.String())
				break
			}
			if ks == "jitter" {
				st.Jitter = d
			} else {
				st.Spacing = d
			}
		case "batches":
			n, ok := v.(lua.LNumber)
			if !ok || float64(n) != float64(int(n)) || n < 1 || n > 10_000 {
				err = fail(keyStagger, "stagger.batches: want a whole number 1..10000, got %s", v.String())
				break
			}
			st.Batches = int(n)
		default:
			err = fail(keyStagger, "stagger: unknown field %q (jitter, or batches and spacing)", ks)
		}
		return err == nil
	})
	switch {
	case err != nil:
		return err
	case st.Jitter > 0 && (st.Batches > 0 || st.Spacing > 0):
		return fail(keyStagger, "stagger: give jitter, or batches and spacing, not both")
	case st.Batches > 1 && st.Spacing == 0:
		return fail(keyStagger, "stagger: batches needs a spacing")
	case st.Spacing > 0 && st.Batches < 2:
		return fail(keyStagger, "stagger: spacing needs batches of 2 or more")
	}
	return nil
}

func (c *compiled) readRetry(v lua.LValue, fail func(string, string, ...any) error) error {
	if v == lua.LNil {
		return nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		return fail(keyRetry, "retry: want a list of waits like { \"1m\", \"5m\", \"15m\" }, got %s", v.Type())
	}
	n := t.Len()
	if n > 100 {
		return fail(keyRetry, "retry: at most 100 waits")
	}
	c.rule.Retry = make([]time.Duration, 0, n) // an empty list means: do not retry
	for i := 1; i <= n; i++ {
		s, ok := t.RawGetInt(i).(lua.LString)
		d, err := time.ParseDuration(string(s))
		if !ok || err != nil || d <= 0 {
			return fail(keyRetry, "retry[%d]: want a positive duration like \"5m\", got %s", i, t.RawGetInt(i).String())
		}
		c.rule.Retry = append(c.rule.Retry, d)
	}
	return nil
}
