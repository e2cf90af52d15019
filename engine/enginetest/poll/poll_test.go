package poll

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUntil(t *testing.T) {
	t.Parallel()
	n := 0
	took := Until(t, time.Second, "three checks", func() bool { n++; return n == 3 })
	require.Equal(t, 3, n)
	require.Less(t, took, time.Second)

	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Until(ft, 10*time.Millisecond, "never", func() bool { return false })
	}()
	require.Equal(t, "not within 10ms: never", ft.failed)
}

// fakeT records Fatalf and stops the caller as the real one does.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic("fatal")
}
