package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// TestDeliveriesExportCmd: `herald deliveries export` writes every
// delivery once, whole, one JSON object a line, in id order, across many
// pages (2,500 deliveries: three pages of the CLI's 1,000); --since (read
// in --tz) and --rule filter.
func TestDeliveriesExportCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	slot := cliNow.Add(-24 * time.Hour)
	want := map[string]bool{}
	for run := range 25 {
		rule := "daily_report"
		if run%5 == 0 {
			rule = "enquiry_timeout"
		}
		at := slot.Add(time.Duration(run) * time.Minute)
		key := engine.RunKey(rule, at)
		node.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: rule, Slot: at, Now: at})
		var nds []engine.NewDelivery
		for p := range 100 {
			who := "p" + strconv.Itoa(p)
			nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, who), Recipient: who, Channel: "mock", NotBefore: at,
				Deadline: at.Add(time.Hour), Payload: json.RawMessage(`{"content":"run ` + strconv.Itoa(run) + `"}`)})
			want[engine.DeliveryID(key, who)] = true
		}
		node.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	}

	type line struct {
		ID      string          `json:"id"`
		Rule    string          `json:"rule"`
		Slot    time.Time       `json:"slot"`
		State   string          `json:"state"`
		Payload json.RawMessage `json:"payload"`
	}
	export := func(args ...string) []line {
		t.Helper()
		out, err := runHerald(t, append([]string{"deliveries", "export", "--addr", addr}, args...)...)
		require.NoError(t, err)
		var lines []line
		for _, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var l line
			require.NoError(t, json.Unmarshal([]byte(s), &l), "one JSON object a line: %.80s", s)
			lines = append(lines, l)
		}
		return lines
	}
	all := export()
	require.Len(t, all, len(want))
	for i, l := range all {
		require.True(t, want[l.ID], l.ID)
		if i > 0 {
			require.Greater(t, l.ID, all[i-1].ID, "in id order, none twice")
		}
		require.Equal(t, "pending", l.State)
		require.Contains(t, string(l.Payload), `"content":"run `)
	}

	// Run 20 and after: runs 20..24, of which 20 is enquiry_timeout's.
	since := slot.Add(20 * time.Minute).In(time.FixedZone("UTC+8", 8*3600)).Format("2006-01-02 15:04")
	recent := export("--since", since, "--tz", "Asia/Shanghai")
	require.Len(t, recent, 500)
	for _, l := range recent {
		require.False(t, l.Slot.Before(slot.Add(20*time.Minute)), l.Slot)
	}
	require.Len(t, export("--since", since, "--tz", "Asia/Shanghai", "--rule", "daily_report"), 400)
	require.Len(t, export("--rule", "enquiry_timeout"), 500)

	_, err := runHerald(t, "deliveries", "export", "--addr", addr, "--since", "soon")
	require.ErrorContains(t, err, "--since")
}
