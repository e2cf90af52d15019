package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/heraldhq/herald/engine/hclogslog"
	"github.com/heraldhq/herald/plugins/sdk"
)

var (
	// ErrProtocolVersion means the plugin was built for another version of
	// the channel protocol than this Herald speaks (sdk.ProtocolVersion).
	ErrProtocolVersion = errors.New("plugin speaks another channel protocol version")
	// ErrLaunch means the plugin process could not be started or did not
	// complete the go-plugin handshake.
	ErrLaunch = errors.New("plugin did not start")
	// ErrBadInfo means the plugin's Info is unusable (no name, or a limit
	// the host cannot enforce).
	ErrBadInfo = errors.New("plugin info is invalid")
)

// DefaultStartTimeout bounds a plugin's start: process launch, handshake
// and its first Info call.
const DefaultStartTimeout = 10 * time.Second

// Plugin is one running plugin process, connected and verified.
type Plugin struct {
	client  *plugin.Client
	ch      *sdk.Client
	watch   *os.File    // the host's end of the host-watch pipe
	proc    *os.Process // nil until the process started
	pid     int
	info    sdk.Info
	stopMax time.Duration // how long Close waits for a graceful stop
}

// Launch starts cmd as a channel plugin, completes the handshake, and
// checks the plugin's protocol version and Info. The caller must Close the
// Plugin. It is what the host does for every start and what
// `herald plugins list` and the conformance tests use directly.
func Launch(ctx context.Context, cmd *exec.Cmd, logger *slog.Logger) (*Plugin, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return launch(ctx, cmd, nil, hclogslog.New(logger, hclogslog.Options{}), DefaultStartTimeout)
}

// launch starts cmd; with a checksum, go-plugin first checks that the
// executable's SHA-256 is the one allowed, and refuses to run it otherwise.
func launch(ctx context.Context, cmd *exec.Cmd, checksum []byte, logger hclog.Logger, timeout time.Duration) (*Plugin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The plugin reads its end of this pipe until EOF, which comes when
	// the host closes its end or dies (see sdk.EnvParentFD).
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: host-watch pipe: %v", ErrLaunch, cmd.Path, err)
	}
	cmd.Env = append(pluginEnv(), cmd.Env...) // the command's own win
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", sdk.EnvParentFD, 3+len(cmd.ExtraFiles)),
		sdk.EnvStuckAfter+"="+timeout.String())
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)

	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          sdk.PluginSet(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		SkipHostEnv:      true,
		StartTimeout:     timeout,
		Stderr:           io.Discard,
		SecureConfig:     secureConfig(checksum),
	})
	p := &Plugin{client: client, watch: w, stopMax: timeout}

	// go-plugin's start does not take a context: kill the process if ctx
	// ends first, which makes the start fail.
	started := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			client.Kill()
		case <-started:
		}
	}()
	rpc, err := client.Client()
	close(started)
	<-stopped
	_ = r.Close()
	if cmd.Process != nil {
		p.proc, p.pid = cmd.Process, cmd.Process.Pid
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		p.Close()
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			return nil, changedSinceAllowed(cmd.Path, checksum, err)
		}
		if strings.Contains(err.Error(), "incompatible API version") {
			return nil, fmt.Errorf("%w: %s: want version %d: %v", ErrProtocolVersion, cmd.Path, sdk.ProtocolVersion, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrLaunch, cmd.Path, err)
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrLaunch, cmd.Path, err)
	}
	ch, ok := raw.(*sdk.Client)
	if !ok {
		p.Close()
		return nil, fmt.Errorf("%w: %s: dispensed %T", ErrLaunch, cmd.Path, raw)
	}
	p.ch = ch

	infoCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, version, err := ch.InfoVersion(infoCtx)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrLaunch, cmd.Path, err)
	}
	if version != sdk.ProtocolVersion {
		p.Close()
		return nil, fmt.Errorf("%w: %s reports version %d, want %d", ErrProtocolVersion, cmd.Path, version, sdk.ProtocolVersion)
	}
	if err := checkInfo(info); err != nil {
		p.Close()
		return nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	p.info = info
	return p, nil
}

// passedEnv are the host's environment variables a plugin inherits. The
// rest, the secrets of other channels among them, stay in the host: a
// plugin gets its secrets resolved in its own configuration.
var passedEnv = []string{
	"PATH", "HOME", "USER", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"GODEBUG", "GOTRACEBACK", "GOMAXPROCS", "GOMEMLIMIT", "GORACE",
}

func pluginEnv() []string {
	var env []string
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// checkInfo refuses an Info whose limits the host could not enforce.
func checkInfo(info sdk.Info) error {
	if info.Name == "" {
		return fmt.Errorf("%w: empty name", ErrBadInfo)
	}
	for i, l := range info.Limits {
		if l.Scope != sdk.ScopeRecipient && l.Scope != sdk.ScopeChannel {
			return fmt.Errorf("%w: limit %d: unknown scope %q", ErrBadInfo, i, l.Scope)
		}
		if l.Count <= 0 || l.Per <= 0 {
			return fmt.Errorf("%w: limit %d: count %d per %s must both be positive", ErrBadInfo, i, l.Count, l.Per)
		}
		if l.Per > MaxLimitPer {
			return fmt.Errorf("%w: limit %d: per %s is longer than %s", ErrBadInfo, i, l.Per, MaxLimitPer)
		}
	}
	return nil
}

// Channel returns the plugin's channel protocol client.
func (p *Plugin) Channel() *sdk.Client { return p.ch }

// Info returns what the plugin said of itself when launched.
func (p *Plugin) Info() sdk.Info { return p.info }

// Pid returns the plugin's process id.
func (p *Plugin) Pid() int { return p.pid }

// Exited reports whether the plugin process has ended.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Close stops the plugin process and waits for it. It asks the plugin to
// shut down (go-plugin's Shutdown RPC, then up to 2s for the process to
// exit) and kills it if that has not happened within the start timeout:
// go-plugin waits for the Shutdown answer without a deadline, so a frozen
// plugin would otherwise hold Close, and with it the host, forever.
func (p *Plugin) Close() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.client.Kill()
	}()
	t := time.NewTimer(p.stopMax)
	select {
	case <-done:
	case <-t.C:
		p.kill()
		<-done
	}
	t.Stop()
	_ = p.watch.Close()
}

// kill ends the plugin process at once, without asking it. For a plugin
// that is being replaced because it stopped answering or died: a graceful
// stop would only wait for it. Close must still be called.
func (p *Plugin) kill() {
	if p.proc != nil {
		_ = p.proc.Kill()
	}
}
