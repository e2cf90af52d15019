package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"google.golang.org/grpc/grpclog"
)

// The log formats (log_format): text, slog's key=value lines, or json, one
// JSON object per line (slog.NewJSONHandler) for a log pipeline. Raft's
// and the plugins' lines reach the same handler through engine/hclogslog.
const (
	logFormatText = "text"
	logFormatJSON = "json"
)

// checkLogFormat validates log_format ("" is text).
func checkLogFormat(format string) error {
	switch format {
	case "", logFormatText, logFormatJSON:
		return nil
	}
	return fmt.Errorf("config: log_format %q: want text or json", format)
}

// newLogger is the process's logger at level, in format, on stderr.
func newLogger(level, format string) *slog.Logger {
	return slog.New(newLogHandler(os.Stderr, level, format))
}

// newLoggerAt is newLogger at a level that may change: the agent's
// slog.LevelVar, which a config reload sets (reload.go).
func newLoggerAt(level slog.Leveler, format string) *slog.Logger {
	return slog.New(newLogHandlerAt(os.Stderr, level, format))
}

func newLogHandler(w io.Writer, level, format string) slog.Handler {
	return newLogHandlerAt(w, parseLogLevel(level), format)
}

func newLogHandlerAt(w io.Writer, level slog.Leveler, format string) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if format == logFormatJSON {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// routeLibraryLogs sends what libraries write through Go's log package
// and gRPC's logger to log, so that no line of the agent's bypasses its
// format. gRPC's warnings and errors (info is noise: connection state
// changes) become one record per line, component grpc. Call it before
// anything uses gRPC: its logger may not be swapped while in use.
func routeLibraryLogs(log *slog.Logger) {
	slog.SetDefault(log)
	g := log.With("component", "grpc").Handler()
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, slog.NewLogLogger(g, slog.LevelWarn).Writer(), slog.NewLogLogger(g, slog.LevelError).Writer()))
}

// raftLogLevel is the level of Raft's own lines: log_level's (info when
// unset), unless a caller (herald dev) set its own.
func raftLogLevel(cfg nodeConfig) string {
	switch {
	case cfg.raftLogLevel != "":
		return cfg.raftLogLevel
	case cfg.LogLevel != "":
		return cfg.LogLevel
	}
	return "info"
}

// loggedError is an error the agent has logged already, in JSON: run does
// not print it again as a "herald: REASON" line, which a log pipeline
// reading JSON could not parse. The exit status is still 1.
type loggedError struct{ err error }

func (e *loggedError) Error() string { return e.err.Error() }
func (e *loggedError) Unwrap() error { return e.err }

// logged logs why the agent stops and, in JSON format, marks the error as
// logged; in text the "herald: REASON" line says it.
func logged(log *slog.Logger, format string, err error) error {
	if err == nil || format != logFormatJSON {
		return err
	}
	log.Error("stopping", "err", err)
	return &loggedError{err}
}
