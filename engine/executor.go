package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	sends    chan struct{}   // bounds batches in flight
	done     chan struct{}   // signalled when a batch settles
	wg       sync.WaitGroup
	// resend holds deliveries an older leader claimed and never settled:
	// this leader sends them again at once, with the same key.
	resend []*Delivery
	// plain holds deliveries of digest rules whose digest could not be
	// built: they go one by one.
	plain map[string]bool
}

func newExecutor(l *Leader) *executor {
	return &executor{
		l:        l,
		inflight: map[string]bool{},
		plain:    map[string]bool{},
		sends:    make(chan struct{}, l.cfg.MaxSends),
		done:     make(chan struct{}, 1),
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
	slices.SortStableFunc(due, func(a, b *Delivery) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return a.dueAt().Compare(b.dueAt())
	})
	seen := map[string]bool{}
	refused := map[chanPrio]int{}
	for _, d := range due {
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
		batches[d.Channel] = append(batches[d.Channel], d)
	}
	failed := foldFailed
	if len(expired) > 0 {
		if _, err := x.l.propose(ctx, CmdExpire, Expire{IDs: expired, Now: now}); err != nil {
			x.l.log.Warn("cannot expire deliveries", "n", len(expired), "err", err)
			failed = true
		}
	}
	for ch, ds := range batches {
		for start := 0; start < len(ds); start += x.l.cfg.BatchSize {
			if !x.claimAndSend(ctx, ch, ds[start:min(start+x.l.cfg.BatchSize, len(ds))]) {
				failed = true
			}
		}
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

// claimAndSend claims a batch through the log and, for what was claimed,
// sends it in the background. It returns false if the claim failed.
func (x *executor) claimAndSend(ctx context.Context, channel string, ds []*Delivery) bool {
	ids := make([]string, len(ds))
	byID := make(map[string]*Delivery, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
		byID[d.ID] = d
	}
	select {
	case x.sends <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	res, err := x.l.propose(ctx, CmdClaim, ClaimDeliveries{IDs: ids, Leader: x.l.cfg.NodeID, Now: x.l.now(), Timeout: x.l.cfg.ClaimTimeout})
	if err != nil {
		<-x.sends
		x.l.log.Warn("claim failed", "channel", channel, "n", len(ids), "err", err)
		return false
	}
	claimed := res.(ClaimResult).Claimed
	if len(claimed) == 0 {
		<-x.sends
		return true
	}
	x.mu.Lock()
	for _, c := range claimed {
		x.inflight[c.ID] = true
	}
	x.mu.Unlock()
	x.wg.Go(func() {
		defer func() {
			x.mu.Lock()
			for _, c := range claimed {
				delete(x.inflight, c.ID)
			}
			x.mu.Unlock()
			<-x.sends
			select {
			case x.done <- struct{}{}:
			default:
			}
		}()
		x.send(ctx, channel, claimed, byID)
	})
	return true
}

// send confirms leadership, sends the claimed batch and replicates the
// results. If leadership is lost, nothing is recorded: the claims become
// ambiguous and the next leader sends them again with the same keys.
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
	batch := make([]Outgoing, len(claimed))
	seqs := make(map[string]int, len(claimed))
	for i, c := range claimed {
		d := byID[c.ID]
		batch[i] = Outgoing{ID: d.ID, IdempotencyKey: d.ID, Recipient: d.Recipient, Payload: d.Payload, Priority: d.Priority, Attempt: c.Attempt}
		seqs[c.ID] = c.Seq
	}
	// A send may not outlive its claim: past it, the deliveries are
	// claimable again and would go twice at once.
	sctx, cancel := context.WithTimeout(ctx, x.l.cfg.ClaimTimeout)
	outs, err := x.l.cfg.Sender.Send(sctx, channel, batch)
	stuck := errors.Is(sctx.Err(), context.DeadlineExceeded)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if stuck && err != nil {
		x.l.log.Warn("send stuck past its claim; it will be sent again with the same keys", "channel", channel, "n", len(batch))
		x.l.raise(ctx, RaiseAlert{Cause: "stuck:" + channel, Message: fmt.Sprintf(
			"a batch of %d on channel %s was still in flight after %s; it will be sent again with the same idempotency keys",
			len(batch), channel, x.l.cfg.ClaimTimeout), Now: x.l.now()})
		return
	}
	if stuck {
		// It outlived its claim, but the channel answered: record that,
		// rather than send the batch again.
		x.l.log.Warn("send answered only after its claim ran out", "channel", channel, "n", len(batch))
		x.l.raise(ctx, RaiseAlert{Cause: "stuck:" + channel, Message: fmt.Sprintf(
			"a batch of %d on channel %s was answered only after %s, when its claim had run out",
			len(batch), channel, x.l.cfg.ClaimTimeout), Now: x.l.now()})
	}
	byOut := make(map[string]Outcome, len(outs))
	for _, o := range outs {
		byOut[o.ID] = o
	}
	results := make([]Result, 0, len(claimed))
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
		results = append(results, Result{ID: c.ID, Seq: seqs[c.ID], Status: o.Status, ProviderID: o.ProviderID, RetryAfter: o.RetryAfter, Code: o.Code, Error: o.Error})
	}
	if _, err := x.l.propose(ctx, CmdRecordResults, RecordResults{Leader: x.l.cfg.NodeID, Now: x.l.now(), Results: results}); err != nil {
		x.l.log.Warn("cannot record results; claims will time out and be resent with the same keys", "channel", channel, "err", err)
	}
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
