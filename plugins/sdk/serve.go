package sdk

import (
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// EnvParentFD names the environment variable through which the host tells a
// plugin the file descriptor of its end of the host-watch pipe. The host
// keeps the other end open for as long as it wants the plugin; when the host
// dies, even by SIGKILL, the kernel closes it and the plugin sees EOF.
// go-plugin itself does not stop a plugin whose host died: the plugin keeps
// serving its socket forever.
const EnvParentFD = "HERALD_PLUGIN_PARENT_FD"

// EnvStuckAfter names the environment variable through which the host
// tells a plugin how long a Send may go on after its call was cancelled
// before the plugin reports itself stuck (a Go duration; default
// DefaultStuckAfter). The host passes its StartTimeout, its bound on
// every other call.
const EnvStuckAfter = "HERALD_PLUGIN_STUCK_AFTER"

// DefaultStuckAfter is the stuck bound of a plugin the host did not give
// one.
const DefaultStuckAfter = 30 * time.Second

// stuckAfter reads EnvStuckAfter.
func stuckAfter(logger *slog.Logger) time.Duration {
	s := os.Getenv(EnvStuckAfter)
	if s == "" {
		return DefaultStuckAfter
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		logger.Warn("ignoring malformed "+EnvStuckAfter, "value", s)
		return DefaultStuckAfter
	}
	return d
}

// stderr is the process's original stderr, which the host reads for plugin
// logs. go-plugin swaps os.Stderr for its stdio stream once serving, so
// loggers made later must not pick up os.Stderr then.
var stderr = os.Stderr

// parentPoll is how often a plugin started without the host-watch pipe
// checks that its parent process is still the one that started it.
const parentPoll = time.Second

// Serve runs c as a channel plugin and does not return: it answers the
// host's handshake on stdout, serves the channel protocol over gRPC, and
// exits when the host closes the plugin or dies. Call it from main.
func Serve(c Channel) {
	logger := Logger()
	go watchHost(logger, os.Exit)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &Plugin{Impl: c, stuckAfter: stuckAfter(logger)}},
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Level:      hclog.Info,
			Output:     stderr,
			JSONFormat: true,
		}),
	})
	// go-plugin returns when the host's gRPC connection asked it to stop.
	os.Exit(0)
}

// watchHost exits the process when the host is gone: by the host-watch pipe
// when the host gave one, else by noticing that the parent process changed
// (the plugin was re-parented after its host died).
func watchHost(logger *slog.Logger, exit func(int)) {
	if s := os.Getenv(EnvParentFD); s != "" {
		fd, err := strconv.Atoi(s)
		if err == nil && fd > 2 {
			watchPipe(os.NewFile(uintptr(fd), "host-watch"), logger, exit)
			return
		}
		logger.Warn("ignoring malformed "+EnvParentFD, "value", s)
	}
	parent := os.Getppid()
	for range time.Tick(parentPoll) {
		if os.Getppid() != parent {
			logger.Info("host went away; plugin exiting")
			exit(0)
			return
		}
	}
}

// watchPipe calls exit once f reaches EOF. The host never writes to it:
// Read returns only when the host's end is closed.
func watchPipe(f io.Reader, logger *slog.Logger, exit func(int)) {
	_, _ = io.Copy(io.Discard, f)
	logger.Info("host went away; plugin exiting")
	exit(0)
}

// Logger returns a logger for plugin code. It writes JSON lines to stderr in
// the shape go-plugin forwards to the host's log, so a plugin's records
// appear in Herald's log with their level and attributes. Never log secrets.
func Logger() *slog.Logger { return NewLoggerTo(stderr) }

// NewLoggerTo is Logger writing to w, for tests.
func NewLoggerTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       slog.LevelDebug,
		ReplaceAttr: hclogAttr,
	}))
}

// hclogAttr renames slog's built-in keys to hclog's JSON keys, which
// go-plugin's host side parses (with its fixed timestamp layout).
func hclogAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
	case slog.LevelKey:
		lvl := a.Value.Any().(slog.Level)
		name := "error"
		switch {
		case lvl < slog.LevelInfo:
			name = "debug"
		case lvl < slog.LevelWarn:
			name = "info"
		case lvl < slog.LevelError:
			name = "warn"
		}
		return slog.String("@level", name)
	case slog.MessageKey:
		return slog.String("@message", a.Value.String())
	}
	return a
}
