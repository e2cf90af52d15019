package wecom_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/heraldhq/herald/plugins/sdk"
)

// BenchmarkSend measures messages per second from Send to the fake on
// loopback: app mode, no limits, batches of 100 to distinct members.
func BenchmarkSend(b *testing.B) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			cfg := members(1000)
			cfg.MemberPerMinute, cfg.MemberPerHour = -1, -1
			cfg.MaxRecords = 10_000
			e := setup(b, cfg, fmt.Sprintf(`,"concurrency":%d`, conc))
			const size = 100
			batch := make([]sdk.Message, size)
			n := 0
			for b.Loop() {
				for i := range batch {
					n++
					batch[i] = msg(fmt.Sprint(n), fmt.Sprintf("u%03d", n%1000+1), text(fmt.Sprintf("bench %d", n)))
				}
				res, err := e.ch.Send(context.Background(), batch)
				if err != nil || len(res) != size || res[size-1].Status != sdk.StatusSent {
					b.Fatalf("send: %v %+v", err, res)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
