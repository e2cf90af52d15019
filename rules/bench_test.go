package rules

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/engine"
)

// benchDir is the example daily_report with a directory of n salespeople.
func benchDir(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	src, err := os.ReadFile(filepath.Join("examples", "daily_report.lua"))
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("userid,name,department,roles,manager\nboss,Boss,sales,manager,\n")
	for i := range n {
		fmt.Fprintf(&sb, "u%06d,销售%06d,sales,sales,boss\n", i, i)
	}
	for name, data := range map[string][]byte{"daily_report.lua": src, "people.csv": []byte(sb.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

const benchPeople = 100_000

// BenchmarkDailyReport100k plans the daily report for 100,000 people: one
// recipients call and 100,000 message calls, each rendered to JSON.
func BenchmarkDailyReport100k(b *testing.B) {
	benchPlanDaily(b, benchDir(b, benchPeople))
}

// BenchmarkDailyReportUserids100k is that plan with recipients returning
// the 100,000 userids rather than people: each person's table is built
// just before their message.
func BenchmarkDailyReportUserids100k(b *testing.B) {
	dir := benchDir(b, benchPeople)
	file := filepath.Join(dir, "daily_report.lua")
	src, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	ids := fmt.Sprintf(`local t = {} for i = 1, %d do t[i] = string.format("u%%06d", i - 1) end return t`, benchPeople)
	src = bytes.Replace(src, []byte(`return people.where { role = "sales" }`), []byte(ids), 1)
	if err := os.WriteFile(file, src, 0o644); err != nil {
		b.Fatal(err)
	}
	benchPlanDaily(b, dir)
}

// benchPlanDaily loads dir and plans its daily report for benchPeople
// people each turn, reporting messages a second and the peak live heap.
func benchPlanDaily(b *testing.B, dir string) {
	b.Helper()
	benchPlan(b, Config{Dir: dir}, "daily_report", benchPeople)
}

// benchPlan loads cfg and plans rule, n messages, each turn, reporting
// messages a second and the peak live heap.
func benchPlan(b *testing.B, cfg Config, rule string, n int) {
	b.Helper()
	s, err := Load(cfg)
	if err != nil {
		b.Fatal(err)
	}
	run := engine.RunContext{Key: "k", Slot: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)}
	peak := watchLiveHeap(b)
	b.ResetTimer()
	for b.Loop() {
		out, err := s.Plan(context.Background(), rule, run)
		if err != nil || len(out) != n {
			b.Fatal(err, len(out))
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(peak())/(1<<20), "peak-live-MiB")
}

// watchLiveHeap samples the live heap (as of each GC) until the benchmark
// ends and returns a function giving the highest figure seen above the heap
// live at the start (the loaded rules and directory): what a plan holds at
// its peak, which is what decides the leader's RSS.
func watchLiveHeap(b *testing.B) func() uint64 {
	b.Helper()
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	runtime.GC()
	rtmetrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			rtmetrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		return max(peak.Load(), base) - base
	}
}

// BenchmarkTeamEachMessage plans a report for benchTeam people whose
// message counts the recipient's team (people.where in every message):
// benchTeam² person tables a run, each dropped once its message is built,
// more than the stub registry's maxStubs.
func BenchmarkTeamEachMessage(b *testing.B) {
	const benchTeam = 600
	dir := b.TempDir()
	var sb strings.Builder
	sb.WriteString("userid,name,department\n")
	for i := range benchTeam {
		fmt.Fprintf(&sb, "u%06d,销售%06d,sales\n", i, i)
	}
	files := map[string]string{
		"people.csv": sb.String(),
		"team.lua": `return rule { name = "team", channel = "mock",
  recipients = function() return people.all() end,
  message = function(run, to) return { content = to.name .. ": " .. #people.where { department = to.department } } end }`,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	benchPlan(b, Config{Dir: dir, CallTimeout: time.Minute}, "team", benchTeam)
}

// BenchmarkPreview100k is `herald rules preview daily_report` for that
// directory, stagger offsets and delivery ids included (loading excluded).
func BenchmarkPreview100k(b *testing.B) {
	s, err := Load(Config{Dir: benchDir(b, benchPeople)})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("CST", 8*3600))
	for b.Loop() {
		res, err := s.Preview(context.Background(), "daily_report", at, nil)
		if err != nil || len(res.Deliveries) != benchPeople {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad100k loads that directory: people file, compile, check.
func BenchmarkLoad100k(b *testing.B) {
	dir := benchDir(b, benchPeople)
	for b.Loop() {
		if _, err := Load(Config{Dir: dir}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewSandbox builds one Lua state with Herald's library (what a
// pool miss costs).
func BenchmarkNewSandbox(b *testing.B) {
	e := &env{people: &Directory{}, calendars: nil, logger: nil}
	for b.Loop() {
		newSandbox(e).L.Close()
	}
}

// BenchmarkParsePeopleJSON parses a JSON people file of 20,000 people with
// every documented column: the cost per person must not grow with the
// file (each entry's line was counted from the file's start).
func BenchmarkParsePeopleJSON(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("[\n")
	for i := range 20000 {
		if i > 0 {
			buf.WriteString(",\n")
		}
		fmt.Fprintf(&buf, `  {"userid": "u%d", "name": "Person %d", "department": "d%d", "roles": ["sales"], "birthday": "1990-03-%02d", "lunar_birthday": "02-03", "timezone": "Asia/Shanghai", "region": "east"}`, i, i, i%50, i%28+1)
	}
	buf.WriteString("\n]\n")
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := parsePeople("people.json", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPeopleLiveMemory parses 100,000 people with every documented
// column (the shapes of herald bench people) and reports the live heap
// they hold once parsed: what every node keeps for its people file.
func BenchmarkPeopleLiveMemory(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("userid,name,department,roles,manager,birthday,lunar_birthday,timezone,region\n")
	depts := []string{"sales", "support", "engineering", "finance"}
	zones := []string{"Asia/Shanghai", "Asia/Shanghai", "Asia/Tokyo", "Europe/Berlin"}
	regions := []string{"north", "east", "south", "west"}
	const n = 100_000
	for i := range n {
		roles, manager := "sales", fmt.Sprintf("u%06d", i-i%10)
		if i%10 == 0 {
			roles, manager = "sales;manager", ""
		}
		lunar := ""
		if i%5 == 0 {
			lunar = fmt.Sprintf("%02d-%02d", i%12+1, i%29+1)
		}
		fmt.Fprintf(&buf, "u%06d,Person %d,%s,%s,%s,19%02d-%02d-%02d,%s,%s,%s\n", i, i, depts[i%len(depts)], roles, manager,
			60+i%40, i%12+1, i%28+1, lunar, zones[i%len(zones)], regions[i%len(regions)])
	}
	data := buf.Bytes()
	var live uint64
	var m memSample // the memory watch's reader: value(1) is the live heap
	for b.Loop() {
		runtime.GC()
		m.read()
		before := m.value(1)
		d, err := parsePeople("people.csv", data)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		m.read()
		live = m.value(1) - before
		runtime.KeepAlive(d)
	}
	b.ReportMetric(float64(live)/n, "live-B/person")
}
