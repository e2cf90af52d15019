package main

import (
	"maps"
	"net/url"
	"slices"
	"strconv"

	"github.com/spf13/cobra"
)

// listQuery is the query string of a list command (audit, deliveries,
// tasks): the page size, each filter flag that was given (an empty one is
// left out, so the node's default applies), and each time flag, typed
// in the display zone and sent as RFC 3339 with its offset and any
// fraction of a second (cut to whole seconds, a record a moment before
// the typed time was listed). Both maps are query key → flag value; a
// time flag is named --KEY.
func listQuery(cmd *cobra.Command, limit int, filters, times map[string]string) (url.Values, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	for k, v := range filters {
		if v != "" {
			q.Set(k, v)
		}
	}
	// In key order, so that of two bad times the same one is named.
	for _, k := range slices.Sorted(maps.Keys(times)) {
		v, err := wireTime(cmd, "--"+k, times[k])
		if err != nil {
			return nil, err
		}
		if v != "" {
			q.Set(k, v)
		}
	}
	return q, nil
}
