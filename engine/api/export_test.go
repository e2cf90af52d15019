package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
)

// addRun starts a run of rule at slot with one delivery per recipient and
// returns their ids.
func addRun(t *testing.T, b *apiBundle, rule string, slot time.Time, payload string, recipients ...string) []string {
	t.Helper()
	key := engine.RunKey(rule, slot)
	b.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: rule, Slot: slot, Now: slot})
	var nds []engine.NewDelivery
	var ids []string
	for _, who := range recipients {
		id := engine.DeliveryID(key, who)
		ids = append(ids, id)
		nds = append(nds, engine.NewDelivery{ID: id, Recipient: who, Channel: "mock", NotBefore: slot, Deadline: slot.Add(time.Hour),
			Payload: json.RawMessage(payload)})
	}
	b.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	return ids
}

// exportPage gets one page of GET /v1/deliveries/export.
func exportPage(t *testing.T, b *apiBundle, q url.Values) api.ExportPage {
	t.Helper()
	rec := b.send(t, http.MethodGet, "/v1/deliveries/export?"+q.Encode(), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var page api.ExportPage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
	return page
}

// TestExportPagesAreCompleteWhileDeliveriesAreAdded: paging the export by
// its next cursor, with new runs added between pages, lists every delivery
// that was there before it started exactly once, in id order, and no
// delivery twice.
func TestExportPagesAreCompleteWhileDeliveriesAreAdded(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	slot := now0.Add(-48 * time.Hour)
	before := map[string]bool{}
	for i := range 20 {
		for _, id := range addRun(t, b, "daily", slot.Add(time.Duration(i)*time.Minute), `{"content":"x"}`, "alice", "bob", "carol") {
			before[id] = true
		}
	}
	seen := map[string]int{}
	q := url.Values{"limit": {"7"}}
	last, pages := "", 0
	for {
		page := exportPage(t, b, q)
		pages++
		for _, raw := range page.Deliveries {
			var d struct{ ID, Rule, State string }
			require.NoError(t, json.Unmarshal(raw, &d))
			require.Greater(t, d.ID, last, "in id order")
			last = d.ID
			seen[d.ID]++
		}
		// Runs keep arriving while the export pages through.
		addRun(t, b, "daily", slot.Add(time.Duration(100+pages)*time.Minute), `{"content":"y"}`, "alice", "bob")
		if page.Next == "" {
			break
		}
		require.Len(t, page.Deliveries, 7)
		q.Set("after", page.Next)
	}
	for id := range before {
		require.Equal(t, 1, seen[id], "delivery %s listed once", id)
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "delivery %s listed %d times", id, n)
	}
	require.GreaterOrEqual(t, pages, 9)
}

// TestExportFiltersAndBounds: since (a time with its zone, or in the
// display zone) and rule filter; a page is cut at about 4 MiB, whatever
// limit says, and goes on from there; bad parameters are 400s that name
// the field.
func TestExportFiltersAndBounds(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	slot := now0.Add(-48 * time.Hour)
	old := addRun(t, b, "daily", slot, `{}`, "alice")
	recent := addRun(t, b, "daily", slot.Add(2*time.Hour), `{}`, "alice")
	other := addRun(t, b, "weekly", slot.Add(2*time.Hour), `{}`, "alice")

	ids := func(p api.ExportPage) []string {
		var out []string
		for _, raw := range p.Deliveries {
			var d struct{ ID string }
			require.NoError(t, json.Unmarshal(raw, &d))
			out = append(out, d.ID)
		}
		return out
	}
	since := slot.Add(time.Hour).Format(time.RFC3339)
	require.ElementsMatch(t, append(recent, other...), ids(exportPage(t, b, url.Values{"since": {since}})))
	require.ElementsMatch(t, recent, ids(exportPage(t, b, url.Values{"since": {since}, "rule": {"daily"}})))
	require.ElementsMatch(t, append(old, recent...), ids(exportPage(t, b, url.Values{"rule": {"daily"}})))

	// 1 MiB payloads: four do not fit one answer.
	big := `{"content":"` + strings.Repeat("z", 1<<20) + `"}`
	heavy := addRun(t, b, "heavy", slot, big, "p1", "p2", "p3", "p4", "p5", "p6")
	var got []string
	q := url.Values{"rule": {"heavy"}, "limit": {"100"}}
	for {
		rec := b.send(t, http.MethodGet, "/v1/deliveries/export?"+q.Encode(), nil)
		require.Equal(t, http.StatusOK, rec.Code)
		require.LessOrEqual(t, rec.Body.Len(), 4<<20+4096, "one answer stays about 4 MiB")
		var page api.ExportPage
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		for _, raw := range page.Deliveries {
			require.Contains(t, string(raw), strings.Repeat("z", 1<<20), "payloads whole")
		}
		got = append(got, ids(page)...)
		if page.Next == "" {
			break
		}
		q.Set("after", page.Next)
	}
	require.ElementsMatch(t, heavy, got)

	for target, field := range map[string]string{
		"/v1/deliveries/export?limit=0":         "limit",
		"/v1/deliveries/export?limit=10001":     "limit",
		"/v1/deliveries/export?since=yesterday": "since",
		"/v1/deliveries/export?cursor=x":        "cursor",
	} {
		rec := b.send(t, http.MethodGet, target, nil)
		require.Equal(t, http.StatusBadRequest, rec.Code, target)
		require.Contains(t, rec.Body.String(), fmt.Sprintf("%q", field), target)
	}
}
