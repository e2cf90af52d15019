package rules

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/heraldhq/herald/engine/calendar"
)

// CheckError is one problem found by Check.
type CheckError struct {
	File    string
	Line    int // 0 when unknown
	Message string
}

func (e CheckError) String() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Message)
}

// Check loads dir as a node would (rules, people file, calendars) without
// watching it or touching any shared registry, and returns every error,
// sorted by file. No errors means the directory is good to deploy.
func Check(dir string) []CheckError { return CheckChannels(dir, nil) }

// CheckChannels is Check that also refuses a rule whose channel is not one
// of channels (the instances of a node's config); nil checks no channel.
func CheckChannels(dir string, channels []string) []CheckError {
	return CheckNode(dir, channels, 0, 0)
}

// CheckNode is CheckChannels under a node's rule memory limit and rule
// time limit (0: each one's default), so that a file the node would
// refuse for its memory or its time is refused here too.
func CheckNode(dir string, channels []string, memoryLimit uint64, callTimeout time.Duration) []CheckError {
	s, err := Load(Config{Dir: dir, Channels: channels, MemoryLimit: memoryLimit, CallTimeout: callTimeout, Calendars: calendar.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PoolSize: 1})
	if err != nil {
		return []CheckError{{File: dir, Message: err.Error()}}
	}
	var out []CheckError
	for _, st := range s.Status() {
		if st.Error != "" {
			out = append(out, CheckError{File: st.File, Line: st.Line, Message: st.Error})
		}
	}
	return out
}
