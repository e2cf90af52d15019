package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// TestNodeStopsOnASnapshotThatDoesNotRead: a node that let its state go
// for a snapshot whose body then does not read exits with
// exitSnapshotUnreadable and says so, not that a command is too new. It
// runs the node's state machine in a child process of this test binary
// (the halt exits).
func TestNodeStopsOnASnapshotThatDoesNotRead(t *testing.T) {
	if os.Getenv("HERALD_TEST_HALT_CHILD") == "1" {
		f := newFSM(slog.New(slog.NewTextHandler(io.Discard, nil)))
		cmd, err := engine.Encode(engine.CmdSubmitTask, engine.SubmitTask{Key: "k", Rule: "r", DueAt: haltT0, Now: haltT0})
		if err != nil {
			panic(err)
		}
		f.Apply(1, 1, cmd)
		_ = f.Restore(bytes.NewReader([]byte(`{"version":2,"applied":9,"fsm_version":1}` + "\n" + "not gob")))
		os.Exit(0) // not reached: the halt exits
	}
	c := exec.Command(os.Args[0], "-test.run=^TestNodeStopsOnASnapshotThatDoesNotRead$")
	c.Env = append(os.Environ(), "HERALD_TEST_HALT_CHILD=1")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err := c.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the child went on: %v", err)
	require.Equal(t, exitSnapshotUnreadable, exit.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "the snapshot at index 9 does not read")
}

var haltT0 = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
