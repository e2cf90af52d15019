package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/engine"
)

// One clock on every screen: every time the CLI prints is in the display
// zone (--tz, else HERALD_TZ, else the machine's zone) with its offset, and
// every time it reads accepts RFC 3339 or "YYYY-MM-DD HH:MM[:SS]" in that
// zone.

// tzEnv names the display zone when --tz is not given.
const tzEnv = "HERALD_TZ"

type clockKey struct{}

// registerTZ declares --tz on the root and resolves the zone once before
// any subcommand runs, so a bad zone fails before anything is sent.
func registerTZ(root *cobra.Command) {
	root.PersistentFlags().String("tz", "", "time zone of every time shown and typed (IANA name, e.g. Asia/Shanghai; env "+tzEnv+"; default the machine's zone)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		loc, err := zoneFlag(cmd)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		cmd.SetContext(context.WithValue(ctx, clockKey{}, loc))
		return nil
	}
}

func zoneFlag(cmd *cobra.Command) (*time.Location, error) {
	name := os.Getenv(tzEnv)
	src := tzEnv
	if f := cmd.Flag("tz"); f != nil && f.Changed {
		name, src = f.Value.String(), "--tz"
	}
	if name == "" {
		// The machine's zone by its IANA name, as a node names it, so every
		// header that says the zone says "Asia/Shanghai", never Go's "Local";
		// Go's Local when the machine does not say its zone's name (a copied
		// /etc/localtime), so typed times still mean the machine's clock.
		name, _ = machineZone()
	}
	loc, err := engine.LoadZone(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return loc, nil
}

// zoneOf is the display zone resolved for cmd.
func zoneOf(cmd *cobra.Command) *time.Location {
	if cmd != nil && cmd.Context() != nil {
		if loc, ok := cmd.Context().Value(clockKey{}).(*time.Location); ok {
			return loc
		}
	}
	loc, err := zoneFlag(cmd)
	if err != nil {
		return time.Local
	}
	return loc
}

// showTime shows t in the display zone with its offset, or "-" when zero.
func showTime(cmd *cobra.Command, t time.Time) string {
	return engine.ShowTime(t, zoneOf(cmd))
}

// parseTime reads a time typed for flag.
func parseTime(cmd *cobra.Command, flag, s string) (time.Time, error) {
	t, err := engine.ParseTime(s, zoneOf(cmd))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", flag, err)
	}
	return t, nil
}

// wireTime is a time typed in a flag as a node is sent it: read in the
// display zone, and written RFC 3339 with its offset and any fraction of a
// second (cut to whole seconds, a typed 09:00:00.5 would say a moment
// earlier). An empty flag stays empty.
func wireTime(cmd *cobra.Command, flag, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	t, err := parseTime(cmd, flag, s)
	if err != nil {
		return "", err
	}
	return t.Format(time.RFC3339Nano), nil
}

// machineZoneName is the IANA name of the machine's zone, for a node whose
// display_timezone is not set: what the dashboard and the mock outbox are
// told must be a name a browser knows, never Go's "Local". TZ first, then
// the target of /etc/localtime; UTC when neither says.
func machineZoneName() string {
	if name, ok := machineZone(); ok {
		return name
	}
	return "UTC"
}

// machineZone is the IANA name of the machine's zone, when TZ or the
// target of /etc/localtime says it.
func machineZone() (string, bool) {
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" {
		if _, err := engine.LoadLocation(tz); err == nil {
			return tz, true
		}
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			if _, err := engine.LoadLocation(name); err == nil {
				return name, true
			}
		}
	}
	return "", false
}

// displayZoneName is a node's display zone: display_timezone, else the
// machine's.
func displayZoneName(configured string) string {
	if configured != "" && configured != "Local" {
		return configured
	}
	return machineZoneName()
}
