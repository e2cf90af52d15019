package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// nodeConfig is one node's configuration: a YAML file (--config), where
// every key is also a flag (--node-id for node_id) and a HERALD_* variable
// (HERALD_NODE_ID). Flags win over variables, variables over the file.
type nodeConfig struct {
	NodeID    string `yaml:"node_id"`
	DataDir   string `yaml:"data_dir"`
	RaftAddr  string `yaml:"raft_addr"`
	HTTPAddr  string `yaml:"http_addr"`
	Bootstrap bool   `yaml:"bootstrap"`
	Join      string `yaml:"join"`
	// JoinTimeout bounds --join (a duration such as "1m"); default 1m.
	JoinTimeout string `yaml:"join_timeout"`
	Rules       string `yaml:"rules"`
	Plugins     string `yaml:"plugins"`
	LogLevel    string `yaml:"log_level"`
	// PprofAddr, when set, serves Go's profiles (/debug/pprof/) there, on a
	// listener of its own: for `herald bench --profile` and diagnosis.
	// Keep it on loopback: profiles show the process's insides.
	PprofAddr string `yaml:"pprof_addr"`
	// Channels are the channel instances by name: {plugin: NAME, ...the
	// plugin's own keys}. Values may reference ${ENV} variables (secrets).
	Channels map[string]map[string]any `yaml:"channels"`
	// Directory, when set, loads people from WeCom's contacts (see
	// directory.go).
	Directory *directoryConfig `yaml:"directory"`

	devTimeouts  bool   // `herald dev` and tests: short Raft timeouts
	raftLogLevel string // "" means the cluster package's default
}

// configKeys lists every scalar key: YAML name, flag, usage, field.
func (c *nodeConfig) keys() []configKey {
	return []configKey{
		{"node_id", "node-id", "this node's stable id in the cluster", &c.NodeID, nil},
		{"data_dir", "data-dir", "where Raft's log, snapshots and the mock outbox live", &c.DataDir, nil},
		{"raft_addr", "raft-addr", "Raft transport address (host:port reachable by the other nodes)", &c.RaftAddr, nil},
		{"http_addr", "http-addr", "HTTP API address", &c.HTTPAddr, nil},
		{"bootstrap", "bootstrap", "form a new cluster if this node has no state yet (never again after)", nil, &c.Bootstrap},
		{"join", "join", "HTTP address of any member to join through", &c.Join, nil},
		{"join_timeout", "join-timeout", "give up joining after this long (e.g. 1m)", &c.JoinTimeout, nil},
		{"rules", "rules", "directory of Lua rule files (watched)", &c.Rules, nil},
		{"plugins", "plugins", "directory of herald-channel-* plugin executables", &c.Plugins, nil},
		{"log_level", "log-level", "debug, info, warn or error", &c.LogLevel, nil},
		{"pprof_addr", "pprof-addr", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off when empty", &c.PprofAddr, nil},
	}
}

type configKey struct {
	yaml, flag, usage string
	str               *string
	boolean           *bool
}

func (k configKey) env() string {
	return "HERALD_" + strings.ToUpper(k.yaml)
}

// bindFlags declares one flag per key, plus --config.
func (c *nodeConfig) bindFlags(cmd *cobra.Command) {
	cmd.Flags().String("config", "", "YAML config file (keys as the flags, with _ for -; plus channels)")
	for _, k := range c.keys() {
		usage := k.usage + " (env " + k.env() + ")"
		if k.boolean != nil {
			cmd.Flags().Bool(k.flag, *k.boolean, usage)
		} else {
			cmd.Flags().String(k.flag, *k.str, usage)
		}
	}
}

// load fills c from the file, the environment and the flags, in that order.
func (c *nodeConfig) load(cmd *cobra.Command) error {
	if path, _ := cmd.Flags().GetString("config"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				return fmt.Errorf("config %s: %s", path, strings.Join(te.Errors, "; "))
			}
			return fmt.Errorf("config %s: %w", path, err)
		}
	}
	for _, k := range c.keys() {
		if v, ok := os.LookupEnv(k.env()); ok {
			if err := k.set(v); err != nil {
				return fmt.Errorf("%s: %w", k.env(), err)
			}
		}
		if f := cmd.Flags().Lookup(k.flag); f != nil && f.Changed {
			if err := k.set(f.Value.String()); err != nil {
				return fmt.Errorf("--%s: %w", k.flag, err)
			}
		}
	}
	return c.validate()
}

func (k configKey) set(v string) error {
	if k.boolean != nil {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*k.boolean = b
		return nil
	}
	*k.str = v
	return nil
}

func (c *nodeConfig) validate() error {
	var missing []string
	for _, k := range c.keys() {
		if k.str != nil && *k.str == "" && (k.yaml == "node_id" || k.yaml == "data_dir" || k.yaml == "raft_addr" || k.yaml == "http_addr") {
			missing = append(missing, "--"+k.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("config: %s required", strings.Join(missing, ", "))
	}
	if c.Bootstrap && c.Join != "" {
		return errors.New("config: give --bootstrap or --join, not both")
	}
	for name, ch := range c.Channels {
		if p, _ := ch["plugin"].(string); p == "" {
			return fmt.Errorf("config: channel %q: plugin is required (e.g. plugin: mock)", name)
		}
	}
	if c.JoinTimeout != "" {
		if d, err := time.ParseDuration(c.JoinTimeout); err != nil || d <= 0 {
			return fmt.Errorf("config: join_timeout %q: want a positive duration such as 1m", c.JoinTimeout)
		}
	}
	if c.Directory != nil {
		if _, err := c.Directory.settings(c.Channels); err != nil {
			return err
		}
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}
