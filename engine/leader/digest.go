package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/heraldhq/herald/engine"
)

// The executor's half of digests: grouping the due deliveries of a digest
// rule, building each group's message outside Apply and proposing
// FoldDigest. It reads the clock and calls the rules, so it is apart from
// the appliers in digest.go (the state side), ready to leave the package
// with the executor.

// maxDigestItems bounds the deliveries one digest folds: a person with
// more in one window gets several digests (a message has a size limit).
const maxDigestItems = 100

// maxFoldsPerPass bounds the digests one executor pass folds (each a rule
// call and a proposal): at a window's end with many people's digests, the
// pass then claims what else is due after a few rounds, not after all the
// folds; the next pass folds on.
const maxFoldsPerPass = 64

// digestGroup is the deliveries of one rule to one person due together.
type digestGroup struct {
	rule, recipient, channel string
	at                       time.Time
	members                  []*engine.Delivery
}

// foldDigests folds, among the due deliveries, those of digest rules that
// wait for the end of the same window for the same person, and returns
// what is due after the folds: the digests instead of their members.
// A group whose digest cannot be built (the rule failed, or its message
// returned nil) goes out as plain messages, once per leader and group.
//
// cut says that due is only part of what is due (the pass's limit): the
// groups are then completed from the due index (completeDigestGroups).
func (x *executor) foldDigests(ctx context.Context, due []*engine.Delivery, now time.Time, inbound *digestInbound, cut bool) (out []*engine.Delivery, failed bool) {
	b, ok := x.l.cfg.Rules.(engine.DigestBuilder)
	if !ok || inbound == nil {
		return due, false
	}
	x.sweepPlain()
	windows := inbound.windows
	foldable := func(d *engine.Delivery) bool {
		w := windows[d.Rule]
		return w > 0 && d.State == engine.StatePending && d.Attempts == 0 && d.Retries == 0 && d.Digest == "" && len(d.Members) == 0 &&
			d.NotBefore.UnixNano()%int64(w) == 0 && (d.Deadline.IsZero() || now.Before(d.Deadline)) && !x.plain[d.ID]
	}
	groups := map[string]*digestGroup{}
	grouped := map[string]bool{}
	var keys []string
	add := func(d *engine.Delivery) {
		k := d.Rule + "\x00" + d.Recipient + "\x00" + d.Channel + "\x00" + d.NotBefore.UTC().Format(time.RFC3339Nano)
		g := groups[k]
		if g == nil {
			g = &digestGroup{rule: d.Rule, recipient: d.Recipient, channel: d.Channel, at: d.NotBefore}
			groups[k] = g
			keys = append(keys, k)
		}
		g.members = append(g.members, d)
		grouped[d.ID] = true
	}
	out = due[:0:0]
	for _, d := range due {
		switch {
		case grouped[d.ID]: // Due lists each once; a fold must never take one twice
		case foldable(d):
			add(d)
		default:
			out = append(out, d)
		}
	}
	var walked map[int64]bool
	if cut {
		walked = x.completeDigestGroups(groups, inbound, now, func(d *engine.Delivery) {
			if foldable(d) && !grouped[d.ID] {
				add(d)
			}
		})
	}
	slices.Sort(keys)
	var jobs []foldJob
	for _, k := range keys {
		g := groups[k]
		if inbound.waits(g, now) {
			failed = true // looked at again within a second, or when the plan lands
			delete(walked, g.at.UnixNano())
			continue
		}
		// Every leader orders and cuts a group the same way: by slot, run
		// key and id.
		slices.SortFunc(g.members, func(a, b *engine.Delivery) int {
			return cmp.Or(a.Slot.Compare(b.Slot), cmp.Compare(a.RunKey, b.RunKey), cmp.Compare(a.ID, b.ID))
		})
		for start := 0; start < len(g.members); start += maxDigestItems {
			part := g.members[start:min(start+maxDigestItems, len(g.members))]
			switch {
			case len(part) < 2:
				out = append(out, part...) // alone in its window: the plain message
			case len(jobs) == maxFoldsPerPass:
				// The next pass (woken by these folds) folds it; its
				// members wait, and its instant is walked again.
				failed = true
				delete(walked, g.at.UnixNano())
			default:
				jobs = append(jobs, foldJob{g: g, part: part})
			}
		}
	}
	x.foldAll(ctx, b, jobs)
	for _, j := range jobs {
		switch {
		case j.err != nil && ctx.Err() == nil:
			x.l.log.Warn("cannot fold a digest; will try again", "rule", j.g.rule, "recipient", j.g.recipient, "err", j.err)
			failed = true
			delete(walked, j.g.at.UnixNano())
		case j.err != nil:
		case j.dg == nil: // sent one by one, by this leader from now on
			for _, m := range j.part {
				x.plain[m.ID] = true
			}
			out = append(out, j.part...)
		default:
			out = append(out, j.dg)
		}
	}
	for at := range walked {
		x.walkedDigests[at] = true
	}
	return out, failed
}

// plainSweepMin is how many plain marks the executor holds before it first
// sweeps them; it sweeps again each time they double.
const plainSweepMin = 1024

// sweepPlain forgets the plain marks of deliveries that ended, were
// attempted, were retried by hand or are gone: a pass folds only pending
// deliveries never attempted nor retried, so the mark is needed no more
// (one in flight keeps it: a rate limit hands it back unattempted). Without it a leader kept one for
// every message of a rule whose digest.message returns nil, as long as it
// led.
func (x *executor) sweepPlain() {
	if len(x.plain) < max(2*x.plainKept, plainSweepMin) {
		return
	}
	for id := range x.plain {
		if d, ok := x.l.cfg.FSM.Delivery(id); !ok || d.State.Final() || d.Attempts > 0 || d.Retries > 0 {
			delete(x.plain, id)
		}
	}
	x.plainKept = len(x.plain)
}

// completeDigestGroups adds to groups, through add, the deliveries due at
// each of their instants that a pass's limit left out. A window's members
// are all due at its end, with whatever else is due then, and the due
// index orders an instant by id: a pass that takes its first 2,000 would
// otherwise split most people's digests, and each part would go on its own
// (a part of one as a plain message). An instant is walked once: the
// groups found there are folded in this pass, and what is alone there
// goes plain. It returns the instants walked; foldDigests remembers those
// whose groups all folded (walkedDigests), forgetting them after an hour.
func (x *executor) completeDigestGroups(groups map[string]*digestGroup, inbound *digestInbound, now time.Time, add func(*engine.Delivery)) map[int64]bool {
	for at := range x.walkedDigests {
		if at < now.Add(-time.Hour).UnixNano() {
			delete(x.walkedDigests, at)
		}
	}
	walk := map[int64]time.Time{}
	for _, g := range groups {
		if at := g.at.UnixNano(); !x.walkedDigests[at] && !inbound.waits(g, now) {
			walk[at] = g.at
		}
	}
	walked := make(map[int64]bool, len(walk))
	for n, at := range walk {
		for _, d := range x.l.cfg.FSM.DueAt(at) {
			add(d)
		}
		walked[n] = true
	}
	return walked
}

// digestSettle is how long past its window's end a digest waits for runs
// of its rule still being fired or planned, at most: a run stuck planning
// must not delay the others' messages for long.
const digestSettle = time.Minute

// digestInbound is what may still add deliveries to a digest group: the
// due tasks of digest rules not fired yet, and their runs still planning.
// It is read before the due deliveries (tasks, then runs, then
// deliveries, each later in the life of a message than the one before),
// so a delivery missing from the due list shows up here, and a group is
// never folded without a member that was on its way.
type digestInbound struct {
	windows  map[string]time.Duration // digest rules and their windows
	planning []*engine.Run
	tasks    []*engine.Task
}

// digestInbound reads what is inbound at now; nil when no rule has a digest.
func (x *executor) digestInbound(now time.Time) *digestInbound {
	h := &digestInbound{windows: map[string]time.Duration{}}
	for _, r := range x.l.cfg.Rules.Rules() {
		if r.Digest > 0 {
			h.windows[r.Name] = r.Digest
		}
	}
	if len(h.windows) == 0 {
		return nil
	}
	for _, t := range x.l.cfg.FSM.DueTasks(now, maxTasksPerPass) {
		if h.windows[t.Rule] > 0 {
			h.tasks = append(h.tasks, t)
		}
	}
	for _, r := range x.l.cfg.FSM.PlanningRuns() {
		if h.windows[r.Rule] > 0 {
			h.planning = append(h.planning, r)
		}
	}
	return h
}

// waits reports whether g must wait: a task of its rule due before the
// window's end has not fired, or a run of its rule whose slot is before
// the window's end is still planning; their deliveries would belong in it.
// Not past digestSettle after the window's end: a run stuck planning must
// not delay the others' messages for long.
func (h *digestInbound) waits(g *digestGroup, now time.Time) bool {
	if !now.Before(g.at.Add(digestSettle)) {
		return false
	}
	for _, r := range h.planning {
		if r.Rule == g.rule && r.Slot.Before(g.at) {
			return true
		}
	}
	for _, t := range h.tasks {
		if t.Rule == g.rule && t.DueAt.Before(g.at) {
			return true
		}
	}
	return false
}

// foldJob is one digest a pass folds, and what came of it.
type foldJob struct {
	g    *digestGroup
	part []*engine.Delivery
	dg   *engine.Delivery
	err  error
}

// foldPipeline is how many folds of a pass are in flight at once: their
// rule calls run side by side (the rules keep a pool of states) and Raft
// appends the proposals waiting together as one batch.
const foldPipeline = 8

// foldAll folds the jobs, up to foldPipeline at once.
func (x *executor) foldAll(ctx context.Context, b engine.DigestBuilder, jobs []foldJob) {
	slots := make(chan struct{}, foldPipeline)
	var wg sync.WaitGroup
	for i := range jobs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			j := &jobs[i]
			j.dg, j.err = x.fold(ctx, b, j.g, j.part)
		})
	}
	wg.Wait()
}

// fold builds and proposes one digest. It returns nil and no error when
// the group is to go as plain messages (the caller marks them plain). It
// runs beside other folds: it touches no executor state.
func (x *executor) fold(ctx context.Context, b engine.DigestBuilder, g *digestGroup, part []*engine.Delivery) (*engine.Delivery, error) {
	ids := make([]string, len(part))
	items := make([]engine.DigestItem, len(part))
	for i, d := range part {
		ids[i] = d.ID
		items[i] = engine.DigestItem{ID: d.ID, RunKey: d.RunKey, Slot: d.Slot, Payload: d.Payload}
		if run, ok := x.l.cfg.FSM.Run(d.RunKey); ok {
			items[i].Zone, items[i].Data = run.Zone, run.Data
		}
	}
	id := engine.DigestID(g.rule, g.recipient, ids)
	if d, ok := x.l.cfg.FSM.Delivery(id); ok {
		if d.State.Final() {
			// The same deliveries ended once as this digest and were
			// retried by hand since: they go alone.
			return nil, nil
		}
		return d, nil // folded by an earlier pass whose answer was lost
	}
	bctx, cancel := context.WithTimeout(ctx, x.l.cfg.PlanTimeout)
	payload, err := b.Digest(bctx, g.rule, g.recipient, items)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil || payload == nil {
		if err != nil {
			x.l.raise(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertDigestError, Subject: g.rule}, g.rule,
				engine.AlertParams{Recipient: g.recipient, Count: len(part), Error: err.Error()}, fmt.Sprintf(
					"rule %s could not build the digest of %d messages to %s (%v); they go one by one", g.rule, len(part), g.recipient, err), x.l.now()))
		}
		return nil, nil
	}
	if _, err := x.l.propose(ctx, engine.CmdFoldDigest, engine.FoldDigest{ID: id, Members: ids, Payload: payload, Now: x.l.now()}); err != nil {
		if errors.Is(err, engine.ErrMembersBehind) {
			// A rolling upgrade: a member could not apply the fold. The
			// messages go one by one rather than wait for it.
			x.l.log.Warn("digest not folded: a member runs an older build; sending one by one", "rule", g.rule, "recipient", g.recipient, "err", err)
			return nil, nil
		}
		return nil, err
	}
	d, ok := x.l.cfg.FSM.Delivery(id)
	if !ok {
		return nil, fmt.Errorf("digest %s is not in the state after its fold", id)
	}
	return d, nil
}
