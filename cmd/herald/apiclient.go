package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
)

// apiFlags are the flags of the commands that talk to a node's API.
type apiFlags struct {
	addr    string
	ca      string
	timeout time.Duration
	asJSON  bool
	token   string
}

func (f *apiFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.addr, "addr", clusterDefaultAddr, "address of any Herald node: host:port, http://host:port or https://host:port")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
	cmd.PersistentFlags().BoolVar(&f.asJSON, "json", false, "print the raw JSON")
	registerToken(cmd, &f.token)
	registerCA(cmd, &f.ca)
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

// registerCA declares --ca (default $HERALD_CA).
func registerCA(cmd *cobra.Command, ca *string) {
	cmd.PersistentFlags().StringVar(ca, "ca", os.Getenv("HERALD_CA"),
		"PEM CA that signs the nodes' certificates; --addr without a scheme then means https (env HERALD_CA)")
}

// cliMaxResponse bounds an answer the CLI reads: a list answer is up to
// 4 MiB of items (engine/api maxListBytes) plus its envelope; this only
// stops a runaway.
const cliMaxResponse = 64 << 20

// newAPIClient is the client every CLI command talks to a node with: with
// a CA it trusts only certificates that CA signed (host names checked) and
// an address without a scheme is https.
func newAPIClient(addr, ca string, timeout time.Duration) (*cluster.Client, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: want a positive duration such as 30s", timeout)
	}
	c := &cluster.Client{Addr: addr, HTTP: &http.Client{Timeout: timeout}, MaxResponse: cliMaxResponse}
	if ca == "" {
		return c, nil
	}
	if strings.HasPrefix(strings.ToLower(addr), "http://") {
		// A CA says the nodes speak TLS; an explicit http:// would send the
		// token in clear to whoever answers.
		return nil, fmt.Errorf("--addr %s with --ca: http:// is plain text (the token would go in clear); use https:// or host:port", addr)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s holds no PEM certificate", ca)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c.HTTP.Transport = tr
	c.Scheme = "https"
	return c, nil
}

// call sends one request through cluster.Client (so an unreachable node or
// an API error reads the same as in every other command). Writes are
// retried while the cluster elects a leader.
func (f *apiFlags) call(cmd *cobra.Command, method, path string, in, out any) error {
	return f.send(cmd, method, path, in, out, method != http.MethodGet)
}

// callOnce is call for a write that is not safe to repeat (a fire without
// a slot starts a new run each time): a 503 is returned, never retried,
// since the write may have applied.
func (f *apiFlags) callOnce(cmd *cobra.Command, method, path string, in, out any) error {
	return f.send(cmd, method, path, in, out, false)
}

func (f *apiFlags) send(cmd *cobra.Command, method, path string, in, out any, retry bool) error {
	c, err := newAPIClient(f.addr, f.ca, f.timeout)
	if err != nil {
		return err
	}
	c.Token = apiToken(f.token)
	return withTimeout(cmd, f.addr, f.timeout, func(ctx context.Context) error {
		do := func() error { return c.Do(ctx, method, path, in, out) }
		if retry {
			return whileElecting(ctx, do)
		}
		return do()
	})
}

// withTimeout runs do with --timeout's deadline. A node that does not
// answer in time is named, with the timeout, rather than reported as a
// bare "context deadline exceeded" (still wrapping the deadline: a write
// given up on may yet apply).
func withTimeout(cmd *cobra.Command, addr string, timeout time.Duration, do func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	err := do(ctx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("%s: no answer within --timeout %s: %w", addr, timeout, err)
	}
	return err
}
