package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/heraldhq/herald/engine/backoff"
	"github.com/heraldhq/herald/engine/hclogslog"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// exitPoll is how often a running plugin is checked for having exited;
// go-plugin offers no notification.
const exitPoll = 100 * time.Millisecond

// instance is one channel instance and the supervisor of its plugin
// process: run starts the plugin, watches it, and restarts it with backoff.
type instance struct {
	h      *Host
	name   string
	src    source
	config []byte // resolved config JSON; holds secrets, never logged
	redact func(string) string
	log    *slog.Logger
	hlog   hclog.Logger

	// kick wakes the watcher after doomed was set.
	kick chan struct{}

	// ctx and stop bound this supervisor (Host.launch); inflight counts
	// the batches sent through it, which a reload lets finish before
	// stopping a channel it removed or changed.
	ctx      context.Context
	stop     context.CancelFunc
	inflight sync.WaitGroup
	sends    int // batches in flight, under mu (what inflight counts)

	mu       sync.Mutex
	cur      *Plugin       // the running plugin; nil while down
	doomed   *Plugin       // a plugin Send saw die, to be restarted
	changed  chan struct{} // closed and replaced on every change of state
	starting bool          // a start is under way
	startErr error         // the last start's failure; nil once one succeeded
	downWhy  string        // why the last plugin was stopped
	health   string        // the last Health answer's reason, "" when fine
	version  string
	restarts int
	lim      *Limiter
}

func newInstance(h *Host, name string, src source, config []byte, redact func(string) string) *instance {
	log := h.log.With("channel", name, "plugin", src.name)
	return &instance{
		h:       h,
		name:    name,
		src:     src,
		config:  config,
		redact:  redact,
		log:     log,
		hlog:    hclogslog.New(log, hclogslog.Options{RedactFunc: redact}),
		kick:    make(chan struct{}, 1),
		changed: make(chan struct{}),
	}
}

// setRedact makes redact the instance's redactor (before it starts).
func (in *instance) setRedact(redact func(string) string) {
	in.redact = redact
	in.hlog = hclogslog.New(in.log, hclogslog.Options{RedactFunc: redact})
}

func (in *instance) lock()   { in.mu.Lock() }
func (in *instance) unlock() { in.mu.Unlock() }

// notify wakes everyone waiting for a change of state. Call with the lock.
func (in *instance) notify() {
	close(in.changed)
	in.changed = make(chan struct{})
}

// run supervises the plugin until ctx ends. firstDone is called once, after
// the first start attempt.
func (in *instance) run(ctx context.Context, firstDone func()) {
	fails := 0
	var delay time.Duration
	firstDone = sync.OnceFunc(firstDone)
	for {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		in.lock()
		in.starting = true
		in.notify()
		in.unlock()

		p, err := in.start(ctx)
		if ctx.Err() != nil {
			if p != nil {
				p.Close()
			}
			in.setDown(nil, "host closed")
			firstDone()
			return
		}
		if err != nil {
			fails++
			delay = in.backoff(fails)
			in.lock()
			in.starting, in.startErr = false, err
			in.notify()
			in.unlock()
			in.log.Error("channel plugin did not start", "error", in.redact(err.Error()), "retry_in", delay)
			firstDone()
			continue
		}

		in.lock()
		in.cur, in.starting, in.startErr, in.downWhy, in.health = p, false, nil, "", ""
		in.version = p.Info().Version
		in.notify()
		in.unlock()
		in.log.Info("channel plugin started", "version", p.Info().Version, "pid", p.Pid())
		firstDone()

		upAt := time.Now()
		why := in.watch(ctx, p)
		in.setDown(p, why)
		if ctx.Err() != nil {
			p.Close()
			return
		}
		// It exited, does not answer, or a send found it dead: nothing to
		// wait for (a frozen process would not answer go-plugin's Shutdown).
		p.kill()
		p.Close()
		// A plugin that ran well for a while restarts at once; one that
		// keeps dying backs off.
		if time.Since(upAt) > in.h.cfg.RestartMax {
			fails = 0
		}
		delay = in.backoff(fails)
		fails++
		in.lock()
		in.restarts++
		in.unlock()
		in.log.Warn("channel plugin stopped; restarting", "reason", why, "restart_in", delay)
	}
}

// backoff is the wait before the start that follows fails failures.
func (in *instance) backoff(fails int) time.Duration {
	return (&backoff.Doubling{Min: in.h.cfg.RestartMin, Max: in.h.cfg.RestartMax}).After(fails)
}

// start launches, configures and asks the plugin for its limits.
func (in *instance) start(ctx context.Context) (*Plugin, error) {
	if in.src.err != nil {
		return nil, in.src.err
	}
	p, err := launch(ctx, in.h.asPluginUser(in.src.newCmd()), in.src.checksum, in.hlog, in.h.cfg.StartTimeout)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, in.h.cfg.StartTimeout)
	defer cancel()
	if err := p.Channel().Configure(cctx, in.config); err != nil {
		p.Close()
		return nil, fmt.Errorf("configure: %w", err)
	}
	// Ask again: a plugin may declare limits that depend on its config.
	info, err := p.Channel().Info(cctx)
	if err == nil {
		err = checkInfo(info)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("info after configure: %w", err)
	}
	if info.Name != in.src.name {
		in.log.Warn("plugin calls itself by another name", "info_name", info.Name)
	}
	in.lock()
	if in.lim == nil || !in.lim.same(info.Limits) {
		// Buckets survive restarts unless the limits themselves changed.
		in.lim = NewLimiter(info.Limits, in.h.cfg.HighReserve, in.h.cfg.RecipientCache)
		if len(info.Limits) > 0 {
			in.log.Info("channel limits enforced", "buckets", in.lim.String())
		}
	}
	in.unlock()
	return p, nil
}

// watch returns, with the reason, when p must be restarted: it exited,
// stopped answering Health, or a Send saw it die. It also returns when ctx
// ends.
func (in *instance) watch(ctx context.Context, p *Plugin) string {
	health := time.NewTicker(in.h.cfg.HealthInterval)
	defer health.Stop()
	exited := time.NewTicker(exitPoll)
	defer exited.Stop()
	for {
		select {
		case <-ctx.Done():
			return "host closed"
		case <-in.kick:
			in.lock()
			doomed := in.doomed == p
			in.unlock()
			if doomed {
				return "a send found the plugin dead"
			}
		case <-exited.C:
			if p.Exited() {
				return "plugin process exited"
			}
		case <-health.C:
			hctx, cancel := context.WithTimeout(ctx, in.h.cfg.StartTimeout)
			reason, err := p.Channel().Health(hctx)
			cancel()
			if ctx.Err() != nil {
				return "host closed"
			}
			if err != nil {
				return "health check failed: " + err.Error()
			}
			in.lock()
			changed := in.health != reason
			in.health = reason
			in.unlock()
			if changed && reason != "" {
				in.log.Warn("channel reports it cannot deliver", "reason", in.redact(reason))
			}
		}
	}
}

// setDown records that p (nil: no plugin) is no longer serving.
func (in *instance) setDown(p *Plugin, why string) {
	in.lock()
	defer in.unlock()
	if p != nil && in.cur == p {
		in.cur = nil
	}
	in.downWhy, in.starting = why, false
	in.notify()
}

// plugin waits for a running plugin other than old (nil: any) and returns
// it. It fails at once with ErrUnavailable when the last start failed.
func (in *instance) plugin(ctx context.Context, old *Plugin) (*Plugin, error) {
	for {
		in.lock()
		cur, startErr, starting, changed := in.cur, in.startErr, in.starting, in.changed
		in.unlock()
		if cur != nil && cur != old {
			return cur, nil
		}
		if cur == nil && !starting && startErr != nil {
			return nil, fmt.Errorf("%w: channel %s: %s", ErrUnavailable, in.name, in.redact(startErr.Error()))
		}
		if in.h.ctx.Err() != nil {
			return nil, ErrClosed
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("channel %s: waiting for its plugin: %w", in.name, ctx.Err())
		case <-in.h.ctx.Done():
			return nil, ErrClosed
		case <-changed:
		}
	}
}

// send sends a batch; if the plugin dies under it, once more on the
// restarted plugin.
func (in *instance) send(ctx context.Context, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	p, err := in.plugin(ctx, nil)
	if err != nil {
		return nil, err
	}
	results, err := p.Channel().Send(ctx, batch)
	if err == nil || ctx.Err() != nil || !died(p, err) {
		return results, in.sendErr(ctx, err)
	}
	in.log.Warn("channel plugin died during a send; retrying the batch once after restart", "error", in.redact(err.Error()), "batch", len(batch))
	in.lock()
	if in.cur == p {
		in.doomed = p
	}
	in.unlock()
	select {
	case in.kick <- struct{}{}:
	default:
	}
	p2, err2 := in.plugin(ctx, p)
	if err2 != nil {
		return nil, fmt.Errorf("plugin died during send (%s); no restarted plugin to retry on: %w", in.redact(err.Error()), err2)
	}
	results, err = p2.Channel().Send(ctx, batch)
	if err != nil && ctx.Err() == nil && died(p2, err) {
		return nil, fmt.Errorf("%w: channel %s: plugin died again on the retried batch: %s", ErrUnavailable, in.name, in.redact(err.Error()))
	}
	return results, in.sendErr(ctx, err)
}

// sendErr names the channel in a send error and strips secrets from it,
// keeping context errors recognisable.
func (in *instance) sendErr(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("channel %s: %w", in.name, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		// The sdk client says so only for the caller's own deadline, which
		// the plugin's side can see end before this side's timer fires.
		return fmt.Errorf("channel %s: %w", in.name, context.DeadlineExceeded)
	case errors.Is(err, ErrClosed):
		return err
	}
	return fmt.Errorf("%w: channel %s: %s", ErrSendFailed, in.name, in.redact(err.Error()))
}

// died tells whether a failed call means the plugin process is gone (as
// opposed to the plugin answering with an error).
func died(p *Plugin, err error) bool {
	if p.Exited() {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled:
		return true
	}
	return false
}

func (in *instance) limiter() *Limiter {
	in.lock()
	defer in.unlock()
	return in.lim
}

func (in *instance) status() heraldtype.ChannelStatus {
	in.lock()
	defer in.unlock()
	st := heraldtype.ChannelStatus{Name: in.name, Plugin: in.src.name, Version: in.version, Restarts: in.restarts}
	switch {
	case in.cur != nil && in.health == "":
		st.Healthy = true
	case in.cur != nil:
		st.Error = "channel cannot deliver: " + in.health
	case in.startErr != nil:
		st.Error = "plugin did not start: " + in.startErr.Error()
	case in.starting:
		st.Error = "plugin starting"
	case in.downWhy != "":
		st.Error = "plugin down: " + in.downWhy
	default:
		st.Error = "plugin not started"
	}
	st.Error = in.redact(st.Error)
	return st
}
