package api

import (
	"net/http"
	"slices"
	"strings"
)

// onlyParams answers 400 naming the first query parameter of r that is not
// one of known (or pretty, which every answer takes), and reports whether
// all were known. A list asked with a typo (status for state) would
// otherwise answer unfiltered, and be read as the filtered list.
func onlyParams(w http.ResponseWriter, r *http.Request, known ...string) bool {
	q := r.URL.Query()
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names) // the same answer for the same query
	for _, k := range names {
		if k != "pretty" && !slices.Contains(known, k) {
			want := "none"
			if len(known) > 0 {
				want = "one of " + strings.Join(known, ", ")
			}
			writeFieldError(w, &FieldError{k, "unknown parameter; want " + want})
			return false
		}
	}
	return true
}
