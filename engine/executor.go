package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// maxDuePerPass bounds how many due deliveries one executor pass considers.
const maxDuePerPass = 10000

// retryFailedProposal is how soon a pass looks again after a Claim or an
// Expire failed to replicate: what it was for is due now, and in a quiet
// cluster no state change would wake the executor before the minute is up.
const retryFailedProposal = time.Second

// maxRefusals: after this many rate-limit refusals in a row on one channel
// and priority, a pass stops asking for that pair (per-recipient limits
// may refuse a few; a full channel refuses all, and a backlog of 10,000
// would otherwise cost 10,000 calls each pass).
const maxRefusals = 64

type chanPrio struct {
	channel string
	p       Priority
}

// executor sends due deliveries: it admits them through the channel's rate
// limits, claims a batch through the log, confirms leadership, sends, and
// replicates the results. It lives only while its node leads.
type executor struct {
	l        *Leader
	mu       sync.Mutex
	inflight map[string]bool // ids claimed by this leader and not yet settled
	sends    chan struct{}   // bounds claim groups in flight (MaxSends)
	// sendSlots bounds the channel batches in flight across groups
	// (SendConcurrency).
	sendSlots chan struct{}
	done      chan struct{} // signalled when a batch settles
	wg        sync.WaitGroup
	// resend holds deliveries an older leader claimed and never settled:
	// this leader sends them again at once, with the same key.
	resend []*Delivery
	// plain holds deliveries of digest rules whose digest could not be
	// built: they go one by one.
	plain map[string]bool
}

func newExecutor(l *Leader) *executor {
	return &executor{
		l:         l,
		inflight:  map[string]bool{},
		plain:     map[string]bool{},
		sends:     make(chan struct{}, l.cfg.MaxSends),
		sendSlots: make(chan struct{}, l.cfg.SendConcurrency),
		done:      make(chan struct{}, 1),
	}
}

func (x *executor) run(ctx context.Context) {
	defer x.wg.Wait()
	x.resend = x.l.cfg.FSM.InFlight()
	for {
		next := x.runOnce(ctx)
		if !wait(ctx, next, x.l.now(), x.l.cfg.FSM.Changed(), x.done) {
			return
		}
	}
}

// runOnce acts on everything due now and returns when to look again.
func (x *executor) runOnce(ctx context.Context) time.Time {
	now := x.l.now()
	wake := now.Add(time.Minute)
	resend := x.resend
	x.resend = nil
	// Read before the due deliveries: see digestHold.
	hold := x.digestHold(now)
	due := append(x.l.cfg.FSM.Due(now, maxDuePerPass), resend...)
	due, foldFailed := x.foldDigests(ctx, due, now, hold)

	var expired []string
	batches := map[string][]*Delivery{}
	fairOrder(due)
	seen := map[string]bool{}
	refused := map[chanPrio]int{}
	// Claims are proposed as their groups fill, while the pass goes on
	// (Raft appends the proposals waiting at once as one batch), and the
	// pass returns once all of them committed or failed; the sends go on
	// in the background. A pass's first group on a channel is one batch:
	// a slot's first messages leave after the smallest entry, not after
	// a thousand claims are applied.
	var claiming sync.WaitGroup
	var claimFailed atomic.Bool
	firstGroup := map[string]bool{}
	dispatch := func(ch string, group []*Delivery) bool {
		select {
		case x.sends <- struct{}{}:
		case <-ctx.Done():
			claimFailed.Store(true)
			return false
		}
		claiming.Add(1)
		x.wg.Go(func() { x.claimAndSend(ctx, ch, group, claiming.Done, &claimFailed) })
		return true
	}
	for _, d := range due {
		if ctx.Err() != nil {
			claimFailed.Store(true)
			break
		}
		if seen[d.ID] || x.isInflight(d.ID) {
			continue
		}
		seen[d.ID] = true
		if !d.Deadline.IsZero() && !now.Before(d.Deadline) {
			expired = append(expired, d.ID)
			continue
		}
		cp := chanPrio{d.Channel, d.Priority}
		if refused[cp] >= maxRefusals {
			continue // the channel is full for this priority: ask again at wake
		}
		if wait := x.l.cfg.Sender.Admit(d.Channel, d.Recipient, d.Priority, now); wait > 0 {
			refused[cp]++
			if at := now.Add(wait); at.Before(wake) {
				wake = at
			}
			continue
		}
		refused[cp] = 0
		group := append(batches[d.Channel], d)
		size := x.l.cfg.ClaimBatch
		if !firstGroup[d.Channel] {
			size = min(x.l.cfg.BatchSize, size)
		}
		if len(group) < size {
			batches[d.Channel] = group
			continue
		}
		firstGroup[d.Channel] = true
		batches[d.Channel] = nil
		if !dispatch(d.Channel, group) {
			break
		}
	}
	for ch, group := range batches {
		if len(group) > 0 && !dispatch(ch, group) {
			break
		}
	}
	failed := foldFailed
	if len(expired) > 0 {
		if _, err := x.l.propose(ctx, CmdExpire, Expire{IDs: expired, Now: now}); err != nil {
			x.l.log.Warn("cannot expire deliveries", "n", len(expired), "err", err)
			failed = true
		}
	}
	claiming.Wait()
	if claimFailed.Load() {
		failed = true
	}
	if at := now.Add(retryFailedProposal); failed && at.Before(wake) {
		wake = at
	}
	// An older term's claim that this pass could not take over (rate
	// limited, claim failed) stays to be resent: the due index would show
	// it again only when the old claim runs out.
	for _, d := range resend {
		if cur, ok := x.l.cfg.FSM.Delivery(d.ID); ok && cur.State == StateClaimed && cur.Claim.Seq == d.Claim.Seq {
			x.resend = append(x.resend, cur)
		}
	}
	// What is due already but could not go (rate limited, in flight) is
	// looked at again at the waits above or when the state changes; the
	// index's minimum is due now and would make this loop spin.
	if at, ok := x.l.cfg.FSM.NextDue(); ok && at.After(now) && at.Before(wake) {
		wake = at
	}
	return wake
}

func (x *executor) isInflight(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.inflight[id]
}

// claimAndSend claims a group of deliveries in one log entry and sends
// what was claimed. It holds one of x.sends, which it gives back when the
// group is settled; claimed is called once the claim committed (or
// failed), and failed is set if it failed.
func (x *executor) claimAndSend(ctx context.Context, channel string, ds []*Delivery, claimed func(), failed *atomic.Bool) {
	ids := make([]string, len(ds))
	byID := make(map[string]*Delivery, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
		byID[d.ID] = d
	}
	res, err := x.l.propose(ctx, CmdClaim, ClaimDeliveries{IDs: ids, Leader: x.l.cfg.NodeID, Now: x.l.now(), Timeout: x.l.cfg.ClaimTimeout})
	if err != nil {
		failed.Store(true)
		claimed()
		<-x.sends
		x.l.log.Warn("claim failed", "channel", channel, "n", len(ids), "err", err)
		return
	}
	got := res.(ClaimResult).Claimed
	if len(got) == 0 {
		claimed()
		<-x.sends
		return
	}
	x.mu.Lock()
	for _, c := range got {
		x.inflight[c.ID] = true
	}
	x.mu.Unlock()
	claimed()
	defer func() {
		x.mu.Lock()
		for _, c := range got {
			delete(x.inflight, c.ID)
		}
		x.mu.Unlock()
		<-x.sends
		select {
		case x.done <- struct{}{}:
		default:
		}
	}()
	x.send(ctx, channel, got, byID)
}

// send confirms leadership once for the claimed group, sends it in batches
// of BatchSize (up to SendConcurrency batches in flight across groups) and
// replicates all their results in one entry. If leadership is lost,
// nothing is recorded: the claims become ambiguous and the next leader
// sends them again with the same keys.
func (x *executor) send(ctx context.Context, channel string, claimed []Claimed, byID map[string]*Delivery) {
	if err := x.l.cfg.Replicator.VerifyLeader(ctx); err != nil {
		x.l.log.Warn("not sending: leadership not confirmed", "channel", channel, "err", err)
		// Nothing was sent. If this node still leads (a quorum that was
		// slow to answer), hand the claims back at once, spending no
		// attempt, rather than leave them to time out as ambiguous; if it
		// does not, this proposal fails and the next leader takes over.
		if ctx.Err() == nil {
			results := make([]Result, len(claimed))
			for i, c := range claimed {
				results[i] = Result{ID: c.ID, Seq: c.Seq, Status: OutcomeRateLimited, RetryAfter: time.Second,
					Error: "not sent: leadership not confirmed"}
			}
			if _, err := x.l.propose(ctx, CmdRecordResults, RecordResults{Leader: x.l.cfg.NodeID, Now: x.l.now(), Results: results}); err != nil {
				x.l.log.Warn("cannot hand the claims back; they will time out and go again with the same keys", "channel", channel, "err", err)
			}
		}
		return
	}
	claimed = x.holdPaused(ctx, channel, claimed, byID)
	if len(claimed) == 0 {
		return
	}
	// A send may not outlive its claim: past it, the deliveries are
	// claimable again and would go twice at once.
	sctx, cancel := context.WithTimeout(ctx, x.l.cfg.ClaimTimeout)
	defer cancel()
	var (
		mu            sync.Mutex
		results       = make([]Result, 0, len(claimed))
		stuckLost     int // messages of batches stuck past the claim, unanswered
		stuckAnswered int // answered, but only after the claim ran out
		wg            sync.WaitGroup
	)
	for part := range x.batches(claimed, byID) {
		select {
		case x.sendSlots <- struct{}{}:
		case <-sctx.Done():
		}
		if sctx.Err() != nil {
			// Not sent: its claims run out and it goes again, same keys.
			mu.Lock()
			stuckLost += len(part)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			defer func() { <-x.sendSlots }()
			rs, lost, late := x.sendBatch(sctx, channel, part, byID)
			mu.Lock()
			defer mu.Unlock()
			results = append(results, rs...)
			stuckLost += lost
			stuckAnswered += late
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	if stuckLost > 0 {
		x.l.log.Warn("send stuck past its claim; it will be sent again with the same keys", "channel", channel, "n", stuckLost)
		x.l.raise(ctx, NewRaiseAlert(AlertCause{AlertSendStuck, channel}, "", AlertParams{Channel: channel, Count: stuckLost, Late: x.l.cfg.ClaimTimeout},
			fmt.Sprintf("%d message(s) on channel %s were still in flight after %s; they will be sent again with the same idempotency keys",
				stuckLost, channel, x.l.cfg.ClaimTimeout), x.l.now()))
	}
	if stuckAnswered > 0 {
		// They outlived their claim, but the channel answered: record
		// that, rather than send them again.
		x.l.log.Warn("send answered only after its claim ran out", "channel", channel, "n", stuckAnswered)
		x.l.raise(ctx, NewRaiseAlert(AlertCause{AlertSendStuck, channel}, "", AlertParams{Channel: channel, Count: stuckAnswered, Late: x.l.cfg.ClaimTimeout},
			fmt.Sprintf("%d message(s) on channel %s were answered only after %s, when their claim had run out",
				stuckAnswered, channel, x.l.cfg.ClaimTimeout), x.l.now()))
	}
	if len(results) == 0 {
		return
	}
	if _, err := x.l.propose(ctx, CmdRecordResults, RecordResults{Leader: x.l.cfg.NodeID, Now: x.l.now(), Results: results}); err != nil {
		x.l.log.Warn("cannot record results; claims will time out and be resent with the same keys", "channel", channel, "err", err)
	}
}

// batches cuts a claimed group into the batches handed to the channel: at
// most BatchSize messages and, past the first, MaxBatchBytes of payload
// (a batch is one plugin call, one message of the plugin protocol).
func (x *executor) batches(claimed []Claimed, byID map[string]*Delivery) iter.Seq[[]Claimed] {
	return func(yield func([]Claimed) bool) {
		start, size := 0, 0
		for i, c := range claimed {
			n := len(byID[c.ID].Payload)
			if i > start && (i-start == x.l.cfg.BatchSize || size+n > MaxBatchBytes) {
				if !yield(claimed[start:i]) {
					return
				}
				start, size = i, 0
			}
			size += n
		}
		if start < len(claimed) {
			yield(claimed[start:])
		}
	}
}

// sendBatch hands one batch to the channel and turns its answer into
// results. lost counts the messages of a batch that was stuck past its
// claim without an answer (no results: they go again with the same keys);
// late those answered only after the claim ran out (results recorded).
func (x *executor) sendBatch(sctx context.Context, channel string, claimed []Claimed, byID map[string]*Delivery) (results []Result, lost, late int) {
	batch := make([]Outgoing, len(claimed))
	for i, c := range claimed {
		d := byID[c.ID]
		batch[i] = Outgoing{ID: d.ID, IdempotencyKey: d.ID, Recipient: d.Recipient, Payload: d.Payload, Priority: d.Priority, Attempt: c.Attempt}
	}
	outs, err := x.l.cfg.Sender.Send(sctx, channel, batch)
	stuck := errors.Is(sctx.Err(), context.DeadlineExceeded)
	if stuck && err != nil {
		return nil, len(batch), 0
	}
	if stuck {
		late = len(batch)
	}
	byOut := make(map[string]Outcome, len(outs))
	for _, o := range outs {
		byOut[o.ID] = o
	}
	results = make([]Result, 0, len(claimed))
	for _, c := range claimed {
		o, ok := byOut[c.ID]
		switch {
		case err != nil:
			o = Outcome{Status: OutcomeRetryable, Error: "channel " + channel + ": " + err.Error()}
		case !ok:
			o = Outcome{Status: OutcomeRetryable, Error: "channel " + channel + " returned no result for this message"}
		case o.Status < OutcomeSent || o.Status > OutcomeConfig:
			// A bad plugin answer fails this message's attempt, never the node.
			o = Outcome{Status: OutcomeRetryable, Error: "channel " + channel + " returned an unknown status"}
		}
		results = append(results, Result{ID: c.ID, Seq: c.Seq, Status: o.Status, ProviderID: o.ProviderID, RetryAfter: o.RetryAfter, Code: o.Code, Error: o.Error})
	}
	return results, 0, late
}

// fairOrder orders due deliveries by priority and, within a priority,
// round-robin across runs (each run's own in due order): the first of
// every run, then the second of every run, and so on. One huge run then
// takes its turn beside a small rule's slot instead of ahead of it.
func fairOrder(due []*Delivery) {
	slices.SortStableFunc(due, func(a, b *Delivery) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return a.dueAt().Compare(b.dueAt())
	})
	type runPrio struct {
		run string
		p   Priority
	}
	rank := make(map[*Delivery]int, len(due))
	next := map[runPrio]int{}
	for _, d := range due {
		k := runPrio{d.RunKey, d.Priority}
		rank[d] = next[k]
		next[k]++
	}
	slices.SortStableFunc(due, func(a, b *Delivery) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return cmp.Compare(rank[a], rank[b])
	})
}

// holdPaused hands back, unsent and spending no attempt, the claims of
// rules paused after the batch was claimed (the pause committed between
// the claim and the send), and returns the rest. Handed back, they are
// pending and held: out of the due index until the rule is resumed.
func (x *executor) holdPaused(ctx context.Context, channel string, claimed []Claimed, byID map[string]*Delivery) []Claimed {
	var send []Claimed
	var back []Result
	for _, c := range claimed {
		if _, paused := x.l.cfg.FSM.Paused(byID[c.ID].Rule); paused {
			back = append(back, Result{ID: c.ID, Seq: c.Seq, Status: OutcomeRateLimited, RetryAfter: time.Second, Error: "not sent: rule paused"})
			continue
		}
		send = append(send, c)
	}
	if len(back) > 0 {
		if _, err := x.l.propose(ctx, CmdRecordResults, RecordResults{Leader: x.l.cfg.NodeID, Now: x.l.now(), Results: back}); err != nil {
			x.l.log.Warn("cannot hand back the claims of a paused rule; they time out and are held then", "channel", channel, "err", err)
		}
	}
	return send
}
