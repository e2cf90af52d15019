// Package hclogslog makes an slog.Logger look like the hclog.Logger that
// HashiCorp's libraries require (Raft, go-plugin), so that their records
// end up in Herald's one slog log as structured records: the logger's name
// as "component", key/value pairs as attributes. It is the one bridge
// between the two; the cluster and the plugins host both use it.
package hclogslog

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Options configure New.
type Options struct {
	// Name is the logger's name, logged as "component" ("raft"); names
	// given by Named are appended with a dot ("raft.net").
	Name string
	// Level is the lowest level passed on, on top of what the slog
	// handler enables; hclog.NoLevel (the zero value) leaves it to the
	// handler.
	Level hclog.Level
	// RedactFunc scrubs secrets from every message and value on the way
	// (the plugins host hides a channel's credentials); nil: none.
	RedactFunc func(string) string
}

// logger is the hclog.Logger that New returns.
type logger struct {
	l       *slog.Logger
	name    string
	min     hclog.Level
	implied []any
	redact  func(string) string
}

// New returns an hclog.Logger that writes to l.
func New(l *slog.Logger, o Options) hclog.Logger {
	return &logger{l: l, name: o.Name, min: o.Level, redact: o.RedactFunc}
}

// text is s, redacted.
func (h *logger) text(s string) string {
	if h.redact == nil {
		return s
	}
	return h.redact(s)
}

const levelTrace = slog.LevelDebug - 4

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *logger) Log(level hclog.Level, msg string, args ...any) {
	if !h.enabled(level) {
		return
	}
	lvl := toSlog(level)
	attrs := make([]any, 0, len(args)+2)
	if h.name != "" {
		attrs = append(attrs, slog.String("component", h.name))
	}
	for i := 0; i < len(args); i += 2 {
		key := fmt.Sprint(args[i])
		if i+1 >= len(args) {
			attrs = append(attrs, slog.String("extra", h.text(key)))
			break
		}
		attrs = append(attrs, slog.Any(key, h.scrub(args[i+1])))
	}
	h.l.Log(context.Background(), lvl, h.text(msg), attrs...)
}

// scrub redacts a value, turning it into its text when that text contained a
// secret.
func (h *logger) scrub(v any) any {
	if h.redact == nil {
		return v
	}
	switch v := v.(type) {
	case string:
		return h.redact(v)
	case error:
		return h.redact(v.Error())
	case nil, bool, int, int64, float64:
		return v
	}
	s := fmt.Sprint(v)
	if r := h.redact(s); r != s {
		return r
	}
	return v
}

func (h *logger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *logger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *logger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *logger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *logger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *logger) enabled(l hclog.Level) bool {
	return (h.min == hclog.NoLevel || l >= h.min) && h.l.Enabled(context.Background(), toSlog(l))
}

func (h *logger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *logger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *logger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *logger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *logger) IsError() bool { return h.enabled(hclog.Error) }

func (h *logger) ImpliedArgs() []any { return h.implied }

func (h *logger) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	scrubbed := make([]any, len(args))
	for i, a := range args {
		if i%2 == 1 {
			a = h.scrub(a)
		}
		scrubbed[i] = a
	}
	c.l = h.l.With(scrubbed...)
	return &c
}

func (h *logger) Name() string { return h.name }

func (h *logger) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *logger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

// SetLevel is ignored: Options.Level and the slog handler decide.
func (h *logger) SetLevel(hclog.Level) {}

// GetLevel reports the lowest level the slog handler lets through; go-plugin
// uses it to skip parsing plugin log lines nobody would see.
func (h *logger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (h *logger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return log.New(lineWriter{h}, "", 0)
}

func (h *logger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{h}
}

// lineWriter logs what is written to it at info level, redacted.
type lineWriter struct{ h *logger }

func (w lineWriter) Write(p []byte) (int, error) {
	w.h.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ hclog.Logger = (*logger)(nil)
