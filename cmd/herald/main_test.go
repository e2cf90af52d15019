package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONOnError: a command asked for --json that fails still prints JSON
// on stdout ({"error", and the node's "status"}), beside "herald: REASON"
// on stderr and exit 1, so a script reading stdout never reads nothing.
func TestJSONOnError(t *testing.T) {
	t.Parallel()
	addr, _ := startAPI(t)
	for _, tc := range []struct {
		args   []string
		status float64
	}{
		{[]string{"deliveries", "get", "zzzzzzzzzz", "--addr", addr, "--json"}, 404},
		{[]string{"deliveries", "list", "--state", "sentt", "--addr", addr, "--json"}, 400},
		{[]string{"task", "submit", "k", "--rule", "enquiry_timeout", "--addr", addr, "--json"}, 0}, // refused by the CLI
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 1, run(tc.args, &out, &errOut), tc.args)
		require.Contains(t, errOut.String(), "herald: ", tc.args)
		var body map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &body), "stdout %q", out.String())
		require.NotEmpty(t, body["error"], tc.args)
		if tc.status != 0 {
			require.Equal(t, tc.status, body["status"], tc.args)
		}
	}
	// Without --json: stderr only.
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run([]string{"deliveries", "get", "zzzzzzzzzz", "--addr", addr}, &out, &errOut))
	require.Empty(t, out.String())
	require.Contains(t, errOut.String(), "herald: "+addr+": no delivery zzzzzzzzzz (HTTP 404)")
}
