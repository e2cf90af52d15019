package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
)

func TestAuditCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	out, err := runHerald(t, "audit", "--addr", addr)
	require.NoError(t, err)
	require.Equal(t, "no audit records\n", out)

	for i, r := range []engine.RecordAudit{
		{Actor: "ops", Role: "operate", Remote: "10.0.5.7", Action: "task.submit", Target: "enq-1", Status: 201, Node: "n1"},
		{Actor: "ops", Role: "operate", Remote: "10.0.5.7", Via: "n2", Action: "rule.pause", Target: "daily_report", Status: 200, Node: "n1"},
		{Actor: "root", Role: "admin", Remote: "10.0.5.9", Action: "cluster.remove", Target: "n3", Status: 200, Node: "n1"},
	} {
		r.At = cliNow.Add(time.Duration(i) * time.Minute)
		node.apply(t, engine.CmdRecordAudit, r)
	}

	// Newest first, in the zone asked for, which the header names.
	out, err = runHerald(t, "audit", "--addr", addr, "--tz", "Asia/Shanghai", "--limit", "2")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^TIME \(Asia/Shanghai\)\s+ACTOR\s+REMOTE\s+ACTION\s+TARGET\s+STATUS\s+NODE$`, lines[0])
	require.Regexp(t, `^2026-12-01 10:02:00 \+08:00\s+root\s+10\.0\.5\.9\s+cluster\.remove\s+n3\s+200\s+n1$`, lines[1])
	require.Regexp(t, `^2026-12-01 10:01:00 \+08:00\s+ops\s+10\.0\.5\.7 via n2\s+rule\.pause\s+daily_report\s+200\s+n1$`, lines[2])
	require.Equal(t, "more: herald audit --cursor 2", lines[3])

	out, err = runHerald(t, "audit", "--addr", addr, "--cursor", "2")
	require.NoError(t, err)
	require.Contains(t, out, "enq-1")
	require.NotContains(t, out, "more:")

	// --since is read in the display zone; filters combine.
	var page api.AuditResponse
	out, err = runHerald(t, "audit", "--addr", addr, "--json", "--tz", "Asia/Shanghai", "--since", "2026-12-01 10:01", "--actor", "ops")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Records, 1)
	require.Equal(t, "rule.pause", page.Records[0].Action)

	// A typed time keeps its fraction of a second: the record at 02:01:00
	// is before 02:01:00.5 (sent as 02:01:00 it was listed).
	out, err = runHerald(t, "audit", "--addr", addr, "--json", "--since", "2026-12-01T02:01:00.5Z")
	require.NoError(t, err)
	page = api.AuditResponse{}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Records, 1)
	require.Equal(t, "cluster.remove", page.Records[0].Action)

	_, err = runHerald(t, "audit", "--addr", addr, "--limit", "0")
	require.ErrorContains(t, err, "limit")
}
