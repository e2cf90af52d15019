package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/reply"
)

// Limits of a task submission.
// The key's limits and how far ahead a task may be due are the engine's
// (engine.CheckTaskKey, engine.MaxTaskAhead), shared with the Lua task
// library.
const (
	maxTaskData = 64 << 10
	maxTaskPage = 1000
)

// TaskRequest is the body of POST /v1/tasks.
type TaskRequest struct {
	Key   string          `json:"key"`
	Rule  string          `json:"rule"`
	DueAt string          `json:"due_at"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// TaskView is a task as the API shows it.
type TaskView struct {
	Key         string          `json:"key"`
	Rule        string          `json:"rule"`
	DueAt       time.Time       `json:"due_at"`
	Data        json.RawMessage `json:"data,omitempty"`
	State       string          `json:"state"`
	SubmittedAt time.Time       `json:"submitted_at"`
	FiredAt     time.Time       `json:"fired_at,omitzero"`
	CancelledAt time.Time       `json:"cancelled_at,omitzero"`
	Run         string          `json:"run,omitempty"`
	RunState    string          `json:"run_state,omitempty"`
	Late        bool            `json:"late,omitempty"`
	// Deliveries counts the run's deliveries by state.
	Deliveries map[string]int `json:"deliveries,omitempty"`
}

// TaskList is the body of GET /v1/tasks. A page holds at most limit tasks
// and about 4 MiB; Next continues after the last one.
type TaskList struct {
	Tasks []TaskView `json:"tasks"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// FieldError is a 400 answer naming the offending field.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func (s *server) taskView(t *engine.Task) TaskView {
	v := TaskView{Key: t.Key, Rule: t.Rule, DueAt: t.DueAt, Data: t.Data, State: t.State.String(),
		SubmittedAt: t.SubmittedAt, FiredAt: t.FiredAt, CancelledAt: t.CancelledAt}
	if run, ok := s.cfg.FSM.Run(engine.TaskRunKey(t.Key)); ok {
		v.Run, v.RunState, v.Late = run.Key, run.State.String(), run.Late
		v.Deliveries = map[string]int{}
		for _, d := range s.cfg.FSM.RunDeliveries(run.Key) {
			v.Deliveries[d.State.String()]++
		}
	}
	return v
}

// parseTask checks a submission and turns it into the command body.
func (s *server) parseTask(w http.ResponseWriter, r *http.Request) (engine.SubmitTask, error) {
	var req TaskRequest
	if err := decodeBody(w, r, maxTaskData+4096, &req, false, "with key, rule, due_at and data"); err != nil {
		return engine.SubmitTask{}, err
	}
	if err := checkKey(req.Key); err != nil {
		return engine.SubmitTask{}, err
	}
	if req.Rule == "" {
		return engine.SubmitTask{}, &FieldError{"rule", "required: the name of the rule to fire"}
	}
	if len(req.Rule) > maxRuleName {
		return engine.SubmitTask{}, &FieldError{"rule", fmt.Sprintf("longer than %d bytes", maxRuleName)}
	}
	if s.cfg.Rules != nil {
		rule, ok := findRule(s.cfg.Rules, req.Rule)
		if !ok {
			return engine.SubmitTask{}, &FieldError{"rule", fmt.Sprintf("no rule named %q is loaded", req.Rule)}
		}
		if rule.Schedule != "" {
			// A task's run is keyed by the task, not by a slot: it would
			// send the rule's message once more beside its schedule.
			return engine.SubmitTask{}, &FieldError{"rule", fmt.Sprintf(
				"rule %s fires on its schedule (%s), not by tasks; to fire one of its slots by hand, POST /v1/rules/%s/fire", rule.Name, rule.Schedule, rule.Name)}
		}
	}
	if req.DueAt == "" {
		return engine.SubmitTask{}, &FieldError{"due_at", "required: an RFC 3339 time with offset, like 2026-12-01T15:00:00+08:00"}
	}
	due, err := engine.ParseTime(req.DueAt, s.zone())
	if err != nil {
		return engine.SubmitTask{}, s.badTime("due_at", err)
	}
	if due.IsZero() { // the state machine takes the zero instant for "missing"
		return engine.SubmitTask{}, &FieldError{"due_at", "the zero time (0001-01-01T00:00:00Z) is no due time; give when the task should fire"}
	}
	now := s.now()
	if due.Sub(now) > engine.MaxTaskAhead {
		return engine.SubmitTask{}, &FieldError{"due_at", "more than ten years ahead"}
	}
	if now.Sub(due) > maxPastDue {
		return engine.SubmitTask{}, &FieldError{"due_at", fmt.Sprintf(
			"%s is more than an hour in the past (now %s): it would fire at once; to send now, give the current time",
			due.Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
	}
	data, err := canonicalData(req.Data)
	if err != nil {
		return engine.SubmitTask{}, err
	}
	return engine.SubmitTask{Key: req.Key, Rule: req.Rule, DueAt: due, Data: data, Now: now}, nil
}

// checkKey is engine.CheckTaskKey as a field error, with the API's advice
// for a missing key.
func checkKey(k string) error {
	var ke *engine.TaskKeyError
	switch err := engine.CheckTaskKey(k); {
	case errors.Is(err, engine.ErrTaskKeyMissing):
		return &FieldError{"key", "required: a key of your choice that names the task (you cancel it by it)"}
	case errors.As(err, &ke):
		return &FieldError{"key", ke.Reason}
	case err != nil:
		return &FieldError{"key", err.Error()}
	}
	return nil
}

func (s *server) submitTask(w http.ResponseWriter, r *http.Request) {
	c, err := s.parseTask(w, r)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	setTarget(r, c.Key)
	res, err := s.tasks.do(r.Context(), c)
	var conflict *engine.TaskConflictError
	switch {
	case errors.As(err, &conflict):
		existing, _ := s.cfg.FSM.Task(c.Key)
		fields := map[string]any{"differences": conflict.Differences}
		if existing != nil {
			fields["task"] = s.taskView(existing)
		}
		writeJSON(w, http.StatusConflict, reply.With(conflict.Error(), fields))
	case errors.Is(err, engine.ErrTaskKeyUsed):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		s.writeApplyError(w, err)
	default:
		sr := res.(engine.SubmitResult)
		code := http.StatusOK
		if sr.Created {
			code = http.StatusCreated
		} else {
			setUnchanged(r)
		}
		writeJSON(w, code, s.taskView(sr.Task))
	}
}

func (s *server) getTask(w http.ResponseWriter, r *http.Request) {
	t, ok := s.cfg.FSM.Task(r.PathValue("key"))
	if !ok {
		writeError(w, http.StatusNotFound, "no task "+r.PathValue("key"))
		return
	}
	writeJSON(w, http.StatusOK, s.taskView(t))
}

func (s *server) cancelTask(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if t, ok := s.cfg.FSM.Task(key); ok && t.State == engine.TaskCancelled {
		setUnchanged(r) // cancelling a cancelled task answers 200 as it is
	}
	res, err := s.apply(r.Context(), engine.CmdCancelTask, engine.CancelTask{Key: key, Now: s.now()})
	var fired *engine.TaskFiredError
	switch {
	case errors.As(err, &fired):
		writeJSON(w, http.StatusConflict, reply.With(fired.Error(), map[string]any{"task": s.taskView(fired.Task)}))
	case errors.Is(err, engine.ErrNoTask):
		writeError(w, http.StatusNotFound, "no task "+key)
	case err != nil:
		s.writeApplyError(w, err)
	default:
		writeJSON(w, http.StatusOK, s.taskView(res.(engine.CancelResult).Task))
	}
}

func (s *server) listTasks(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r, "rule", "state", "from", "to", "limit", "cursor") {
		return
	}
	q := r.URL.Query()
	flt := engine.TaskFilter{Rule: q.Get("rule")}
	var err error
	if st := q.Get("state"); st != "" {
		if flt.State, err = engine.ParseTaskState(st); err != nil {
			writeFieldError(w, &FieldError{"state", "want pending, fired or cancelled"})
			return
		}
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"from", &flt.From}, {"to", &flt.To}} {
		if v := q.Get(p.name); v != "" {
			if *p.to, err = s.queryTime(v); err != nil {
				writeFieldError(w, s.badTime(p.name, err))
				return
			}
		}
	}
	if !flt.From.IsZero() && !flt.To.IsZero() && flt.To.Before(flt.From) {
		writeFieldError(w, &FieldError{"to", "is before from"})
		return
	}
	if flt.Limit, err = intParam(q.Get("limit"), 100, maxTaskPage); err != nil {
		writeFieldError(w, &FieldError{"limit", err.Error()})
		return
	}
	if c := q.Get("cursor"); c != "" {
		if flt.AfterDue, flt.AfterKey, err = decodeCursor(c); err != nil {
			writeFieldError(w, &FieldError{"cursor", "not a cursor from an earlier page"})
			return
		}
	}
	tasks, more := s.cfg.FSM.ListTasks(flt)
	items, err := encodeBounded(tasks, maxListBytes, func(t *engine.Task) any { return s.taskView(t) })
	if err != nil {
		s.writeApplyError(w, err)
		return
	}
	// TaskList's shape, with each TaskView encoded already.
	out := struct {
		Tasks []json.RawMessage `json:"tasks"`
		Next  string            `json:"next,omitempty"`
	}{Tasks: items}
	if len(items) < len(tasks) {
		more, tasks = true, tasks[:len(items)] // the rest on the next page
	}
	if more && len(tasks) > 0 {
		last := tasks[len(tasks)-1]
		out.Next = encodeCursor(last.DueAt, last.Key)
	}
	writeJSON(w, http.StatusOK, out)
}

// queryTime parses an RFC 3339 time from a query parameter. In a query
// "+" decodes to a space, so "…T09:00:00+08:00" typed unescaped (curl, an
// address bar) arrives as "…T09:00:00 08:00": that space is read as "+".
// A time without an offset ("2026-12-01 09:00") is read in the node's
// display zone.
func (s *server) queryTime(v string) (time.Time, error) {
	if n := len(v); n > 6 && v[n-6] == ' ' && v[n-3] == ':' && strings.Contains(v, "T") {
		if t, err := time.Parse(time.RFC3339Nano, v[:n-6]+"+"+v[n-5:]); err == nil {
			return t, nil
		}
	}
	return engine.ParseTime(v, s.zone())
}

// badTime is the 400 for a typed time that was refused, alike for every
// field a person types a time in: the forms wanted, or, for a well-formed
// local time that names no single instant (a daylight saving change),
// which instants it could mean.
func (s *server) badTime(field string, err error) *FieldError {
	if errors.Is(err, engine.ErrWallClock) {
		return &FieldError{field, err.Error()}
	}
	return &FieldError{field, `want an RFC 3339 time with offset, like 2026-12-01T09:00:00+08:00, or "2026-12-01 09:00[:00]" in ` + s.zone().String()}
}

// zone is the node's display zone: where a time typed without an offset
// is read.
func (s *server) zone() *time.Location { return s.displayZone() }

func encodeCursor(due time.Time, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(due.UTC().Format(time.RFC3339Nano) + "\n" + key))
}

func decodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", err
	}
	ts, key, ok := strings.Cut(string(b), "\n")
	if !ok {
		return time.Time{}, "", errors.New("bad cursor")
	}
	due, err := time.Parse(time.RFC3339Nano, ts)
	return due, key, err
}

// apply replicates one command and returns the state machine's answer,
// an error it returned included.
func (s *server) apply(ctx context.Context, t engine.CommandType, body any) (any, error) {
	if s.cfg.Replicator == nil {
		return nil, engine.ErrNotLeader
	}
	cmd, err := engine.Encode(t, body)
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.Replicator.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if e, ok := res.(error); ok {
		return nil, e
	}
	return res, nil
}

func (s *server) writeApplyError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, engine.ErrNotLeader):
		writeError(w, http.StatusServiceUnavailable, "no leader to take the write; try again")
	case errors.Is(err, engine.ErrMembersBehind):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "the write was not confirmed in time; it may still apply — try again (the same request is safe to repeat)")
	default:
		s.cfg.Logger.Warn("api write failed", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeFieldError(w http.ResponseWriter, err error) {
	var (
		fe *FieldError
		be *bodyError
	)
	if errors.As(err, &be) {
		writeJSON(w, be.code, reply.With(be.reason, map[string]any{"field": "body"}))
		return
	}
	if errors.As(err, &fe) {
		writeJSON(w, http.StatusBadRequest, reply.With(fe.Error(), map[string]any{"field": fe.Field, "reason": fe.Reason}))
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

func findRule(rs engine.RuleSource, name string) (engine.Rule, bool) {
	for _, r := range rs.Rules() {
		if r.Name == name {
			return r, true
		}
	}
	return engine.Rule{}, false
}

func (s *server) now() time.Time {
	if s.cfg.NowFunc != nil {
		return s.cfg.NowFunc()
	}
	return time.Now()
}
