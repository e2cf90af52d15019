package schedule

import (
	"testing"
	"time"
)

func BenchmarkNext(b *testing.B) {
	cases := []struct {
		name string
		spec Spec
	}{
		{"daily_9am_cn_workday", Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday"}},
		{"daily_9am_cn_workday_next_workday", Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Shift: "next_workday"}},
		{"quarter_hourly_new_york", Spec{Cron: "*/15 * * * *", Timezone: "America/New_York"}},
		{"every_second", Spec{Cron: "* * * * * *", Timezone: "Asia/Shanghai"}},
		{"leap_day", Spec{Cron: "0 9 29 2 *", Timezone: "Asia/Shanghai"}},
		{"every_30s_cn_workday", Spec{Cron: "@every 30s", Timezone: "Asia/Shanghai", Calendar: "cn_workday"}},
	}
	// Just before 国庆 2026, so calendar work is included.
	from := time.Date(2026, 9, 30, 23, 59, 30, 0, time.UTC)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s := mustNew(b, c.spec)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := s.Next(from); !ok {
					b.Fatal("no slot")
				}
			}
		})
	}
}
