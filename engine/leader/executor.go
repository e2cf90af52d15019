package leader

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

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// Defaults of ExecutorConfig.
const (
	BatchSizeDefault       = 200
	ClaimTimeoutDefault    = 30 * time.Second
	MaxSendsDefault        = 8
	ClaimBatchDefault      = 1000
	SendConcurrencyDefault = 16
)

// MaxBatchBytes bounds the payload bytes of one channel batch (past its
// first message): a batch is one message of the plugin protocol, whose
// gRPC limit is 4 MiB.
const MaxBatchBytes = 1 << 20

// ExecutorConfig configures the executor: how due deliveries are claimed
// and sent.
type ExecutorConfig struct {
	BatchSize int // deliveries per Send to a channel; default BatchSizeDefault
	// ClaimBatch is the most deliveries one Claim entry takes (sent in
	// batches of BatchSize after one leadership check, their results
	// recorded in one entry); default ClaimBatchDefault.
	ClaimBatch int
	// SendConcurrency bounds the channel batches in flight at once;
	// default SendConcurrencyDefault.
	SendConcurrency int
	ClaimTimeout    time.Duration // a claim not settled by then is ambiguous; default ClaimTimeoutDefault
	MaxSends        int           // claim groups in flight at once; default MaxSendsDefault
}

func (c *ExecutorConfig) setDefaults() {
	setDefault(&c.BatchSize, BatchSizeDefault)
	setDefault(&c.ClaimTimeout, ClaimTimeoutDefault)
	setDefault(&c.MaxSends, MaxSendsDefault)
	setDefault(&c.ClaimBatch, ClaimBatchDefault)
	setDefault(&c.SendConcurrency, SendConcurrencyDefault)
}

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
	p       heraldtype.Priority
}

// executor sends due deliveries: it admits them through the channel's rate
// limits, claims a batch through the log, confirms leadership, sends, and
// replicates the results. It lives only while its node leads.
type executor struct {
	l        *Leader
	mu       sync.Mutex
	inflight map[string]bool // ids claimed by this leader and not yet settled
	// busyRuns counts per run its messages in inflight: a run with none
	// may use the express lane.
	busyRuns map[string]int
	// lanes bound the claim groups (MaxSends) and the channel batches
	// (SendConcurrency) in flight, in two lanes (lanes.go).
	lanes *lanes
	done  chan struct{} // signalled when a group settles
	wg    sync.WaitGroup
	// limited is set by a pass whose channels refused some of its
	// messages (rate limits): the next pass looks at maxDuePerPass, so
	// that a limited channel's backlog cannot hide another channel's work.
	limited bool
	// resend holds deliveries an older leader claimed and never settled:
	// this leader sends them again at once, with the same key.
	resend []*engine.Delivery
	// plain holds deliveries of digest rules whose digest could not be
	// built: they go one by one. Swept (sweepPlain) of those attempted or
	// ended, which no pass would fold anyway; plainKept is what was left.
	plain     map[string]bool
	plainKept int
	// walkedDigests holds the instants (Unix ns) whose digest groups a
	// pass completed from the due index and folded (completeDigestGroups).
	walkedDigests map[int64]bool
}

func newExecutor(l *Leader) *executor {
	return &executor{
		l:        l,
		inflight: map[string]bool{},
		busyRuns: map[string]int{},
		plain:    map[string]bool{},

		walkedDigests: map[int64]bool{},
		lanes:         newLanes(&l.cfg),
		done:          make(chan struct{}, 1),
	}
}

func (x *executor) run(ctx context.Context) {
	defer x.wg.Wait()
	changed, unsubscribe := x.l.cfg.FSM.Subscribe(engine.AnyChange)
	defer unsubscribe()
	x.resend = x.l.cfg.FSM.InFlight()
	for {
		next := x.runOnce(ctx)
		if !wait(ctx, next, x.l.now(), changed, x.done) {
			return
		}
	}
}

// runOnce acts on everything due now and returns when to look again.
func (x *executor) runOnce(ctx context.Context) time.Time {
	now := x.l.now()
	wake := now.Add(time.Minute)
	if !x.lanes.canOpen(true) {
		// Every group slot is taken, so nothing could go: a group settling
		// (done) starts the next pass. A backlog's results change the state
		// many times a second; each would otherwise cost a walk of the due
		// index for nothing.
		return wake
	}
	resend := x.resend
	x.resend = nil
	// Read before the due deliveries: see digestInbound.
	inbound := x.digestInbound(now)
	// A pass looks at what the free group slots can take (Due adds an
	// eighth of the newest), unless rate limits refused messages last
	// time: in a backlog a group settling frees one slot, and walking and
	// ordering 10,000 due deliveries to fill it was a fifth of the
	// leader's CPU in a 100,000 burst.
	//
	// And at most two groups' worth: the pass at a slot proposes its
	// first claims after ordering 2,000 due deliveries, not 8,000 (some
	// 20 ms on a loaded 2-core machine, most of slot → first send); the
	// passes that follow, woken as those claims apply, fill the other
	// slots.
	limit := maxDuePerPass
	if !x.limited {
		limit = min(limit, min(x.lanes.free(), 2)*x.l.cfg.ClaimBatch)
	}
	x.limited = false
	if !x.lanes.canOpen(false) {
		// Only the express lane has room, for runs with nothing in flight:
		// a slot that just came is among the newest Due adds to its oldest.
		limit = x.l.cfg.ClaimBatch
	}
	due := x.l.cfg.FSM.Due(now, limit)
	cut := len(due) >= limit
	due, foldFailed := x.foldDigests(ctx, append(due, resend...), now, inbound, cut)

	var expired []string
	fairOrder(due)
	seen := map[string]bool{}
	refused := map[chanPrio]int{}
	// Groups are opened as slots are free, never waited for: what finds
	// none is not admitted (its rate-limit token stays for it) and waits
	// for the next pass, which a group settling starts. A pass therefore
	// never blocks behind the sends in flight, and a slot that just came
	// is looked at within a claim's round trip.
	type laneKey struct {
		channel string
		express bool
	}
	open := map[laneKey]*claimGroup{}
	var groups []*claimGroup
	express := map[string]int{} // per run, the messages put in the express lane
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
		k := laneKey{d.Channel, express[d.RunKey] < x.lanes.expressShare && !x.runBusy(d.RunKey)}
		g := open[k]
		if (g == nil || len(g.ds) >= x.l.cfg.ClaimBatch) && !x.lanes.canOpen(k.express) {
			continue // no free group slot: a group settling (done) starts the next pass
		}
		if wait := x.l.cfg.Sender.Admit(d.Channel, d.Recipient, d.Priority, now); wait > 0 {
			refused[cp]++
			x.limited = true
			if at := now.Add(wait); at.Before(wake) {
				wake = at
			}
			continue
		}
		refused[cp] = 0
		if g == nil || len(g.ds) >= x.l.cfg.ClaimBatch {
			g = x.lanes.open(d.Channel, k.express) // canOpen said there is a slot
			open[k] = g
			groups = append(groups, g)
		}
		g.ds = append(g.ds, d)
		if k.express {
			express[d.RunKey]++
		}
	}
	failed := foldFailed
	if suspended, _ := x.l.suspended(); suspended && len(expired) > 0 {
		// Nothing ends by a clock the majority does not share: looked at
		// again soon, expired once the clock agrees.
		expired, failed = nil, true
	}
	if len(expired) > 0 {
		if _, err := x.l.propose(ctx, engine.CmdExpire, engine.Expire{IDs: expired, Now: now}); err != nil {
			x.l.log.Warn("cannot expire deliveries", "n", len(expired), "err", err)
			failed = true
		}
	}
	// Claims are proposed together (Raft appends the proposals waiting at
	// once as one batch) and the pass returns once all of them committed or
	// failed; the sends go on in the background.
	var claiming sync.WaitGroup
	var claimFailed atomic.Bool
	for _, g := range groups {
		claiming.Add(1)
		x.wg.Go(func() { x.claimAndSend(ctx, g, claiming.Done, &claimFailed) })
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
		if cur, ok := x.l.cfg.FSM.Delivery(d.ID); ok && cur.State == engine.StateClaimed && cur.Claim.Seq == d.Claim.Seq {
			x.resend = append(x.resend, cur)
		}
	}
	// What is due already but could not go (rate limited, in flight) is
	// looked at again at the waits above or when the state changes (waking
	// for it now would spin); what becomes due later, at its time, even
	// behind a refused backlog that waits a minute.
	if at, ok := x.l.cfg.FSM.NextDue(now); ok && at.Before(wake) {
		wake = at
	}
	return wake
}

func (x *executor) isInflight(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.inflight[id]
}

// runBusy says whether run has messages in flight.
func (x *executor) runBusy(run string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.busyRuns[run] > 0
}

// claimAndSend claims a group of deliveries in one log entry and sends
// what was claimed. It has taken the group's slot, which it gives back when
// the group is settled; claimed is called once the claim committed (or
// failed), and failed is set if it failed.
func (x *executor) claimAndSend(ctx context.Context, g *claimGroup, claimed func(), failed *atomic.Bool) {
	ids := make([]string, len(g.ds))
	byID := make(map[string]*engine.Delivery, len(g.ds))
	for i, d := range g.ds {
		ids[i] = d.ID
		byID[d.ID] = d
	}
	res, err := x.l.propose(ctx, engine.CmdClaim, engine.ClaimDeliveries{IDs: ids, Leader: x.l.cfg.NodeID, Now: x.l.now(), Timeout: x.l.cfg.ClaimTimeout})
	if err != nil {
		failed.Store(true)
		claimed()
		g.close()
		x.l.log.Warn("claim failed", "channel", g.channel, "n", len(ids), "err", err)
		return
	}
	got := res.(engine.ClaimResult).Claimed
	if len(got) == 0 {
		claimed()
		g.close()
		return
	}
	x.mu.Lock()
	for _, c := range got {
		x.inflight[c.ID] = true
		x.busyRuns[byID[c.ID].RunKey]++
	}
	x.mu.Unlock()
	claimed()
	defer func() {
		x.mu.Lock()
		for _, c := range got {
			delete(x.inflight, c.ID)
			run := byID[c.ID].RunKey
			if x.busyRuns[run]--; x.busyRuns[run] <= 0 {
				delete(x.busyRuns, run)
			}
		}
		x.mu.Unlock()
		g.close()
		select {
		case x.done <- struct{}{}:
		default:
		}
	}()
	x.send(ctx, g, got, byID)
}

// send confirms leadership once for the claimed group, sends it in batches
// of BatchSize (up to SendConcurrency batches in flight across groups, in
// the group's lane) and replicates all their results in one entry. If
// leadership is lost, nothing is recorded: the claims become ambiguous
// and the next leader sends them again with the same keys.
func (x *executor) send(ctx context.Context, g *claimGroup, claimed []engine.Claimed, byID map[string]*engine.Delivery) {
	channel := g.channel
	if err := x.l.cfg.Replicator.VerifyLeader(ctx); err != nil {
		x.l.log.Warn("not sending: leadership not confirmed", "channel", channel, "err", err)
		// Nothing was sent. If this node still leads (a quorum that was
		// slow to answer), hand the claims back at once, spending no
		// attempt, rather than leave them to time out as ambiguous; if it
		// does not, this proposal fails and the next leader takes over.
		if ctx.Err() == nil {
			results := make([]engine.Settlement, len(claimed))
			for i, c := range claimed {
				results[i] = handBack(c, "leadership not confirmed")
			}
			if err := x.record(ctx, results); err != nil {
				x.l.log.Warn("cannot hand the claims back; they will time out and go again with the same keys", "channel", channel, "err", err)
			}
		}
		return
	}
	// A send may not outlive its claim: past it, the deliveries are
	// claimable again and would go twice at once.
	sctx, cancel := context.WithTimeout(ctx, x.l.cfg.ClaimTimeout)
	defer cancel()
	var (
		mu            sync.Mutex
		results       = make([]engine.Settlement, 0, len(claimed))
		stuckLost     int // messages of batches stuck past the claim, unanswered
		stuckAnswered int // answered, but only after the claim ran out
		wg            sync.WaitGroup
	)
	for part := range x.batches(claimed, byID) {
		slot := x.lanes.sendSlot(g, sctx.Done())
		if slot != nil && sctx.Err() != nil {
			<-slot
			slot = nil
		}
		if slot == nil {
			// Not sent: its claims run out and it goes again, same keys;
			// but a paused rule's claims are handed back and parked, as
			// they would be had the batch got its slot.
			part, back := x.parkPaused(part, byID)
			mu.Lock()
			results = append(results, back...)
			stuckLost += len(part)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			defer func() { <-slot }()
			// Looked at as the batch goes, not when the group was
			// claimed: a pause that committed while it waited for its
			// slot parks it.
			part, back := x.parkPaused(part, byID)
			var rs []engine.Settlement
			var lost, late int
			if len(part) > 0 {
				rs, lost, late = x.sendBatch(sctx, channel, part, byID)
			}
			mu.Lock()
			defer mu.Unlock()
			results = append(append(results, back...), rs...)
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
		x.l.raise(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertSendStuck, Subject: channel}, "", engine.AlertParams{Channel: channel, Count: stuckLost, Late: x.l.cfg.ClaimTimeout},
			fmt.Sprintf("%d message(s) on channel %s were still in flight after %s; they will be sent again with the same idempotency keys",
				stuckLost, channel, x.l.cfg.ClaimTimeout), x.l.now()))
	}
	if stuckAnswered > 0 {
		// They outlived their claim, but the channel answered: record
		// that, rather than send them again.
		x.l.log.Warn("send answered only after its claim ran out", "channel", channel, "n", stuckAnswered)
		x.l.raise(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertSendStuck, Subject: channel}, "", engine.AlertParams{Channel: channel, Count: stuckAnswered, Late: x.l.cfg.ClaimTimeout},
			fmt.Sprintf("%d message(s) on channel %s were answered only after %s, when their claim had run out",
				stuckAnswered, channel, x.l.cfg.ClaimTimeout), x.l.now()))
	}
	if len(results) == 0 {
		return
	}
	if err := x.record(ctx, results); err != nil {
		x.l.log.Warn("cannot record results; claims will time out and be resent with the same keys", "channel", channel, "err", err)
	}
}

// batches cuts a claimed group into the batches handed to the channel: at
// most BatchSize messages and, past the first, MaxBatchBytes of payload
// (a batch is one plugin call, one message of the plugin protocol).
func (x *executor) batches(claimed []engine.Claimed, byID map[string]*engine.Delivery) iter.Seq[[]engine.Claimed] {
	return func(yield func([]engine.Claimed) bool) {
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
func (x *executor) sendBatch(sctx context.Context, channel string, claimed []engine.Claimed, byID map[string]*engine.Delivery) (results []engine.Settlement, lost, late int) {
	batch := make([]heraldtype.Message, len(claimed))
	for i, c := range claimed {
		d := byID[c.ID]
		batch[i] = heraldtype.Message{ID: d.ID, IdempotencyKey: d.ID, Recipient: d.Recipient, Payload: d.Payload, Attempt: c.Attempt}
	}
	outs, err := x.l.cfg.Sender.Send(sctx, channel, batch)
	stuck := errors.Is(sctx.Err(), context.DeadlineExceeded)
	if stuck && err != nil {
		return nil, len(batch), 0
	}
	if stuck {
		late = len(batch)
	}
	byOut := make(map[string]heraldtype.Result, len(outs))
	for _, o := range outs {
		byOut[o.ID] = o
	}
	results = make([]engine.Settlement, 0, len(claimed))
	for _, c := range claimed {
		o, ok := byOut[c.ID]
		switch {
		case err != nil:
			o = heraldtype.Result{Status: heraldtype.StatusRetryable, Error: "channel " + channel + ": " + err.Error()}
		case !ok:
			o = heraldtype.Result{Status: heraldtype.StatusRetryable, Error: "channel " + channel + " returned no result for this message"}
		case !o.Status.Known():
			// A bad plugin answer fails this message's attempt, never the node.
			o = heraldtype.Result{Status: heraldtype.StatusRetryable, Error: "channel " + channel + " returned an unknown status"}
		}
		results = append(results, settle(c, o))
	}
	return results, 0, late
}

// record replicates the settlements of this leader's claims.
func (x *executor) record(ctx context.Context, results []engine.Settlement) error {
	_, err := x.l.propose(ctx, engine.CmdRecordResults, engine.RecordResults{Leader: x.l.cfg.NodeID, Now: x.l.now(), Results: results})
	return err
}

// settle answers claim c with the channel's verdict r.
func settle(c engine.Claimed, r heraldtype.Result) engine.Settlement {
	return engine.Settlement{ID: c.ID, Seq: c.Seq, Status: r.Status, ProviderID: r.ProviderID, RetryAfter: r.RetryAfter, Code: r.Code, Error: r.Error}
}

// handBack answers claim c without a send, saying why: pending again
// within a second, spending no attempt (a rate limit's verdict).
func handBack(c engine.Claimed, why string) engine.Settlement {
	return settle(c, heraldtype.Result{Status: heraldtype.StatusRateLimited, RetryAfter: time.Second, Error: "not sent: " + why})
}

// fairOrder orders due deliveries by priority and, within a priority,
// round-robin across runs (each run's own in due order): the first of
// every run, then the second of every run, and so on. One huge run then
// takes its turn beside a small rule's slot instead of ahead of it.
func fairOrder(due []*engine.Delivery) {
	slices.SortStableFunc(due, func(a, b *engine.Delivery) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return a.DueAt().Compare(b.DueAt())
	})
	type runPrio struct {
		run string
		p   heraldtype.Priority
	}
	rank := make(map[*engine.Delivery]int, len(due))
	next := map[runPrio]int{}
	for _, d := range due {
		k := runPrio{d.RunKey, d.Priority}
		rank[d] = next[k]
		next[k]++
	}
	slices.SortStableFunc(due, func(a, b *engine.Delivery) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return cmp.Compare(rank[a], rank[b])
	})
}

// parkPaused splits a batch about to go into what goes and the hand-backs
// (unsent, spending no attempt) of the claims of rules paused since they
// were claimed: the pause committed between the claim and this batch's
// turn. Recorded with the group's results, they are pending and parked: out
// of the due index until the rule is resumed.
func (x *executor) parkPaused(claimed []engine.Claimed, byID map[string]*engine.Delivery) (send []engine.Claimed, back []engine.Settlement) {
	for _, c := range claimed {
		if _, paused := x.l.cfg.FSM.Paused(byID[c.ID].Rule); paused {
			back = append(back, handBack(c, "rule paused"))
			continue
		}
		send = append(send, c)
	}
	return send, back
}
