package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/heraldhq/herald/engine/hclogslog"
	"github.com/heraldhq/herald/plugins/builtin"
	"github.com/heraldhq/herald/plugins/sdk"
)

// ExternalPrefix starts the file name of every external plugin: the
// executable herald-channel-NAME in the plugins directory provides plugin
// NAME.
const ExternalPrefix = "herald-channel-"

// ErrNotExecutable marks a herald-channel-* file that cannot be run.
var ErrNotExecutable = errors.New("plugin file is not executable")

var pluginName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// External is one herald-channel-* file found in the plugins directory.
type External struct {
	Name string
	Path string // absolute
	Err  error  // why it cannot be used (not executable, bad name)
}

// Discover lists the external plugins in dir, sorted by name. A missing dir
// holds none.
func Discover(dir string) ([]External, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugins directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("plugins directory: %w", err)
	}
	var out []External
	for _, e := range entries {
		file := e.Name()
		if !strings.HasPrefix(file, ExternalPrefix) {
			continue
		}
		name := strings.TrimPrefix(file, ExternalPrefix)
		if runtime.GOOS == "windows" {
			name = strings.TrimSuffix(name, ".exe")
		}
		ext := External{Name: name, Path: filepath.Join(abs, file)}
		fi, err := os.Stat(ext.Path) // follows symlinks
		switch {
		case err != nil:
			ext.Err = err
		case fi.IsDir():
			continue
		case !pluginName.MatchString(name):
			ext.Err = fmt.Errorf("plugin name %q: want lower-case letters, digits, '-' and '_'", name)
		case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
			ext.Err = fmt.Errorf("%w: %s (mode %s)", ErrNotExecutable, ext.Path, fi.Mode().Perm())
		}
		out = append(out, ext)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// source is where a plugin comes from.
type source struct {
	name    string
	path    string // external plugins only
	sha256  string // external plugins only: the file's, as read
	builtin bool
	err     error // a found but unusable external plugin (not allowed, not executable)
	newCmd  func() *exec.Cmd
	// checksum is the allowed SHA-256 of an external plugin's executable,
	// which go-plugin checks as it starts it; nil for built-ins and for
	// plugins not allowed.
	checksum []byte
}

// sources maps every plugin name to its source. An external plugin with a
// built-in's name overrides the built-in: that is how an operator runs a
// fixed channel before the next Herald release. The host logs it loudly.
func sources(cfg Config) (map[string]source, error) {
	out := make(map[string]source)
	for _, name := range builtin.Names() {
		out[name] = source{name: name, builtin: true, newCmd: func() *exec.Cmd { return cfg.BuiltinCmdFunc(name) }}
	}
	exts, err := Discover(cfg.PluginsDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	for _, e := range exts {
		if prev, ok := out[e.Name]; ok && prev.builtin {
			cfg.Logger.Warn("external plugin overrides the built-in one", "plugin", e.Name, "path", e.Path)
		}
		src := source{name: e.Name, path: e.Path, err: e.Err, newCmd: func() *exec.Cmd { return exec.Command(e.Path) }}
		if src.err == nil {
			src.sha256, src.checksum, src.err = allow(e.Name, e.Path, cfg.PluginSHA256)
		}
		out[e.Name] = src
	}
	return out, nil
}

func builtinNames() string { return strings.Join(builtin.Names(), ", ") }

// PluginInfo describes one available plugin, for `herald plugins list`.
type PluginInfo struct {
	Name      string
	Path      string // empty for a built-in
	Builtin   bool
	Overrides bool // an external plugin that replaces the built-in of its name
	// SHA256 is an external plugin's executable's hex SHA-256: what
	// plugin_sha256 must list for it to run.
	SHA256 string
	// Allowed: an external plugin whose SHA-256 is listed (built-ins
	// always are).
	Allowed bool
	Version string
	Limits  []sdk.Limit // as declared before any Configure
	Error   string      // why it could not be launched or asked
}

// List returns every plugin available under cfg (built-ins and the
// plugins in cfg.PluginsDir), launching each briefly to ask its Info.
// Channels in cfg are ignored.
func List(ctx context.Context, cfg Config) ([]PluginInfo, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	srcs, err := sources(cfg)
	if err != nil {
		return nil, err
	}
	builtins := map[string]bool{}
	for _, n := range builtin.Names() {
		builtins[n] = true
	}
	out := make([]PluginInfo, 0, len(srcs))
	for _, s := range srcs {
		pi := PluginInfo{Name: s.name, Path: s.path, Builtin: s.builtin, Overrides: !s.builtin && builtins[s.name],
			SHA256: s.sha256, Allowed: s.builtin || s.checksum != nil}
		if s.err != nil {
			pi.Error = s.err.Error()
			out = append(out, pi)
			continue
		}
		p, err := launch(ctx, s.newCmd(), s.checksum, hclogslog.New(cfg.Logger, hclogslog.Options{}), cfg.StartTimeout)
		if err != nil {
			pi.Error = err.Error()
		} else {
			info := p.Info()
			pi.Version, pi.Limits = info.Version, info.Limits
			p.Close()
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
