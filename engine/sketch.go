package engine

import (
	"math/bits"
	"slices"
	"time"
)

// Sketch records durations (slot → sent, lateness) precisely enough to
// answer any percentile within 1%: a log-linear histogram with 64
// sub-buckets per power of two of microseconds. Below 128 µs every value
// has its own bucket; above, a bucket is at most 1/64 of its lower bound
// wide, and a quantile read at the bucket's middle is off by at most
// 1/128 (0.8%). The coarse LatencyBuckets, which Prometheus needs, cannot
// say whether a p95 is 3 ms or 900 ms; this can.
//
// Apply builds it from the times the leader stamped, with integer
// arithmetic only, so every node holds the same bytes. Only the buckets
// that hold values are stored: a rule's day fills a few dozen.
type Sketch struct {
	Count uint64        `json:"count"`
	Sum   time.Duration `json:"sum"`
	Min   time.Duration `json:"min"`
	Max   time.Duration `json:"max"`
	Bins  []SketchBin   `json:"bins"` // by Index, ascending
}

// SketchBin is one bucket of a Sketch.
type SketchBin struct {
	Index int32  `json:"i"`
	N     uint64 `json:"n"`
}

// SketchPrecision is the largest relative error of Sketch.Quantile (for
// durations of 128 µs and more; below, the error is under 1 µs).
const SketchPrecision = 1.0 / 128

const sketchSubBits = 6 // 64 sub-buckets per power of two

// sketchIndex maps a duration to its bucket.
func sketchIndex(d time.Duration) int32 {
	v := uint64(max(d, 0) / time.Microsecond)
	e := max(bits.Len64(v)-(sketchSubBits+1), 0)
	return int32(e<<sketchSubBits) + int32(v>>e) //nolint:gosec // e ≤ 57 and v>>e < 128: small
}

// sketchBounds is the range [lo, hi) of durations in bucket i.
func sketchBounds(i int32) (lo, hi time.Duration) {
	e, m := int32(0), i
	if i >= 2<<sketchSubBits {
		e = i>>sketchSubBits - 1
		m = i - e<<sketchSubBits
	}
	return time.Duration(int64(m)<<e) * time.Microsecond, time.Duration(int64(m+1)<<e) * time.Microsecond
}

// withValue returns a copy of s (nil: empty) with d added. Records are
// immutable, so the bins are copied, never appended to in place.
func (s *Sketch) withValue(d time.Duration) *Sketch { return s.clone().add(d) }

// clone is a deep copy of s (nil for nil).
func (s *Sketch) clone() *Sketch {
	if s == nil {
		return nil
	}
	n := *s
	n.Bins = slices.Clone(s.Bins)
	return &n
}

// add adds d to s in place and returns s (a new sketch for nil): only for
// a sketch no stored record shares (see dayBatch).
func (s *Sketch) add(d time.Duration) *Sketch {
	d = max(d, 0)
	if s == nil {
		s = &Sketch{Min: d, Max: d}
	}
	s.Min, s.Max = min(s.Min, d), max(s.Max, d)
	idx := sketchIndex(d)
	at, found := slices.BinarySearchFunc(s.Bins, idx, func(b SketchBin, i int32) int { return int(b.Index - i) })
	if found {
		s.Bins[at].N++
	} else {
		s.Bins = slices.Insert(s.Bins, at, SketchBin{Index: idx, N: 1})
	}
	s.Count++
	s.Sum += d
	return s
}

// Merge returns the sum of two sketches (either may be nil).
func (s *Sketch) Merge(o *Sketch) *Sketch {
	switch {
	case s == nil || s.Count == 0:
		return o
	case o == nil || o.Count == 0:
		return s
	}
	n := &Sketch{Count: s.Count + o.Count, Sum: s.Sum + o.Sum, Min: min(s.Min, o.Min), Max: max(s.Max, o.Max)}
	n.Bins = make([]SketchBin, 0, len(s.Bins)+len(o.Bins))
	i, j := 0, 0
	for i < len(s.Bins) || j < len(o.Bins) {
		switch {
		case j == len(o.Bins) || (i < len(s.Bins) && s.Bins[i].Index < o.Bins[j].Index):
			n.Bins = append(n.Bins, s.Bins[i])
			i++
		case i == len(s.Bins) || o.Bins[j].Index < s.Bins[i].Index:
			n.Bins = append(n.Bins, o.Bins[j])
			j++
		default:
			n.Bins = append(n.Bins, SketchBin{Index: s.Bins[i].Index, N: s.Bins[i].N + o.Bins[j].N})
			i++
			j++
		}
	}
	return n
}

// Quantile is the q-quantile by nearest rank: the smallest recorded value
// with at least ⌈q·count⌉ values at or below it, within SketchPrecision.
// It is 0 for an empty sketch.
func (s *Sketch) Quantile(q float64) time.Duration {
	if s == nil || s.Count == 0 {
		return 0
	}
	rank := uint64(q * float64(s.Count))
	if float64(rank) < q*float64(s.Count) {
		rank++
	}
	rank = min(max(rank, 1), s.Count)
	var cum uint64
	for _, b := range s.Bins {
		cum += b.N
		if cum >= rank {
			lo, hi := sketchBounds(b.Index)
			mid := lo + (hi-lo)/2
			if hi-lo <= time.Microsecond {
				mid = lo // one value per bucket: exact to the microsecond
			}
			return min(max(mid, s.Min), s.Max)
		}
	}
	return s.Max
}

// Mean is the average recorded value.
func (s *Sketch) Mean() time.Duration {
	if s == nil || s.Count == 0 {
		return 0
	}
	return s.Sum / time.Duration(s.Count) //nolint:gosec // a count of deliveries
}

// CountBelow is how many values are below d, at the sketch's precision (a
// bucket is counted by its middle).
func (s *Sketch) CountBelow(d time.Duration) uint64 {
	if s == nil {
		return 0
	}
	var n uint64
	for _, b := range s.Bins {
		lo, hi := sketchBounds(b.Index)
		if lo+(hi-lo)/2 >= d {
			break
		}
		n += b.N
	}
	return n
}
