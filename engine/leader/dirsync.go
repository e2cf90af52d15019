package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldhq/herald/engine"
)

// Defaults of the directory refresh (DirectoryConfig).
const (
	DirectoryIntervalDefault   = 10 * time.Minute
	DirectoryMaxRemovalDefault = 0.2
	// DirectoryRetry is how soon a failed refresh is tried again (or the
	// interval, if shorter).
	DirectoryRetry = time.Minute
	// DirectoryFetchTimeout bounds one fetch of the whole directory.
	DirectoryFetchTimeout = 2 * time.Minute
)

// DirectoryConfig configures the directory refresher. Directory, when set,
// is read every DirectoryInterval (default DirectoryIntervalDefault) and
// replicated. A refresh that would remove more than DirectoryMaxRemoval of
// the people in force (a share, default DirectoryMaxRemovalDefault; 1
// never holds) is held for an operator. DirectoryRefresh, when set, asks
// for a refresh now.
type DirectoryConfig struct {
	Directory           DirectorySource
	DirectoryInterval   time.Duration
	DirectoryMaxRemoval float64
	DirectoryRefresh    <-chan struct{}
}

func (c *DirectoryConfig) setDefaults() {
	setDefault(&c.DirectoryInterval, DirectoryIntervalDefault)
	if c.DirectoryMaxRemoval <= 0 {
		c.DirectoryMaxRemoval = DirectoryMaxRemovalDefault
	}
}

// DirectorySource reads the external directory (WeCom's contacts). It is
// implemented in cmd/herald; only the leader calls it.
type DirectorySource interface {
	Fetch(ctx context.Context) (DirectoryFetch, error)
}

// DirectoryFetch is one snapshot read by a DirectorySource.
type DirectoryFetch struct {
	Source  string
	Body    json.RawMessage // canonical: the same people give the same bytes
	Hash    string          // of Body
	UserIDs []string        // sorted
}

// dirRefresher is the leader's directory loop: fetch every interval,
// replicate what changed, hold a refresh that would remove too many
// people, and alert (once per failure streak) when fetching fails. The
// snapshot in force is never touched by a failure.
type dirRefresher struct {
	l       *Leader
	next    time.Time
	failing string // the error of the current failure streak; "" when none

	// maxWait bounds one wait on the real clock (NowFunc may be a test's
	// clock that jumps); default a minute. woke, when set, is signalled
	// after every wait: tests count wake-ups instead of sleeping.
	maxWait time.Duration
	woke    chan<- struct{}
}

func (r *dirRefresher) run(ctx context.Context) {
	maxWait := r.maxWait
	if maxWait <= 0 {
		maxWait = time.Minute
	}
	for {
		next := r.runOnce(ctx)
		t := time.NewTimer(min(max(next.Sub(r.l.now()), 0), maxWait))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			// Due or not, runOnce decides: a timer capped at maxWait
			// fires long before a 10m interval ends.
		case <-r.l.cfg.DirectoryRefresh:
			t.Stop()
			r.next = time.Time{} // asked by hand: refresh now
		}
		if r.woke != nil {
			r.woke <- struct{}{}
		}
	}
}

// runOnce refreshes when due and returns when to look again.
func (r *dirRefresher) runOnce(ctx context.Context) time.Time {
	l := r.l
	now := l.now()
	if !r.next.IsZero() && now.Before(r.next) {
		return r.next
	}
	src, interval, maxRemoval := l.directory()
	if src == nil {
		// No directory section (yet): look again later; a reload that
		// adds one asks for a refresh at once (DirectoryRefresh).
		r.next = time.Time{}
		return now.Add(DirectoryRetry)
	}
	fctx, cancel := context.WithTimeout(ctx, DirectoryFetchTimeout)
	got, err := src.Fetch(fctx)
	cancel()
	if ctx.Err() != nil {
		return now
	}
	if err == nil {
		err = r.apply(ctx, got, now, maxRemoval)
	}
	if err != nil {
		r.next = now.Add(min(interval, DirectoryRetry))
		l.log.Warn("directory refresh failed; the snapshot in force stays", "err", err, "retry_in", r.next.Sub(now))
		if r.failing == "" {
			cur, _ := l.cfg.FSM.Directory()
			inForce := "none yet"
			if cur != nil {
				inForce = fmt.Sprintf("%s, %d people, fetched %s", cur.Hash, len(cur.UserIDs), cur.FetchedAt.Format(time.RFC3339))
			}
			l.raise(ctx, engine.NewRaiseAlert(engine.ParseAlertCause(engine.AlertDirectoryRefresh), "", engine.AlertParams{Error: err.Error()},
				fmt.Sprintf("directory refresh failed; the last good snapshot stays in force (%s): %v", inForce, err), now))
		}
		r.failing = err.Error()
		return r.next
	}
	if r.failing != "" {
		l.log.Info("directory refresh works again")
	}
	r.failing = ""
	r.next = now.Add(interval)
	return r.next
}

// apply replicates a fetched snapshot: nothing when it is the one in
// force, a hold when it would remove more than the allowed share of the
// people in force, else SetDirectory.
func (r *dirRefresher) apply(ctx context.Context, got DirectoryFetch, now time.Time, maxRemoval float64) error {
	l := r.l
	if got.Hash == "" || len(got.Body) == 0 {
		return fmt.Errorf("the directory source returned an empty snapshot")
	}
	cur, held := l.cfg.FSM.Directory()
	if cur != nil && cur.Hash == got.Hash {
		if held == nil {
			return nil
		}
		// WeCom is back to what is in force: the hold is moot.
		_, err := l.propose(ctx, engine.CmdSetDirectory, setDirectory(got, now))
		return err
	}
	if cur != nil && len(cur.UserIDs) > 0 {
		removed := engine.RemovedFrom(cur.UserIDs, got.UserIDs)
		if share := float64(len(removed)) / float64(len(cur.UserIDs)); share > maxRemoval {
			if held != nil && held.Hash == got.Hash {
				return nil // held already; the alert says so
			}
			l.log.Warn("directory refresh held for confirmation", "hash", got.Hash, "removed", len(removed), "of", len(cur.UserIDs))
			_, err := l.propose(ctx, engine.CmdHoldDirectory, engine.HoldDirectory{Hash: got.Hash, Source: got.Source, Body: got.Body,
				UserIDs: got.UserIDs, Removed: removed, FetchedAt: now, Now: now})
			return err
		}
	}
	l.log.Info("directory refreshed", "hash", got.Hash, "people", len(got.UserIDs))
	_, err := l.propose(ctx, engine.CmdSetDirectory, setDirectory(got, now))
	return err
}

// setDirectory is the command that puts the fetched snapshot got in force.
func setDirectory(got DirectoryFetch, now time.Time) engine.SetDirectory {
	return engine.SetDirectory{Hash: got.Hash, Source: got.Source, Body: got.Body, UserIDs: got.UserIDs, FetchedAt: now, Now: now}
}
