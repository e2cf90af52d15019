package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/schedule"
)

// A backlog that fills Due's limit with its oldest deliveries does not hide
// a small run that just came due: its deliveries are returned too, and the
// executor's order puts them beside the backlog's first, not after it.
func TestDueShowsTheNewestBesideABacklog(t *testing.T) {
	b := setupFSM(t)
	var big []string
	for i := range 400 {
		big = append(big, fmt.Sprintf("u%04d", i))
	}
	bigKey := b.planned("big", big...)

	slot := t0.Add(2 * time.Second)
	smallKey := engine.RunKey("small", slot)
	require.Nil(t, b.apply(engine.CmdStartRun, engine.StartRun{Key: smallKey, Rule: "small", Slot: slot, Now: slot}))
	var nds []engine.NewDelivery
	for _, r := range []string{"a", "b"} {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(smallKey, r), Recipient: r, Channel: "mock",
			Payload: json.RawMessage(`{}`), Priority: heraldtype.PriorityNormal, NotBefore: slot, Deadline: slot.Add(time.Hour)})
	}
	require.Equal(t, 2, b.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: smallKey, Deliveries: nds}))

	due := b.fsm.Due(slot, 100)
	runs := map[string]int{}
	for _, d := range due {
		runs[d.RunKey]++
	}
	require.Equal(t, 2, runs[smallKey], "the small run's deliveries are due and returned")
	require.Equal(t, 100+10, runs[bigKey]) // the limit, plus its own newest share

	fairOrder(due)
	require.Equal(t, []string{bigKey, smallKey, bigKey, smallKey, bigKey}, []string{due[0].RunKey, due[1].RunKey, due[2].RunKey, due[3].RunKey, due[4].RunKey},
		"round-robin across runs")

	// Without a backlog nothing is returned twice.
	small := b.fsm.Due(slot, 1000)
	require.Len(t, small, 402)
}

// Priority still comes first: a high delivery goes before any normal one,
// whatever the runs.
func TestFairOrderKeepsPriority(t *testing.T) {
	mk := func(id, run string, p heraldtype.Priority, at time.Duration) *engine.Delivery {
		return &engine.Delivery{ID: id, RunKey: run, Priority: p, State: engine.StatePending, NotBefore: t0.Add(at)}
	}
	due := []*engine.Delivery{mk("a1", "a", heraldtype.PriorityNormal, 0), mk("a2", "a", heraldtype.PriorityNormal, 1), mk("b1", "b", heraldtype.PriorityNormal, 5),
		mk("c-high", "c", heraldtype.PriorityHigh, 9), mk("a-low", "a", heraldtype.PriorityLow, 0)}
	fairOrder(due)
	var got []string
	for _, d := range due {
		got = append(got, d.ID)
	}
	require.Equal(t, []string{"c-high", "a1", "b1", "a2", "a-low"}, got)
}

// slowChannel sends one batch at a time, perMsg per message, like the
// mock's outbox with its fsync per batch; it records when each message
// went.
type slowChannel struct {
	line   chan struct{} // capacity 1: the channel's one line
	perMsg time.Duration
	mu     sync.Mutex
	sent   map[string][]time.Time // recipient → send times
}

func (*slowChannel) Admit(string, string, heraldtype.Priority, time.Time) time.Duration { return 0 }

func (s *slowChannel) Send(ctx context.Context, _ string, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	select {
	case s.line <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.line }()
	time.Sleep(time.Duration(len(batch)) * s.perMsg)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]heraldtype.Result, len(batch))
	for i, m := range batch {
		s.sent[m.Recipient] = append(s.sent[m.Recipient], time.Now())
		out[i] = heraldtype.Result{ID: m.ID, Status: heraldtype.StatusSent}
	}
	return out, nil
}

// One huge run does not hold up another rule's slots on the same channel
// by more than a second: 20,000 messages due at once on a channel that
// sends 7,000 a second, beside a rule every 2 s. The whole leader runs
// on synctest's fake clock, which moves only when every goroutine waits,
// so the sends in flight, the claims and the passes take their turns as
// they would, and the lateness measured is the design's, not the
// machine's.
func TestSmallRuleBesideAHugeRunIsOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		log := &localLog{fsm: engine.NewFSM(), term: 1, leader: true}
		apply := func(ct engine.CommandType, body any) {
			cmd, err := engine.Encode(ct, body)
			require.NoError(t, err)
			res, err := log.Apply(t.Context(), cmd)
			require.NoError(t, err)
			if err, ok := res.(error); ok {
				require.NoError(t, err)
			}
		}
		due := start.Add(time.Second)
		big := engine.RunKey("blast", due)
		apply(engine.CmdStartRun, engine.StartRun{Key: big, Rule: "blast", Slot: due, Now: start})
		const n = 50000
		for c := 0; c < n; c += 500 {
			nds := make([]engine.NewDelivery, 0, 500)
			for i := c; i < c+500; i++ {
				who := fmt.Sprintf("u%05d", i)
				nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(big, who), Recipient: who, Channel: "mock", Payload: json.RawMessage(`{}`),
					Priority: heraldtype.PriorityNormal, NotBefore: due, Deadline: due.Add(time.Hour)})
			}
			apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: big, Deliveries: nds})
		}
		apply(engine.CmdFinishPlan, engine.FinishPlan{RunKey: big, Now: start})

		ch := &slowChannel{line: make(chan struct{}, 1), perMsg: time.Second / 7000, sent: map[string][]time.Time{}}
		rules := &simRules{rules: []engine.Rule{{Name: "tick", Schedule: "*/2 * * * * *", Timezone: "UTC", Channel: "mock", Deadline: time.Hour}},
			plan: map[string]func(engine.RunContext) []engine.Planned{"tick": to("alice")}}
		cals := calendar.NewRegistry()
		l, err := New(Config{NodeID: "n1", FSM: log.fsm, Replicator: log, Rules: rules, Sender: ch,
			PlannerConfig: PlannerConfig{PlanAhead: time.Minute}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
				return schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone}, cals)
			}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()
		time.Sleep(n*ch.perMsg + 3*time.Second) // the burst drains, and a little more
		cancel()
		<-done

		ch.mu.Lock()
		defer ch.mu.Unlock()
		require.Len(t, ch.sent, n+1, "every message sent")
		var worst time.Duration
		slots := 0
		for _, at := range ch.sent["alice"] {
			slot := at.Truncate(2 * time.Second)
			if slot.Before(due) {
				continue // before the burst
			}
			slots++
			worst = max(worst, at.Sub(slot))
		}
		require.GreaterOrEqual(t, slots, 2, "the rule's slots during the burst were sent")
		t.Logf("%d slots during a burst of %d: the worst was sent %s late", slots, n, worst)
		require.LessOrEqual(t, worst, time.Second)
	})
}
