package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckTaskKey: the reasons are the API's field error texts, which
// users' scripts read; the Lua task library shows the same.
func TestCheckTaskKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"k", "enq-1", "task:x-d9", "...", "a..b", ".a", strings.Repeat("k", MaxTaskKey), "跟进-1"} {
		require.NoError(t, CheckTaskKey(k), k)
	}
	require.ErrorIs(t, CheckTaskKey(""), ErrTaskKeyMissing)
	for k, reason := range map[string]string{
		strings.Repeat("k", MaxTaskKey+1): "longer than 200 bytes",
		AlertTaskKey("a1", 1):             `keys starting with "alert:" are Herald's own`,
		".":                               `"." cannot be a key (it goes in URLs)`,
		"..":                              `".." cannot be a key (it goes in URLs)`,
		"a b":                             `must not contain ' ' (it goes in URLs)`,
		"a/b":                             `must not contain '/' (it goes in URLs)`,
		"a?b":                             `must not contain '?' (it goes in URLs)`,
		"a#b":                             `must not contain '#' (it goes in URLs)`,
		"a%2Fb":                           `must not contain '%' (it goes in URLs)`,
		"a\x00b":                          `must not contain '\x00' (it goes in URLs)`,
	} {
		var ke *TaskKeyError
		err := CheckTaskKey(k)
		require.True(t, errors.As(err, &ke), k)
		require.Equal(t, reason, ke.Reason, k)
		require.Equal(t, k, ke.Key)
		require.Equal(t, "key: "+reason, err.Error())
	}
}
