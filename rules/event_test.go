package rules

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// fakeTasks is a task store behind engine.TaskOps, as the leader's would
// be: keyed, idempotent.
type fakeTasks struct {
	tasks map[string]*engine.Task
	calls []string
}

func (f *fakeTasks) ops() engine.TaskOps {
	return engine.TaskOps{
		Submit: func(_ context.Context, t engine.SubmitTask) (*engine.Task, error) {
			f.calls = append(f.calls, "submit "+t.Key)
			if old, ok := f.tasks[t.Key]; ok {
				return old, nil
			}
			nt := &engine.Task{Key: t.Key, Rule: t.Rule, DueAt: t.DueAt, Data: t.Data, State: engine.TaskPending}
			f.tasks[t.Key] = nt
			return nt, nil
		},
		Cancel: func(_ context.Context, key string) (*engine.Task, error) {
			f.calls = append(f.calls, "cancel "+key)
			t, ok := f.tasks[key]
			if !ok {
				return nil, engine.ErrNoTask
			}
			t.State = engine.TaskCancelled
			return t, nil
		},
		Replace: func(_ context.Context, c engine.ReplaceTask) (*engine.Task, error) {
			f.calls = append(f.calls, "replace "+c.Key)
			t, ok := f.tasks[c.Key]
			if !ok || t.State != engine.TaskPending {
				return nil, errors.New("not pending")
			}
			t.DueAt = c.DueAt
			return t, nil
		},
		Pending: func(prefix string, _ int) []*engine.Task {
			var out []*engine.Task
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range f.tasks {
					if !yield(k) {
						return
					}
				}
			}) {
				if t := f.tasks[k]; strings.HasPrefix(k, prefix) && t.State == engine.TaskPending {
					out = append(out, t)
				}
			}
			return out
		},
	}
}

func kfEvent(id string, at time.Time, origin int) engine.EventContext {
	d, _ := json.Marshal(map[string]any{"msgid": id, "open_kfid": "wk1", "external_userid": "c1", "origin": origin, "msgtype": "text", "text": map[string]any{"content": "在吗"}})
	return engine.EventContext{ID: "wecom:w:kf:" + id, Type: engine.EventWecomKfMessage, At: at, Data: d}
}

// The example enquiry_timeout: a customer's message starts the timer, a
// second restarts it, a servicer's reply cancels it, and each hook may
// run twice without changing the outcome.
func TestExampleEnquiryTimeoutOnEvent(t *testing.T) {
	t.Parallel()
	s := examples(t)
	var r engine.Rule
	for _, x := range s.Rules() {
		if x.Name == "enquiry_timeout" {
			r = x
		}
	}
	require.Equal(t, []string{"wecom.kf.message"}, r.Events)
	ft := &fakeTasks{tasks: map[string]*engine.Task{}}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	for range 2 { // at least once: a second run adds nothing
		require.NoError(t, s.OnEvent(ctx, "enquiry_timeout", kfEvent("m1", t0, 3), ft.ops()))
	}
	require.Len(t, ft.tasks, 1)
	tk := ft.tasks["enquiry-wk1-c1-m1"]
	require.NotNil(t, tk)
	require.True(t, t0.Add(15*time.Minute).Equal(tk.DueAt), tk.DueAt)
	var data map[string]any
	require.NoError(t, json.Unmarshal(tk.Data, &data))
	require.Equal(t, "liuyang", data["assignee"])

	require.NoError(t, s.OnEvent(ctx, "enquiry_timeout", kfEvent("m2", t0.Add(5*time.Minute), 3), ft.ops()))
	require.Len(t, ft.tasks, 1, "a second message restarts the same timer")
	require.True(t, t0.Add(20*time.Minute).Equal(tk.DueAt), tk.DueAt)

	for range 2 {
		require.NoError(t, s.OnEvent(ctx, "enquiry_timeout", kfEvent("m3", t0.Add(6*time.Minute), 5), ft.ops()))
	}
	require.Equal(t, engine.TaskCancelled, tk.State)

	require.NoError(t, s.OnEvent(ctx, "enquiry_timeout", kfEvent("m4", t0.Add(time.Hour), 3), ft.ops()))
	require.Equal(t, engine.TaskPending, ft.tasks["enquiry-wk1-c1-m4"].State, "a new enquiry after the reply: a new timer")
}

func TestOnEventChecks(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"on_event without events": `on_event = function(ev) end,`,
		"events without on_event": `events = { "x" },`,
		"events not a list":       `events = "x", on_event = function(ev) end,`,
	}
	for name, field := range bad {
		src := `return rule { name = "r", channel = "mock", ` + field + ` recipients = function(run) return {} end, message = function(run, to) return {msgtype="text", content="x"} end }`
		s := load(t, newDir(t, map[string]string{"r.lua": src}))
		st := s.Status()
		require.Len(t, st, 1, name)
		require.NotEmpty(t, st[0].Error, name)
	}
}
