package heraldtype_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// heraldtype is a leaf: every plugin imports it through the SDK, so it may
// import nothing beyond the standard library.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, []string{"github.com/heraldhq/herald/engine/heraldtype"}, strings.Fields(string(out)))
}
