package api

import (
	"encoding/json"
	"fmt"
)

// maxListBytes bounds the items of one list answer. The item counts
// (limit) bound how many, this bounds how large: 1,000 tasks of 64 KiB data
// would be 64 MB, buffered and written at once, and the dashboard polls every
// 5 s. A list cut by bytes says so (a task page's next cursor; truncated
// elsewhere), and the client asks again for fewer or for the next page.
const maxListBytes = 4 << 20

// truncatedReason is the truncated field of a list cut by bytes.
var truncatedReason = fmt.Sprintf("the answer is bounded to %d MiB: ask for fewer (limit) or narrow the filter", maxListBytes>>20)

// encodeBounded encodes items in order, each with view, until the next one
// would pass budget bytes; it always takes at least one item (one item is
// bounded by the write limits). It returns the encoded items.
func encodeBounded[T any](items []T, budget int, view func(T) any) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(items))
	size := 0
	for _, it := range items {
		b, err := json.Marshal(view(it))
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && size+len(b) > budget {
			break
		}
		size += len(b) + 1
		out = append(out, b)
	}
	return out, nil
}

// encodeNewest is encodeBounded from the end of items (the newest): it
// keeps the newest that fit, in their original order.
func encodeNewest[T any](items []T, budget int, view func(T) any) ([]json.RawMessage, error) {
	rev := make([]T, len(items))
	for i, it := range items {
		rev[len(items)-1-i] = it
	}
	out, err := encodeBounded(rev, budget, view)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}
