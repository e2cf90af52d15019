package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/schedule"
)

// zoneRules has one rule that fires at 09:00 in each recipient's zone.
var zoneRules = enginetest.Rules{SetHash: "h", List: []engine.Rule{{Name: "local", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", PerRecipient: true,
	Zones: []string{"America/New_York", "Asia/Shanghai", "Europe/Berlin", "Europe/Paris"}}}}

// setupZones is an API over zoneRules that builds schedules, at now0.
func setupZones() *apiBundle {
	n := enginetest.New()
	return &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: zoneRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} },
		ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
			return schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone}, nil)
		},
	})}
}

// A slot fired by hand for a per-recipient rule starts the zones' runs
// under the scheduler's keys: the zones whose 09:00 it is, each once.
func TestFireZonesByHand(t *testing.T) {
	t.Parallel()
	b := setupZones()
	n := b.node
	// 09:00 CET on 30 November: Berlin and Paris, not Shanghai or New York.
	code, out := b.do(t, http.MethodPost, "/v1/rules/local/fire", `{"slot":"2026-11-30T09:00:00+01:00"}`)
	require.Equal(t, http.StatusCreated, code, out)
	slot := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	require.Equal(t, []any{engine.ZoneRunKey("local", "Europe/Berlin", slot), engine.ZoneRunKey("local", "Europe/Paris", slot)}, out["runs"])
	run, ok := n.FSM.Run(engine.ZoneRunKey("local", "Europe/Berlin", slot))
	require.True(t, ok)
	require.Equal(t, "Europe/Berlin", run.Zone)
	require.Equal(t, "2026-11-30", run.Date)
	require.True(t, run.Manual)

	code, out = b.do(t, http.MethodPost, "/v1/rules/local/fire", `{"slot":"2026-11-30T09:00:00+01:00"}`)
	require.Equal(t, http.StatusConflict, code, out)
	require.Contains(t, out["error"], "already fired in every zone")

	code, out = b.do(t, http.MethodPost, "/v1/rules/local/fire", `{"slot":"2026-11-30T10:00:00+01:00"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Contains(t, out["reason"], "in any of its zones")
	require.Len(t, n.FSM.Runs(nil), 2)
}

// A zone's slot that was skipped is fired after all by hand, once.
func TestFireZonesBackfillsSkipped(t *testing.T) {
	t.Parallel()
	b := setupZones()
	n := b.node
	slot := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC) // 09:00 in Shanghai
	key := engine.ZoneRunKey("local", "Asia/Shanghai", slot)
	b.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "local", Slot: slot, Zone: "Asia/Shanghai", Skip: true, Now: slot.Add(3 * time.Hour)})
	code, out := b.do(t, http.MethodPost, "/v1/rules/local/fire", `{"slot":"2026-11-30T09:00:00+08:00","by":"ana@desk"}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.Equal(t, "skipped", out["backfilled"])
	run, _ := n.FSM.Run(key)
	require.Equal(t, engine.RunPlanning, run.State)
	require.Equal(t, "loopback", run.FiredBy, "who fired it, as verified (a rule of one zone records it too)")
	require.Equal(t, "ana@desk", run.FireNote, "what the request says is a note")
	code, out = b.do(t, http.MethodPost, "/v1/rules/local/fire", `{"slot":"2026-11-30T09:00:00+08:00"}`)
	require.Equal(t, http.StatusConflict, code, out)
}
