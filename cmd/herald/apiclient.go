package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
)

// apiFlags are the flags of the commands that talk to a node's API.
type apiFlags struct {
	addr    string
	timeout time.Duration
	asJSON  bool
	token   string
}

func (f *apiFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.addr, "addr", clusterDefaultAddr, "HTTP address of any Herald node")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
	cmd.PersistentFlags().BoolVar(&f.asJSON, "json", false, "print the raw JSON")
	registerToken(cmd, &f.token)
}

// registerToken declares --token. Without it, HERALD_TOKEN is used (see
// apiToken), so that the secret need not appear in a command line, where
// ps shows it.
func registerToken(cmd *cobra.Command, token *string) {
	cmd.PersistentFlags().StringVar(token, "token", "", "API token, sent as Authorization: Bearer (env HERALD_TOKEN)")
}

// apiToken is the --token given, else HERALD_TOKEN.
func apiToken(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("HERALD_TOKEN")
}

// call sends one request through cluster.Client (so an unreachable node or
// an API error reads the same as in every other command). Writes are
// retried while the cluster elects a leader.
func (f *apiFlags) call(cmd *cobra.Command, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	c := &cluster.Client{Addr: f.addr, HTTP: &http.Client{Timeout: f.timeout}, Token: apiToken(f.token)}
	do := func() error { return c.Do(ctx, method, path, in, out) }
	if method == http.MethodGet {
		return do()
	}
	return whileElecting(ctx, do)
}

// emitJSON prints v indented.
func emitJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
