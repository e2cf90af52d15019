package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/schedule"
	"github.com/heraldhq/herald/rules"
)

func TestCronAtFiresAtThatSecond(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 17, 0, time.UTC)
	s, err := schedule.New(schedule.Spec{Cron: cronAt(at), Timezone: "UTC"}, nil)
	require.NoError(t, err)
	next, ok := s.Next(at.Add(-time.Hour))
	require.True(t, ok)
	require.Equal(t, at, next)
}

// TestBenchRulesCheck: the rules every bench writes (scheduled, and one
// fired only by API tasks) are rules a node loads, on the bench's channel.
func TestBenchRulesCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, schedule := range map[string]string{"burst": cronAt(time.Now()), "steady": "* * * * * *", "tick": "*/5 * * * * *", "blast": ""} {
		src := benchRule("bench_"+name, schedule, "mock", "2h", generatedRecipients(name, 3))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".lua"), []byte(src), 0o600))
	}
	require.Empty(t, rules.CheckChannels(dir, []string{"mock"}))
	require.NotEmpty(t, rules.CheckChannels(dir, []string{"wecom"}), "a channel the node lacks is found")
}
