package leader

import (
	"testing"

	"go.uber.org/goleak"
)

// The loops start goroutines per run and per batch: every test must end
// with none left (TestLeaderStopsEverythingOnLeadershipLoss relies on it).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
