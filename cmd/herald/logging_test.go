package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLogFormat(t *testing.T) {
	t.Parallel()
	c := nodeConfig{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:8101", LogFormat: "xml"}
	err := c.validate()
	require.ErrorContains(t, err, `log_format "xml": want text or json`)
	for _, f := range []string{"", "text", "json"} {
		c.LogFormat = f
		require.NoError(t, c.validate(), f)
	}

	var buf bytes.Buffer
	slog.New(newLogHandler(&buf, "debug", "json")).Debug("hello", "component", "raft")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	require.Equal(t, "hello", rec["msg"])
	require.Equal(t, "DEBUG", rec["level"])

	// Raft's level follows log_level unless herald dev sets its own.
	require.Equal(t, "info", raftLogLevel(nodeConfig{}))
	require.Equal(t, "debug", raftLogLevel(nodeConfig{LogLevel: "debug"}))
	require.Equal(t, "error", raftLogLevel(nodeConfig{LogLevel: "debug", raftLogLevel: "error"}))
}

// An agent stopping with an error in JSON logs it as JSON and does not
// print it again as text.
func TestLoggedErrorIsNotPrintedTwice(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(newLogHandler(&buf, "info", "json"))
	cause := errors.New("http address 127.0.0.1:8101: address is already in use")
	err := logged(log, "json", cause)
	require.ErrorIs(t, err, cause)
	var le *loggedError
	require.ErrorAs(t, err, &le)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	require.Equal(t, "stopping", rec["msg"])
	require.Equal(t, cause.Error(), rec["err"])
	require.Same(t, cause, logged(log, "text", cause), "text: run prints herald: REASON")
}
