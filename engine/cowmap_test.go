package engine

import (
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"
)

// A frozen view keeps what the map held when it was frozen, whatever is
// set, replaced and deleted afterwards, over several generations; and the
// map itself sees every write.
func TestCowMapFrozenViewsDoNotChange(t *testing.T) {
	t.Parallel()
	var c cowMap[int]
	want := map[string]int{}
	set := func(k string, v int) { c.Set(k, v); want[k] = v }
	del := func(k string) { c.Delete(k); delete(want, k) }
	for i := range 20000 {
		set(fmt.Sprint("k", i), i)
	}
	type frozen struct {
		view cowMap[int]
		want map[string]int
	}
	var views []frozen
	for gen := range 4 {
		views = append(views, frozen{c.freeze(), maps.Clone(want)})
		for i := gen; i < 20000; i += 3 {
			set(fmt.Sprint("k", i), -i)         // replace
			set(fmt.Sprint("new", gen, i), gen) // add
		}
		for i := gen; i < 20000; i += 7 {
			del(fmt.Sprint("k", i))
		}
		del("absent") // a no-op
	}
	require.Equal(t, want, c.toMap())
	require.Equal(t, len(want), c.Len())
	for i, f := range views {
		require.Equal(t, f.want, f.view.toMap(), "view %d", i)
		require.Equal(t, len(f.want), f.view.Len(), "view %d", i)
		for k, v := range f.want {
			got, ok := f.view.Get(k)
			require.True(t, ok)
			require.Equal(t, v, got)
		}
	}
}

// Deleting the entry being visited while ranging over All is allowed (as
// prune does), including on shards a frozen view shares.
func TestCowMapDeleteWhileRanging(t *testing.T) {
	t.Parallel()
	var c cowMap[int]
	for i := range 1000 {
		c.Set(fmt.Sprint(i), i)
	}
	view := c.freeze()
	for k, v := range c.All() {
		if v%2 == 0 {
			c.Delete(k)
		}
	}
	require.Equal(t, 500, c.Len())
	for _, v := range c.All() {
		require.Equal(t, 1, v%2)
	}
	require.Equal(t, 1000, view.Len())
	require.Len(t, view.toMap(), 1000)
}

// A map sized for a restore holds what is set in it like any other, and
// its frozen views stay as frozen.
func TestCowMapReserved(t *testing.T) {
	t.Parallel()
	var c cowMap[int]
	c.reserve(10 * cowShards)
	require.Zero(t, c.Len())
	want := map[string]int{}
	for i := range 10 * cowShards {
		c.Set(fmt.Sprint(i), i)
		want[fmt.Sprint(i)] = i
	}
	view := c.freeze()
	c.Delete("0")
	require.Equal(t, want, view.toMap())
	delete(want, "0")
	require.Equal(t, want, c.toMap())
	require.Equal(t, len(want), c.Len())
}
