package engine

import (
	"iter"
	"maps"
)

// cowShards is how many shards a cowMap has: a snapshot copies this many
// pointers, and the first write to a shard after a snapshot copies that
// shard (a millionth of a million-entry map is a 244-entry one).
const cowShards = 4096

// cowMap is a string-keyed map that a snapshot captures in constant time:
// the entries live in shards, each stamped with the generation that made
// it; freeze hands out the current shards and starts a new generation, and
// a write to a shard of an older generation first copies that shard. The
// frozen view is never written again, so Persist reads it while Apply
// goes on. Shards are made on first write. Only Apply and Restore write,
// under the FSM's write lock; readers hold the read lock.
type cowMap[V any] struct {
	shards [cowShards]*cowShard[V]
	gen    uint64
	n      int
}

type cowShard[V any] struct {
	gen uint64
	m   map[string]V
}

// shardOf hashes k (FNV-1a: deterministic, no seed, allocation free).
func shardOf(k string) int {
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return int(h % cowShards)
}

// Get returns the value of k.
func (c *cowMap[V]) Get(k string) (V, bool) {
	s := c.shards[shardOf(k)]
	if s == nil {
		var zero V
		return zero, false
	}
	v, ok := s.m[k]
	return v, ok
}

// Has says whether k is set.
func (c *cowMap[V]) Has(k string) bool {
	_, ok := c.Get(k)
	return ok
}

// Len is the number of entries.
func (c *cowMap[V]) Len() int { return c.n }

// writable returns k's shard, copied first if a frozen view shares it.
func (c *cowMap[V]) writable(k string, create bool) *cowShard[V] {
	i := shardOf(k)
	s := c.shards[i]
	switch {
	case s == nil && !create:
		return nil
	case s == nil:
		s = &cowShard[V]{gen: c.gen, m: map[string]V{}}
		c.shards[i] = s
	case s.gen != c.gen:
		s = &cowShard[V]{gen: c.gen, m: maps.Clone(s.m)}
		c.shards[i] = s
	}
	return s
}

// reserve sizes an empty map for about n entries (a restore knows how
// many come): growing 4096 maps step by step costs more than one.
func (c *cowMap[V]) reserve(n int) {
	if c.n > 0 || n < 8*cowShards {
		return
	}
	per := n/cowShards + n/cowShards/8 + 1
	for i := range c.shards {
		c.shards[i] = &cowShard[V]{gen: c.gen, m: make(map[string]V, per)}
	}
}

// Set sets k to v.
func (c *cowMap[V]) Set(k string, v V) {
	s := c.writable(k, true)
	before := len(s.m)
	s.m[k] = v
	c.n += len(s.m) - before
}

// Delete removes k.
func (c *cowMap[V]) Delete(k string) {
	if !c.Has(k) {
		return
	}
	delete(c.writable(k, false).m, k)
	c.n--
}

// All yields every entry, in no particular order. The caller must not
// write the map while it iterates, except to delete the entry yielded.
func (c *cowMap[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for i := range c.shards {
			s := c.shards[i]
			if s == nil {
				continue
			}
			// A delete copies a shared shard: go on over the one met.
			for k, v := range s.m {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// Values yields every value, in no particular order.
func (c *cowMap[V]) Values() iter.Seq[V] {
	return func(yield func(V) bool) {
		for _, v := range c.All() {
			if !yield(v) {
				return
			}
		}
	}
}

// Keys yields every key, in no particular order.
func (c *cowMap[V]) Keys() iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range c.All() {
			if !yield(k) {
				return
			}
		}
	}
}

// freeze returns a view of the map as it is now, which later writes to c
// leave alone. It costs a copy of the shard pointers.
func (c *cowMap[V]) freeze() cowMap[V] {
	f := cowMap[V]{shards: c.shards, gen: c.gen, n: c.n}
	c.gen++
	return f
}

// toMap copies the entries into a plain map (the version-1 snapshot and
// tests).
func (c *cowMap[V]) toMap() map[string]V {
	out := make(map[string]V, c.n)
	for k, v := range c.All() {
		out[k] = v
	}
	return out
}

// fromMap sets every entry of m.
func (c *cowMap[V]) fromMap(m map[string]V) {
	for k, v := range m {
		c.Set(k, v)
	}
}

// At returns the value of k, or the zero value.
func (c *cowMap[V]) At(k string) V {
	v, _ := c.Get(k)
	return v
}
