package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exactQuantile is the nearest-rank q-quantile of sorted values.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func TestSketchQuantilesWithinPrecision(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name string
		gen  func(rng *rand.Rand) time.Duration
	}{
		// The case: every send took milliseconds, and the p95
		// read 0.9 s, the interpolated bound of the first bucket.
		{"milliseconds", func(rng *rand.Rand) time.Duration { return time.Duration(rng.IntN(40_000)) * time.Microsecond }},
		{"staggered over 10 minutes", func(rng *rand.Rand) time.Duration { return time.Duration(rng.Int64N(int64(10 * time.Minute))) }},
		{"long tail", func(rng *rand.Rand) time.Duration { return time.Duration(rng.ExpFloat64() * float64(3*time.Second)) }},
		{"sub-microsecond and zero", func(rng *rand.Rand) time.Duration { return time.Duration(rng.IntN(3000)) }},
		{"hours", func(rng *rand.Rand) time.Duration { return time.Duration(rng.Int64N(int64(30 * time.Hour))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(i))) // one per subtest: they run in parallel
			var s *Sketch
			var vals []time.Duration
			for range 5000 {
				v := tc.gen(rng)
				vals = append(vals, v)
				s = s.withValue(v)
			}
			slices.Sort(vals)
			require.Equal(t, uint64(len(vals)), s.Count)
			require.Equal(t, vals[0], s.Min)
			require.Equal(t, vals[len(vals)-1], s.Max)
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
				want := exactQuantile(vals, q)
				got := s.Quantile(q)
				tol := max(time.Duration(float64(want)*SketchPrecision), time.Microsecond)
				require.InDelta(t, float64(want), float64(got), float64(tol), "q=%v want %v got %v", q, want, got)
			}
		})
	}
}

func TestSketchStaysOrderedAndImmutable(t *testing.T) {
	t.Parallel()
	var s *Sketch
	s = s.withValue(5 * time.Second)
	before := s
	s2 := s.withValue(time.Millisecond).withValue(time.Hour).withValue(5 * time.Second)
	require.Equal(t, uint64(1), before.Count, "an older sketch is never changed")
	require.Len(t, before.Bins, 1)
	require.Equal(t, uint64(4), s2.Count)
	require.True(t, slices.IsSortedFunc(s2.Bins, func(a, b SketchBin) int { return int(a.Index - b.Index) }))
	require.Equal(t, time.Millisecond, s2.Min)
	require.Equal(t, time.Hour, s2.Max)

	m := s2.Merge(before)
	require.Equal(t, uint64(5), m.Count)
	require.Equal(t, uint64(4), m.CountBelow(6*time.Second))
	require.Equal(t, uint64(1), m.CountBelow(2*time.Second))
	require.InDelta(t, float64(5*time.Second), float64(m.Quantile(0.5)), float64(5*time.Second)*SketchPrecision)
	require.Same(t, s2, s2.Merge(nil))
	require.Zero(t, (*Sketch)(nil).Quantile(0.95))
}

func TestSketchBucketsAreContiguous(t *testing.T) {
	t.Parallel()
	prevHi := time.Duration(0)
	for i := range int32(2000) {
		lo, hi := sketchBounds(i)
		require.Equal(t, prevHi, lo, "bucket %d", i)
		require.Greater(t, hi, lo)
		require.Equal(t, i, sketchIndex(lo), "bucket %d", i)
		require.Equal(t, i, sketchIndex(hi-time.Microsecond), "bucket %d", i)
		prevHi = hi
	}
}

// FindDeliveries with Newest keeps exactly the tail of the full order.
func TestFindDeliveriesNewest(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := RunKey("r", t0)
	b.apply(CmdStartRun, StartRun{Key: key, Rule: "r", Slot: t0, Now: t0})
	rng := rand.New(rand.NewPCG(3, 4))
	var nds []NewDelivery
	for i := range 500 {
		nds = append(nds, NewDelivery{ID: DeliveryID(key, string(rune('a'+i%26))+strconv.Itoa(i)), Recipient: "u" + strconv.Itoa(i%7),
			NotBefore: t0.Add(time.Duration(rng.IntN(40)) * time.Second), Deadline: t0.Add(time.Hour)})
	}
	b.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds})
	all, total := b.fsm.FindDeliveries(DeliveryFilter{})
	require.Equal(t, 500, total)
	require.Len(t, all, 500)
	for _, k := range []int{1, 7, 100, 499, 500, 900} {
		got, total := b.fsm.FindDeliveries(DeliveryFilter{Newest: k})
		require.Equal(t, 500, total)
		require.Equal(t, all[max(len(all)-k, 0):], got, "newest %d", k)
	}
	some, total := b.fsm.FindDeliveries(DeliveryFilter{Recipients: []string{"u3"}, Newest: 10})
	require.Len(t, some, 10)
	require.Greater(t, total, 10)
	for _, d := range some {
		require.Equal(t, "u3", d.Recipient)
	}
}
