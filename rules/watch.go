package rules

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// maxDebounceFactor bounds how long a storm of events can postpone a
// reload: at most this many debounce periods after its first event.
const maxDebounceFactor = 10

// Watch reloads the set whenever the directory changes, until ctx is done.
//
// It watches directories, never single files: editors that save by
// renaming, atomic replace (write a temporary file, rename it over the
// old one) and a Kubernetes ConfigMap's ..data symlink swap all show up as
// events in a watched directory, while a watch on the file itself would
// follow the old inode. Any event starts (or extends) a debounce; then the
// whole directory is rescanned and only a change of content (by hash)
// makes a new version. New subdirectories get watches as the rescan finds
// them, and a periodic rescan catches whatever the events missed (an
// overflowed queue, a network file system).
func (s *Set) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	watched := map[string]string{}
	// A change between Load and now would otherwise wait for the rescan.
	s.reloadAndSync(w, watched)

	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	rescan := time.NewTicker(s.cfg.RescanInterval)
	defer rescan.Stop()
	var first time.Time // first event of the pending burst; zero when none
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			wait := s.cfg.Debounce
			if limit := first.Add(maxDebounceFactor * s.cfg.Debounce).Sub(now); limit < wait {
				wait = max(limit, 0)
			}
			debounce.Reset(wait)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.cfg.Logger.Warn("rules: watcher", "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				debounce.Reset(s.cfg.Debounce)
			}
		case <-debounce.C:
			first = time.Time{}
			s.reloadAndSync(w, watched)
		case <-rescan.C:
			s.reloadAndSync(w, watched)
		}
	}
}

// reloadAndSync reloads, then watches the directories the scan found. When
// a new directory got a watch, it rescans once more: a file written into
// it before the watch existed raised no event.
func (s *Set) reloadAndSync(w *fsnotify.Watcher, watched map[string]string) {
	for range 2 {
		if _, err := s.reload(); err != nil {
			s.cfg.Logger.Error("rules: reload", "dir", s.cfg.Dir, "err", err)
		}
		if !s.syncWatches(w, watched) {
			return
		}
	}
}

// syncWatches makes the watch list equal to the last scan's directories.
// A directory reached through a symlink whose target changed (a ConfigMap
// subdirectory after a swap) is watched again at its new target. It
// reports whether a watch was added.
func (s *Set) syncWatches(w *fsnotify.Watcher, watched map[string]string) bool {
	s.reloadMu.Lock()
	dirs := s.watchDirs
	s.reloadMu.Unlock()
	want := map[string]bool{}
	added := false
	for _, d := range dirs {
		want[d] = true
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if old, ok := watched[d]; ok {
			if old == real {
				continue
			}
			_ = w.Remove(d)
		}
		if err := w.Add(d); err != nil {
			s.cfg.Logger.Warn("rules: watch", "dir", d, "err", err)
			continue
		}
		watched[d] = real
		added = true
	}
	for d := range watched {
		if !want[d] {
			_ = w.Remove(d) // gone already, usually
			delete(watched, d)
		}
	}
	return added
}
