package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
)

// apiFlags are the flags of the commands that talk to a node's API.
type apiFlags struct {
	addr    string
	timeout time.Duration
	asJSON  bool
}

func (f *apiFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.addr, "addr", clusterDefaultAddr, "HTTP address of any Herald node")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
	cmd.PersistentFlags().BoolVar(&f.asJSON, "json", false, "print the raw JSON")
}

// call sends one request through cluster.Client (so an unreachable node or
// an API error reads the same as in every other command). Writes are
// retried while the cluster elects a leader.
func (f *apiFlags) call(cmd *cobra.Command, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	c := &cluster.Client{Addr: f.addr, HTTP: &http.Client{Timeout: f.timeout}}
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
