package wecom_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecom"
)

// envServe makes the test binary serve the channel as a plugin: the tests
// of the plugin boundary launch this binary again instead of building
// herald.
const envServe = "HERALD_WECOM_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		sdk.Serve(wecom.New())
		return
	}
	goleak.VerifyTestMain(m)
}
