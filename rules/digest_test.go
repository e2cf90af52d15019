package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/leader"
)

// TestFollowUpDigestThroughLeader: the example follow_up, run by the
// engine's leader: 30 customers due for wangfang at 09:00 and one for
// lina are two messages, wangfang's listing all 30.
func TestFollowUpDigestThroughLeader(t *testing.T) {
	t.Parallel()
	s := load(t, exampleCopies(t, "follow_up.lua", "people.csv"))
	node := enginetest.New()
	nine := mustTime(t, "2026-12-01T09:00:00+08:00")
	for i := range 30 {
		node.MustApply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: fmt.Sprintf("follow-w%02d", i), Rule: "follow_up",
			DueAt: nine.Add(time.Duration(i) * 5 * time.Second), Now: nine.Add(-time.Hour),
			Data: []byte(fmt.Sprintf(`{"customer":"客户%02d","note":"确认报价","owner":"wangfang"}`, i+1))})
	}
	node.MustApply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "follow-l", Rule: "follow_up", DueAt: nine.Add(time.Minute),
		Now: nine.Add(-time.Hour), Data: []byte(`{"customer":"华东机电","owner":"lina"}`)})

	sender := &enginetest.Sender{}
	now := nine.Add(10*time.Minute + time.Second) // the window 09:00–09:10 has ended
	l, err := leader.New(leader.Config{
		NodeID: "n1", FSM: node.FSM, Replicator: node, Rules: s, Sender: sender,
		ScheduleFunc: func(engine.Rule) (engine.Schedule, error) { return nil, errors.New("no scheduled rules here") },
		NowFunc:      func() time.Time { return now },
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool {
		n := 0
		for _, d := range node.FSM.Deliveries(nil) {
			if d.State == engine.StateSent {
				n++
			}
		}
		return n >= 32 // 31 reminders and the digest (more: a digest too many, caught below)
	}, 10*time.Second, 5*time.Millisecond, "not everything was sent")
	sent := sender.Sent()
	require.Len(t, sent, 2)
	byWho := map[string]string{}
	for _, m := range sent {
		byWho[m.Recipient] = content(t, m.Payload)
	}
	require.Contains(t, byWho["wangfang"], "王芳，30 位客户待跟进")
	for i := range 30 {
		require.Contains(t, byWho["wangfang"], fmt.Sprintf("%d. 客户%02d：确认报价", i+1, i+1))
	}
	require.Equal(t, "李娜，请跟进客户「华东机电」：按约定跟进", byWho["lina"])
}

// TestFollowUpDigestFitsWeCom: WeCom takes at most 2048 bytes of markdown
// content in an app message (the wecom channel refuses more rather than
// let WeCom cut it). The example's digest listed every customer, so an
// owner with 40 reminders with real company names and notes (the engine
// folds up to 100) got a digest WeCom refused: all of them failed.
func TestFollowUpDigestFitsWeCom(t *testing.T) {
	t.Parallel()
	s := load(t, exampleCopies(t, "follow_up.lua", "people.csv"))
	slot := mustTime(t, "2026-12-01T09:00:00+08:00")
	for _, n := range []int{2, 30, 100} {
		items := make([]engine.DigestItem, n)
		for i := range items {
			items[i] = engine.DigestItem{ID: fmt.Sprintf("d%03d", i), RunKey: fmt.Sprintf("task:f-%d", i), Slot: slot, Zone: "Asia/Shanghai",
				Data: []byte(fmt.Sprintf(`{"owner":"wangfang","customer":"上海华东精密机械设备有限公司%d","note":"确认第四季度报价单与交货时间"}`, i))}
		}
		payload, err := s.Digest(context.Background(), "follow_up", "wangfang", items)
		require.NoError(t, err)
		var body struct{ Msgtype, Content string }
		require.NoError(t, json.Unmarshal(payload, &body))
		require.LessOrEqual(t, len(body.Content), 2048, "%d items: %d bytes", n, len(body.Content))
		require.Contains(t, body.Content, fmt.Sprintf("%d 位客户待跟进", n))
		require.Contains(t, body.Content, "上海华东精密机械设备有限公司0", "the first ones are listed")
		if n == 100 {
			require.Contains(t, body.Content, "另有", "says how many are not listed")
		}
	}
}
