package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// applier holds what one Apply needs: the state and the entry's Raft term.
type applier struct {
	st   *state
	term uint64
	// tasks is set when the command changed the task queue, so that the
	// FSM wakes the scheduler once the lock is released.
	tasks *bool
	// stamped receives the leader's time the command carries, if any
	// (see Stamp).
	stamped *time.Time
	// fresh is the day aggregates this Apply copied (see dayBatch).
	fresh dayBatch
	// stop stops the node on what the body says that this build cannot
	// apply (FSM.stop); it does not return.
	stop func(reason string)
}

func (a applier) signalTasks() {
	if a.tasks != nil {
		*a.tasks = true
	}
}

func (a applier) startRun(c StartRun) any {
	a.stamp(c.Now)
	if c.Key == "" || c.Rule == "" {
		return fmt.Errorf("start run: key and rule are required")
	}
	if _, ok := a.st.Runs.Get(c.Key); ok {
		return ErrRunExists
	}
	if _, ok := a.st.Ledger.Get(c.Key); ok {
		return ErrRunExists // fired long ago; the run was pruned
	}
	if c.TaskKey != "" {
		if err := a.fireTask(c); err != nil {
			return err
		}
	}
	r := &Run{
		Key: c.Key, Rule: nameOf(c.Rule), Slot: c.Slot, Zone: c.Zone, TaskKey: c.TaskKey, Data: c.Data,
		State: RunPlanning, Late: c.Late, Manual: c.Manual, Date: c.Date, RulesHash: c.RulesHash, StartedAt: c.Now,
		FiredToken: c.Token,
	}
	if c.Token != "" {
		a.st.usesV4 = true
	}
	// A slot that comes while its rule is paused is recorded, never
	// silently missing, and sends nothing. (Old logs hold no pause: the
	// same StartRun bytes mean what they always meant.)
	_, paused := a.st.Paused[c.Rule]
	paused = paused && c.TaskKey == "" && !c.Manual && !c.Skip
	if paused {
		r.State = RunPaused
	}
	if a.st.Directory != nil {
		r.DirectoryHash = a.st.Directory.Hash
	}
	if c.Skip {
		r.State = RunSkipped
		a.st.raiseCause(AlertCause{AlertSlotSkipped, c.Rule}, c.Rule, AlertParams{Run: c.Key, Slot: c.Slot},
			fmt.Sprintf("slot %s of rule %s was missed beyond its catch-up window and skipped", c.Slot.Format(time.RFC3339), c.Rule), c.Now)
	}
	a.st.putRun(r)
	if c.Manual {
		a.signalTasks() // wake the scheduler to plan it
	}
	a.dayStats(r.date(), r.Rule, func(s *DayStats) {
		s.Runs++
		if r.Late {
			s.Late++
		}
		if c.Skip {
			s.Skipped++
		}
		if paused {
			s.Paused++
		}
	})
	if c.TaskKey == "" && !c.Manual {
		if cur, ok := a.st.Cursors[c.Rule]; !ok || c.Slot.After(cur) {
			a.st.Cursors[c.Rule] = c.Slot
		}
	}
	return nil
}

func (a applier) addDeliveries(c AddDeliveries) any {
	run, ok := a.st.Runs.Get(c.RunKey)
	if !ok {
		return fmt.Errorf("add deliveries: no run %q", c.RunKey)
	}
	if t, ok := a.st.Tasks.Get(run.TaskKey); ok && run.TaskKey != "" && t.State == TaskCancelled {
		return 0 // cancelled while it was being planned: plan nothing
	}
	added := 0
	var share planShare
	for _, nd := range c.Deliveries {
		if a.st.Deliveries.Has(nd.ID) {
			continue // planned before, by this or an earlier leader
		}
		a.st.addDelivery(&Delivery{
			ID: nd.ID, RunKey: run.Key, Rule: run.Rule, Slot: run.Slot,
			Recipient: nd.Recipient, Channel: nameOf(nd.Channel), Payload: share.payloadOf(nd.Payload),
			Priority: nd.Priority, NotBefore: nd.NotBefore, Deadline: nd.Deadline, Retry: share.retryOf(nd.Retry),
			NoRetry: nd.Retry != nil && len(nd.Retry) == 0, State: StatePending,
		})
		added++
	}
	if added > 0 {
		a.dayStats(run.date(), run.Rule, func(s *DayStats) { s.Planned += added })
	}
	return added
}

func (a applier) finishPlan(c FinishPlan) any {
	run, ok := a.st.Runs.Get(c.RunKey)
	if !ok {
		return fmt.Errorf("finish plan: no run %q", c.RunKey)
	}
	if run.State != RunPlanning {
		return nil
	}
	r := *run
	r.PlannedAt = c.Now
	r.Planned = len(a.st.byRun[r.Key])
	if c.Error == "" && r.Approval != nil && r.Approval.State == ApprovalAwaiting {
		a.awaitApproval(&r, c.Now)
	} else if c.Error != "" {
		if r.Approval != nil {
			a.st.moveRun(r.Key, func() { delete(a.st.heldRuns, r.Key) })
		}
		r.State = RunFailed
		r.Error = c.Error
		a.st.raiseCause(AlertCause{AlertRuleError, r.Key}, r.Rule, AlertParams{Run: r.Key, Slot: r.Slot, Error: c.Error}, fmt.Sprintf("rule %s failed to plan %s: %s", r.Rule, r.Key, c.Error), c.Now)
	} else {
		r.State = RunPlanned
	}
	a.st.putRun(&r)
	return nil
}

func (a applier) claim(c ClaimDeliveries) any {
	a.stamp(c.Now)
	res := ClaimResult{}
	for _, id := range c.IDs {
		d, ok := a.st.Deliveries.Mine(id)
		if !ok || !a.claimable(d, c.Now) {
			continue
		}
		if d.State == StateClaimed && d.Claim.Term == a.term {
			// This leader's own claim ran out: the send is stuck (or its
			// result was lost). It goes again with the same key.
			a.st.raiseCause(AlertCause{AlertSendStuck, d.Channel}, d.Rule, AlertParams{Run: d.RunKey, Channel: d.Channel, Recipient: d.Recipient,
				Late: c.Now.Sub(d.Claim.At)}, fmt.Sprintf(
				"a send on channel %s was still unsettled %s after its claim (delivery %s to %s); sending it again with the same idempotency key",
				d.Channel, c.Now.Sub(d.Claim.At), d.ID, d.Recipient), c.Now)
		}
		seq := 1
		if d.Claim != nil {
			seq = d.Claim.Seq + 1
		}
		a.st.unindexDue(d) // before it changes: its due time is the old one's
		d.State = StateClaimed
		d.Claim = &Claim{Seq: seq, Leader: c.Leader, Term: a.term, At: c.Now, ExpiresAt: c.Now.Add(c.Timeout)}
		a.st.Deliveries.Set(id, d)
		a.st.indexDue(d)
		res.Claimed = append(res.Claimed, Claimed{ID: id, Seq: seq, Attempt: d.Attempts + 1})
	}
	return res
}

// claimable: pending and due and within its deadline; or claimed by an
// older leader's term, or past its claim's expiry (the send is ambiguous and
// goes again with the same idempotency key).
func (a applier) claimable(d *Delivery, now time.Time) bool {
	if !d.Deadline.IsZero() && !now.Before(d.Deadline) {
		return false
	}
	switch d.State {
	case StatePending:
		return d.Digest == "" && !now.Before(d.DueAt()) && !a.st.parked(d) && !a.st.held(d) // a claim proposed just before a pause
	case StateClaimed:
		return d.Claim.Term < a.term || !now.Before(d.Claim.ExpiresAt)
	}
	return false
}

func (a applier) recordResults(c RecordResults) any {
	a.stamp(c.Now)
	applied := 0
	for _, r := range c.Results {
		d, ok := a.st.Deliveries.Get(r.ID)
		if !ok || d.State != StateClaimed || d.Claim.Seq != r.Seq || d.Claim.Leader != c.Leader {
			continue // answers a claim that is no longer current
		}
		nd := *d
		nd.Claim = settledClaim(d.Claim.Seq) // keep the sequence, drop the lease
		nd.Code, nd.LastError = r.Code, r.Error
		switch r.Status {
		case heraldtype.StatusSent:
			nd.Attempts++
			nd.State, nd.SentAt, nd.EndedAt, nd.ProviderID = StateSent, c.Now, c.Now, r.ProviderID
			nd.LastError, nd.Code = "", ""
			if len(nd.Members) == 0 { // a digest's members are counted one by one
				a.madeGood(&nd)
				a.count(&nd)
			}
		case heraldtype.StatusRateLimited:
			// The provider's limit is not the message's fault: no attempt spent.
			nd.State, nd.NextAt = StatePending, c.Now.Add(max(r.RetryAfter, time.Second))
			nd.Failures = nd.withFailure(AttemptFailure{At: c.Now, Attempt: nd.Attempts, Status: r.Status, Code: r.Code, Error: r.Error})
		case heraldtype.StatusRetryable:
			nd.Attempts++
			nd.Failures = nd.withFailure(AttemptFailure{At: c.Now, Attempt: nd.Attempts, Status: r.Status, Code: r.Code, Error: r.Error})
			wait, more := nd.retryWait(nd.Attempts)
			if !more {
				a.fail(&nd, StateFailed, c.Now, fmt.Sprintf("attempts exhausted after %d tries: %s", nd.Attempts, r.Error))
				break
			}
			nd.State, nd.NextAt = StatePending, c.Now.Add(max(wait, r.RetryAfter))
		case heraldtype.StatusPermanent, heraldtype.StatusConfig:
			nd.Attempts++
			nd.Failures = nd.withFailure(AttemptFailure{At: c.Now, Attempt: nd.Attempts, Status: r.Status, Code: r.Code, Error: r.Error})
			a.fail(&nd, StateFailed, c.Now, r.Error)
			if r.Status == heraldtype.StatusConfig {
				a.st.raiseCause(AlertCause{AlertChannelConfig, nd.Channel}, nd.Rule, AlertParams{Channel: nd.Channel, Code: r.Code, Error: r.Error},
					fmt.Sprintf("channel %s is misconfigured (%s): %s", nd.Channel, r.Code, r.Error), c.Now)
			}
		default:
			// Never written by a leader (it makes an unknown answer
			// retryable) and refused by the packed decoder: a log that
			// says it stops the node clearly, not with a stack trace.
			a.stop(fmt.Sprintf("the result for %s has unknown status %d", r.ID, r.Status))
		}
		a.st.replaceDeliveryCopy(d, &nd)
		a.settleDigest(&nd)
		applied++
	}
	return applied
}

// fail ends d as failed or expired, raises its alert (one per run and
// outcome: a channel outage at 9:00 is one alert, not a thousand), queues
// the rule's on_failed, and remembers the missed slot so the rule's next
// run can carry it.
func (a applier) fail(d *Delivery, st DeliveryState, now time.Time, why string) {
	d.State, d.EndedAt, d.LastError = st, now, why
	kind := AlertDeliveryFailed
	if st == StateExpired {
		kind = AlertDeliveryExpired
	}
	// The params carry the provider's own words (the last attempt's), not
	// the English sentence around them; an expiry has none.
	p := AlertParams{Run: d.RunKey, Slot: d.Slot, Recipient: d.Recipient, Channel: d.Channel, Code: d.Code, Count: d.Attempts}
	if n := len(d.Failures); n > 0 && st == StateFailed {
		p.Error = d.Failures[n-1].Error
	}
	a.st.raiseCause(AlertCause{kind, d.RunKey}, d.Rule, p,
		fmt.Sprintf("%s to %s (run %s) %s: %s", d.Rule, d.Recipient, d.RunKey, st, why), now)
	if len(d.Members) > 0 {
		return // a digest: settleDigest ends its members, each compensated and counted
	}
	a.failed(d)
}

// failed queues the on_failed of d, which just ended failed or expired,
// counts it and remembers its missed slot.
func (a applier) failed(d *Delivery) {
	a.st.Compensate[d.ID] = true
	a.count(d)
	if run, ok := a.st.Runs.Get(d.RunKey); ok && run.TaskKey == "" {
		m := a.st.Missed[d.Rule]
		if m == nil {
			m = map[string][]string{}
			a.st.Missed[d.Rule] = m
		}
		slot := d.Slot.Format(time.RFC3339)
		if !slices.Contains(m[d.Recipient], slot) {
			m[d.Recipient] = append(slices.Clone(m[d.Recipient]), slot)
		}
	}
}

// madeGood forgets a recipient's missed slots of the rule that are older than
// a delivery that was just sent: that message carried them.
func (a applier) madeGood(d *Delivery) {
	m := a.st.Missed[d.Rule]
	slots, ok := m[d.Recipient]
	if !ok {
		return
	}
	var keep []string
	for _, s := range slots {
		if t, err := time.Parse(time.RFC3339, s); err == nil && !t.Before(d.Slot) {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		delete(m, d.Recipient)
	} else {
		m[d.Recipient] = keep
	}
}

func (a applier) expire(c Expire) any {
	a.stamp(c.Now)
	if err := a.horizonAhead(CmdExpire, c.Now); err != nil {
		return err
	}
	n := 0
	for _, id := range c.IDs {
		d, ok := a.st.Deliveries.Get(id)
		if !ok || d.State.Final() || d.Deadline.IsZero() || c.Now.Before(d.Deadline) || d.Digest != "" {
			continue // a folded delivery ends with its digest
		}
		nd := *d
		if nd.Claim != nil {
			nd.Claim = settledClaim(nd.Claim.Seq)
		}
		why := "deadline " + d.Deadline.Format(time.RFC3339) + " passed before it was sent"
		nd.Failures = nd.withFailure(AttemptFailure{At: c.Now, Attempt: nd.Attempts, Error: why})
		a.fail(&nd, StateExpired, c.Now, why)
		a.st.putDelivery(&nd)
		a.settleDigest(&nd)
		n++
	}
	return n
}

func (a applier) initCursor(c InitCursor) any {
	if _, ok := a.st.Cursors[c.Rule]; !ok {
		a.st.Cursors[c.Rule] = c.At
	}
	return nil
}
