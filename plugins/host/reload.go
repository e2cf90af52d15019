package host

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
)

// ReloadResult names the channels a Reload added, removed and changed
// (sorted); a channel in none of them kept its plugin process.
type ReloadResult struct {
	Added, Removed, Changed []string
}

// Empty reports a reload that changed no channel.
func (r ReloadResult) Empty() bool {
	return len(r.Added) == 0 && len(r.Removed) == 0 && len(r.Changed) == 0
}

// Reload applies a new set of channels and plugin_sha256 while the host
// runs (a node's config reload). Everything is checked first; on an error
// nothing changes. Then:
//
//   - a channel whose plugin, executable and resolved config are the same
//     keeps its process, its buckets and its batches in flight;
//   - an added or changed channel starts a new plugin, and Reload waits for
//     its first start attempt (as Start does) before the channel's name
//     is switched to it: sends keep going to the old one until then, so a
//     change leaves no gap;
//   - a changed channel's new instance keeps the old one's rate-limit
//     buckets (when its limits are the same), so a reload never lets a
//     second window's worth through;
//   - a removed or replaced instance takes no new batch; those it took
//     finish, then its plugin stops.
//
// Only Channels and PluginSHA256 of cfg are read; the rest of the host's
// Config stays as New was given it.
func (h *Host) Reload(ctx context.Context, channels map[string]ChannelConfig, pluginSHA256 map[string]string) (ReloadResult, error) {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	h.mu.Lock()
	closed, started := h.closed, h.started
	h.mu.Unlock()
	if closed {
		return ReloadResult{}, ErrClosed
	}
	cfg := h.cfg
	cfg.PluginSHA256 = pluginSHA256
	srcs, err := sources(cfg)
	if err != nil {
		return ReloadResult{}, err
	}
	h.imu.RLock()
	old := maps.Clone(h.instances)
	h.imu.RUnlock()

	var res ReloadResult
	fresh := map[string]*instance{}
	// The new plugins' redactor knows every secret of the new config (an
	// unchanged channel keeps its own, of the config it started with).
	all := slices.Clone(h.cfg.Secrets)
	for _, name := range slices.Sorted(maps.Keys(channels)) {
		in, secrets, err := h.newChannel(name, channels[name], srcs)
		if err != nil {
			return ReloadResult{}, err
		}
		all = append(all, secrets...)
		prev, had := old[name]
		switch {
		case !had:
			res.Added = append(res.Added, name)
		case prev.sameAs(in):
			continue
		default:
			res.Changed = append(res.Changed, name)
			in.lim = prev.limiter() // start replaces it if the limits differ
		}
		fresh[name] = in
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if _, ok := channels[name]; !ok {
			res.Removed = append(res.Removed, name)
		}
	}
	h.cfg.PluginSHA256 = pluginSHA256
	redact := newRedactor(all)
	for _, in := range fresh {
		in.setRedact(redact)
	}

	if started {
		first := make(chan struct{}, len(fresh))
		for _, in := range fresh {
			h.launch(in, func() { first <- struct{}{} })
		}
		for range fresh {
			select {
			case <-first:
			case <-ctx.Done():
				// Switch anyway: the new plugins keep starting, and the
				// config asked for them.
			}
		}
	}

	h.imu.Lock()
	var retired []*instance
	for name, in := range fresh {
		if prev, ok := h.instances[name]; ok {
			retired = append(retired, prev)
		}
		h.instances[name] = in
	}
	for _, name := range res.Removed {
		retired = append(retired, h.instances[name])
		delete(h.instances, name)
	}
	h.imu.Unlock()
	for _, in := range retired {
		h.wg.Go(func() {
			// No batch reaches it any more (it left the map under the
			// lock Send counts under); those it took finish first.
			in.inflight.Wait()
			if in.stop != nil {
				in.stop()
			}
		})
	}
	for _, name := range res.Added {
		h.log.Info("channel added by reload", "channel", name)
	}
	for _, name := range res.Changed {
		h.log.Info("channel changed by reload: new plugin started, the old one stops once its batches in flight finish", "channel", name)
	}
	for _, name := range res.Removed {
		h.log.Info("channel removed by reload: its plugin stops once its batches in flight finish", "channel", name)
	}
	return res, nil
}

// sameAs reports whether other would run the same plugin with the same
// config: then a reload keeps in running.
func (in *instance) sameAs(other *instance) bool {
	a, b := in.src, other.src
	errText := func(e error) string {
		if e == nil {
			return ""
		}
		return e.Error()
	}
	return a.name == b.name && a.path == b.path && a.builtin == b.builtin && a.sha256 == b.sha256 &&
		bytes.Equal(a.checksum, b.checksum) && errText(a.err) == errText(b.err) && bytes.Equal(in.config, other.config)
}

// String lists the result for a log line.
func (r ReloadResult) String() string {
	return fmt.Sprintf("added %v, removed %v, changed %v", r.Added, r.Removed, r.Changed)
}

// inflightN counts the batches in flight (for tests).
func (in *instance) inflightN() int {
	in.lock()
	defer in.unlock()
	return in.sends
}

func (in *instance) countSend(d int) {
	in.lock()
	in.sends += d
	in.unlock()
}
