package cluster

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/backoff"
)

// leadership turns raft's NotifyCh into a queue that never blocks raft:
// raft blocks on NotifyCh until someone reads, so a pump goroutine reads it
// at once, whether or not RunLeader is running, and keeps every transition
// (a true/false/true burst must not look like an unbroken true).
type leadership struct {
	notify chan bool
	signal chan struct{} // cap 1: "the queue is not empty"
	quit   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	queue []bool

	startOnce, stopOnce sync.Once
}

func newLeadership() *leadership {
	return &leadership{
		notify: make(chan bool, 256),
		signal: make(chan struct{}, 1),
		quit:   make(chan struct{}),
	}
}

func (l *leadership) start() {
	l.startOnce.Do(func() {
		l.wg.Add(1)
		go l.pump()
	})
}

// stop ends the pump; call it only after raft has shut down, so raft's last
// notification is not left blocked.
func (l *leadership) stop() {
	l.stopOnce.Do(func() {
		close(l.quit)
		l.wg.Wait()
	})
}

func (l *leadership) pump() {
	defer l.wg.Done()
	for {
		select {
		case v := <-l.notify:
			l.mu.Lock()
			l.queue = append(l.queue, v)
			l.mu.Unlock()
			select {
			case l.signal <- struct{}{}:
			default:
			}
		case <-l.quit:
			return
		}
	}
}

func (l *leadership) drain() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue
	l.queue = nil
	return q
}

// RunLeader is the leadership monitor. Whenever this node gains leadership
// it issues a Barrier (so the state machine holds every committed entry),
// upserts its own member record (its HTTP address, for forwarding), then
// runs lead(leaderCtx) in a goroutine. When leadership is lost, ctx ends or
// the node shuts down, it cancels leaderCtx and waits for lead to return.
// RunLeader blocks until ctx is done or the node shuts down; Shutdown
// waits for it, lead included, before stopping Raft. Run one RunLeader per
// node.
func (n *Node) RunLeader(ctx context.Context, lead func(ctx context.Context)) {
	n.runMu.Lock()
	select {
	case <-n.shutdownCh:
		n.runMu.Unlock()
		return
	default:
	}
	n.runners.Add(1)
	n.runMu.Unlock()
	defer n.runners.Done()

	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	stopLead := func() {
		if cancel == nil {
			return
		}
		cancel()
		<-done
		cancel, done = nil, nil
		n.log.Info("leader work stopped")
	}
	startLead := func() {
		var leaderCtx context.Context
		leaderCtx, cancel = context.WithCancel(ctx)
		done = make(chan struct{})
		go func() {
			defer close(done)
			n.lead(leaderCtx, lead)
		}()
	}
	defer stopLead()
	n.leadRunning.Store(true)
	defer n.leadRunning.Store(false)

	// Transitions queued before this call are history: the current state
	// decides where to begin.
	n.leadership.drain()
	if n.IsLeader() {
		startLead()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.shutdownCh:
			return
		case p := <-n.leadPauses:
			// The work restarts from the state f left (a restore's), as
			// after an election; transitions meanwhile are queued.
			stopLead()
			p.done <- p.f()
			if n.IsLeader() {
				startLead()
			}
			continue
		case <-n.leadership.signal:
		}
		batch := n.leadership.drain()
		if len(batch) == 0 {
			continue
		}
		gained := batch[len(batch)-1]
		if cancel != nil && (!gained || slices.Contains(batch, false)) {
			stopLead()
		}
		if gained && cancel == nil {
			startLead()
		}
	}
}

// leadPause asks RunLeader to run f with the leader work stopped.
type leadPause struct {
	f    func() error
	done chan error
}

// withoutLeadWork runs f while this node's leader work (RunLeader's lead)
// is stopped, and starts it again afterwards if the node still leads: the
// loops hold what they derived from the state (claims in flight, the
// deliveries to send again), which a restore replaces under them. Without
// a RunLeader, f just runs.
func (n *Node) withoutLeadWork(ctx context.Context, f func() error) error {
	if !n.leadRunning.Load() {
		return f()
	}
	p := leadPause{f: f, done: make(chan error, 1)}
	select {
	case n.leadPauses <- p:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.shutdownCh:
		return ErrShutdown
	}
	return <-p.done
}

// lead establishes leadership, then runs the caller's leader work.
func (n *Node) lead(ctx context.Context, work func(ctx context.Context)) {
	n.log.Info("gained leadership; establishing")
	if !n.retry(ctx, "barrier", func() error {
		return mapRaftErr(wait(ctx, n.raft.Barrier(n.timeout(ctx))))
	}) {
		return
	}
	if !n.retry(ctx, "record own member", func() error { return n.upsertSelf(ctx) }) {
		return
	}
	// Tied to this term, and waited for, so nothing outlives the lead.
	vctx, vcancel := context.WithCancel(ctx)
	var polls sync.WaitGroup
	polls.Go(func() { n.recordVersions(vctx) })
	polls.Go(func() { n.pollReports(vctx) })
	defer func() {
		vcancel()
		polls.Wait()
	}()
	n.log.Info("leader work started")
	work(ctx)
}

// upsertSelf proposes this node's member record unless it is already
// current (so elections do not grow the log).
func (n *Node) upsertSelf(ctx context.Context) error {
	self := n.selfMember()
	if slices.Contains(n.sm.Members(), self) {
		return nil
	}
	return n.upsertMember(ctx, self)
}

func (n *Node) upsertMember(ctx context.Context, m engine.Member) error {
	cmd, err := engine.Encode(engine.CmdUpsertMember, m)
	if err != nil {
		return err
	}
	_, err = n.Apply(ctx, cmd)
	return err
}

// retry runs f until it succeeds (true) or ctx ends (false), backing off
// from 50ms to 2s between attempts.
func (n *Node) retry(ctx context.Context, what string, f func() error) bool {
	b := backoff.Doubling{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for {
		err := f()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := b.Next()
		n.log.Warn(what+" failed; retrying", "err", err, "in", wait)
		if !backoff.Sleep(ctx, wait, nil) {
			return false
		}
	}
}
