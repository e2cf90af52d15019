package leader

import "github.com/heraldhq/herald/engine"

// The executor's two lanes. A huge run keeps every claim group and send
// slot busy for as long as it drains (8 groups of 1,000 are a second of
// sending on a channel that takes 7,000 a second), and a small rule's slot
// that comes meanwhile would wait behind all of it. So the capacity is
// split: the backlog lane (runs that already have messages in flight)
// gets all but one group and all but an eighth of the send slots; the
// express lane (the first ClaimBatch/8 messages of a run with nothing in
// flight) gets the rest, and may borrow the backlog's when its own are
// taken.
// The small rule's slot then waits at most for one express group and for
// the batches already in the channel, not for the backlog.

// lanes holds the slots of both lanes: a slot is taken by sending into
// its channel and given back by receiving from it.
type lanes struct {
	expressGroups, backlogGroups chan struct{}
	expressSends, backlogSends   chan struct{}
	// expressShare is how many messages of one run a pass puts in the
	// express lane while the run has nothing in flight.
	expressShare int
}

func newLanes(cfg *Config) *lanes {
	express := max(cfg.SendConcurrency/8, 1)
	return &lanes{
		expressGroups: make(chan struct{}, 1),
		backlogGroups: make(chan struct{}, max(cfg.MaxSends-1, 1)),
		expressSends:  make(chan struct{}, express),
		backlogSends:  make(chan struct{}, max(cfg.SendConcurrency-express, 1)),
		expressShare:  max(cfg.ClaimBatch/8, 1),
	}
}

// claimGroup is the deliveries of one channel claimed in one entry, and
// the group slot it has taken until it is settled.
type claimGroup struct {
	channel string
	express bool
	slot    chan struct{} // the group slot taken (of either lane)
	ds      []*engine.Delivery
}

// canOpen says whether a group of the lane can be opened now. Only the
// executor's pass opens groups; others only give slots back, so a true
// answer stays true until the pass opens one.
func (l *lanes) canOpen(express bool) bool {
	if express && len(l.expressGroups) < cap(l.expressGroups) {
		return true
	}
	return len(l.backlogGroups) < cap(l.backlogGroups)
}

// free is how many groups of either lane could be opened now.
func (l *lanes) free() int {
	return cap(l.expressGroups) - len(l.expressGroups) + cap(l.backlogGroups) - len(l.backlogGroups)
}

// open takes a group slot (an express group borrows the backlog's when
// its own is taken); nil if none is free.
func (l *lanes) open(channel string, express bool) *claimGroup {
	if express {
		select {
		case l.expressGroups <- struct{}{}:
			return &claimGroup{channel: channel, express: true, slot: l.expressGroups}
		default:
		}
	}
	select {
	case l.backlogGroups <- struct{}{}:
		return &claimGroup{channel: channel, express: express, slot: l.backlogGroups}
	default:
		return nil
	}
}

// close gives the group's slot back.
func (g *claimGroup) close() { <-g.slot }

// sendSlot waits for a send slot for one batch of g (an express batch
// takes either lane's) and returns the channel to give it back to; nil
// if done came first.
func (l *lanes) sendSlot(g *claimGroup, done <-chan struct{}) chan struct{} {
	if g.express {
		select {
		case l.expressSends <- struct{}{}:
			return l.expressSends
		case l.backlogSends <- struct{}{}:
			return l.backlogSends
		case <-done:
			return nil
		}
	}
	select {
	case l.backlogSends <- struct{}{}:
		return l.backlogSends
	case <-done:
		return nil
	}
}
