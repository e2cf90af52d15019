package builtin

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRegistry(t *testing.T) {
	t.Parallel()
	require.Contains(t, Names(), "mock")
	for _, name := range Names() {
		f, ok := Lookup(name)
		require.True(t, ok, name)
		require.NotNil(t, f(), name)
	}
	_, ok := Lookup("nope")
	require.False(t, ok)
}
