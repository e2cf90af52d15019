package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/heraldhq/herald/engine"
)

// PreviewDigest is one message a digest rule would send instead of
// several: what digest.message built from them.
type PreviewDigest struct {
	ID        string          `json:"id"` // the digest's id and idempotency key
	Recipient string          `json:"recipient"`
	Name      string          `json:"name,omitempty"`
	Zone      string          `json:"zone"`
	At        time.Time       `json:"at"`      // the end of the window, in the recipient's zone
	Members   []string        `json:"members"` // the deliveries it folds
	Payload   json.RawMessage `json:"payload"` // nil: digest.message returned nil, they go one by one
}

// PreviewTasks previews an API-task rule as if one task per entry of data
// (each a task's data object) fell due at at: every task's messages, and,
// for a rule with a digest, the digests they would be folded into (a
// person with two or more messages at the end of one window). Run keys are
// task:preview-1, task:preview-2, ….
func (s *Set) PreviewTasks(ctx context.Context, name string, at time.Time, data []json.RawMessage) (PreviewResult, error) {
	if len(data) == 0 {
		return PreviewResult{}, fmt.Errorf("%w: give at least one task's data", ErrPreviewData)
	}
	res, err := s.Preview(ctx, name, at, data[0])
	if err != nil || len(data) == 1 && res.Digest == 0 {
		return res, err
	}
	v := s.cur.Load()
	c := v.rules[name]
	if c.sched != nil {
		return res, fmt.Errorf("rule %s has a schedule: only rules fired by API tasks preview several tasks", name)
	}
	res.RunKey = ""
	res.Deliveries = res.Deliveries[:0]
	var task []int // the task each delivery is of
	for i, d := range data {
		if err := checkPreviewData(d); err != nil {
			return res, fmt.Errorf("task %d: %w", i+1, err)
		}
		key := engine.TaskRunKey(fmt.Sprintf("%s-%d", PreviewTaskKey, i+1))
		ds, err := s.previewRun(ctx, v, c, key, at.In(location(c.rule.Timezone)), zoneName(c.rule.Timezone), d)
		if err != nil {
			return res, fmt.Errorf("task %d: %w", i+1, err)
		}
		for range ds {
			task = append(task, i)
		}
		res.Deliveries = append(res.Deliveries, ds...)
	}
	if c.rule.Digest > 0 {
		if res.Digests, err = s.previewDigests(ctx, name, at, res.Deliveries, task, data); err != nil {
			return res, err
		}
	}
	slices.SortStableFunc(res.Deliveries, func(a, b PreviewDelivery) int { return a.At.Compare(b.At) })
	return res, nil
}

// previewDigests folds ds (ds[i] planned for the task with data
// data[task[i]], due at at) as the leader would: by recipient and release
// time, two or more to a digest.
func (s *Set) previewDigests(ctx context.Context, rule string, at time.Time, ds []PreviewDelivery, task []int, data []json.RawMessage) ([]PreviewDigest, error) {
	type key struct {
		who string
		at  int64
	}
	groups := map[key][]int{}
	var order []key
	for i, d := range ds {
		if d.Expires {
			continue
		}
		k := key{d.Recipient, d.At.UnixNano()}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var out []PreviewDigest
	for _, k := range order {
		idx := groups[k]
		if len(idx) < 2 {
			continue
		}
		first := ds[idx[0]]
		pd := PreviewDigest{Recipient: first.Recipient, Name: first.Name, Zone: first.Zone, At: first.At}
		items := make([]engine.DigestItem, 0, len(idx))
		for _, i := range idx {
			runKey := engine.TaskRunKey(fmt.Sprintf("%s-%d", PreviewTaskKey, task[i]+1))
			items = append(items, engine.DigestItem{ID: ds[i].ID, RunKey: runKey, Slot: at, Zone: ds[i].Zone, Data: data[task[i]], Payload: ds[i].Payload})
			pd.Members = append(pd.Members, ds[i].ID)
		}
		pd.ID = engine.DigestID(rule, pd.Recipient, pd.Members)
		payload, err := s.Digest(ctx, rule, pd.Recipient, items)
		if err != nil {
			return nil, err
		}
		pd.Payload = payload
		out = append(out, pd)
	}
	return out, nil
}
