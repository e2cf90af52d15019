package leader

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// A claimed group goes to the channel in batches of at most BatchSize
// messages and MaxBatchBytes of payload; one message larger than that
// still goes, alone.
func TestBatchesBoundCountAndBytes(t *testing.T) {
	t.Parallel()
	x := &executor{l: &Leader{cfg: Config{ExecutorConfig: ExecutorConfig{BatchSize: 3}}}}
	sizes := []int{10, 10, 10, 10, MaxBatchBytes / 2, MaxBatchBytes / 2, 1, 2 * MaxBatchBytes, 5}
	var claimed []engine.Claimed
	byID := map[string]*engine.Delivery{}
	for i, n := range sizes {
		id := fmt.Sprint(i)
		claimed = append(claimed, engine.Claimed{ID: id})
		byID[id] = &engine.Delivery{ID: id, Payload: []byte(strings.Repeat("x", n))}
	}
	var got [][]string
	for part := range x.batches(claimed, byID) {
		var ids []string
		for _, c := range part {
			ids = append(ids, c.ID)
		}
		got = append(got, ids)
	}
	require.Equal(t, [][]string{{"0", "1", "2"}, {"3", "4"}, {"5", "6"}, {"7"}, {"8"}}, got)
	require.Equal(t, len(sizes), len(slices.Concat(got...)), "every message once")
}
