package host

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// *Host is the engine's Sender.
var _ engine.Sender = (*Host)(nil)

// The host speaks the engine's Sender through the delivery values alone
// (heraldtype): it does not compile in the engine, its state machine or
// anything the engine imports.
func TestHostDoesNotImportTheEngine(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	var herald []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/heraldhq/herald/") {
			herald = append(herald, p)
		}
	}
	require.NotContains(t, herald, "github.com/heraldhq/herald/engine")
}
