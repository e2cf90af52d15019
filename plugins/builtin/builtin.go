// Package builtin lists the channels compiled into the herald binary. The
// hidden command `herald plugin serve NAME` serves one of them as a go-plugin
// subprocess, so built-in and external channels cross the same boundary.
package builtin

import (
	"maps"
	"slices"

	"github.com/heraldhq/herald/plugins/mock"
	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecom"
)

// registry maps a built-in plugin's name to its constructor. Add a channel
// with one line here.
var registry = map[string]func() sdk.Channel{
	"mock":  func() sdk.Channel { return mock.New() },
	"wecom": func() sdk.Channel { return wecom.New() },
}

// Lookup returns the constructor of the built-in channel name.
func Lookup(name string) (func() sdk.Channel, bool) {
	f, ok := registry[name]
	return f, ok
}

// Names returns the built-in channels' names, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registry))
}
