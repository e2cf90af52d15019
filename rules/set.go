// Package rules runs the Lua rule files that decide who receives what: a
// sandboxed gopher-lua with Herald's small library, each file compiled once
// per version and run from a pool of states, a directory watcher that
// reloads changed files and keeps the last good version of a broken one,
// and the check and preview tools. See DESIGN.md.
package rules

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/schedule"
)

// Defaults for Config fields left zero.
const (
	DefaultCallTimeout    = 2 * time.Second
	DefaultRescanInterval = 30 * time.Second
	DefaultDebounce       = 200 * time.Millisecond
)

// ErrNoDir means the rules directory does not exist or is not a directory.
var ErrNoDir = errors.New("rules directory not found")

// ErrCatchup marks a rule refused because its catchup is not shorter than
// Config.MaxCatchup (see CatchupErrors).
var ErrCatchup = errors.New("catchup not shorter than ledger_retention")

// Config configures a rule Set.
type Config struct {
	// Dir holds the rule files (*.lua, in subdirectories too), the people
	// file (people.csv, .json, .yaml or .yml) and company calendars
	// (calendars/NAME.yaml). Required.
	Dir string
	// CallTimeout bounds each call of a rule function (the file's top
	// level, recipients, each message, on_failed). Default 2s.
	CallTimeout time.Duration
	// MemoryLimit bounds how much the node's memory may grow while one
	// call of a rule function runs (see memory.go); past it the call is
	// stopped like one past CallTimeout. Default (0) DefaultMemoryLimit
	// (128 MiB) plus PersonMemoryAllowance for each person in the
	// directory: see memoryLimitFor.
	MemoryLimit uint64
	// PoolSize is how many idle Lua states a version keeps. Default
	// GOMAXPROCS.
	PoolSize int
	// RescanInterval is how often Watch rescans the directory even without
	// events, as a safety net. Default 30s.
	RescanInterval time.Duration
	// Debounce is how long Watch waits for events to settle before it
	// reloads. Default 200ms; a storm of events reloads at least every 10
	// debounce periods.
	Debounce time.Duration
	// Logger receives load errors and the rules' own log calls. Default
	// discards.
	Logger *slog.Logger
	// Calendars resolves rule calendars. The set registers the directory's
	// company calendars into it (and removes them when their file goes), so
	// the engine's schedules built from the same registry see them. Default:
	// a new registry with the built-ins (see Set.Calendars).
	Calendars *calendar.Registry
	// Channels, when not nil, are the channel instances the node has: a
	// rule naming another is an error (file:line), and its last good
	// version stays in force. Nil checks nothing (preview, list).
	Channels []string
	// MaxCatchup, when above 0, is the node's ledger_retention: a rule
	// whose catchup (engine.DefaultCatchup when it names none) is not
	// shorter is an error (file:line, ErrCatchup), and its last good
	// version stays in force. A slot caught up after the ledger forgot its
	// run would fire a second time. 0 checks nothing (preview, list).
	MaxCatchup time.Duration
	// Registerer receives the herald_rule_errors and
	// herald_rule_reloads_total metrics. Default: none.
	Registerer prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.PoolSize <= 0 {
		c.PoolSize = runtime.GOMAXPROCS(0)
	}
	if c.RescanInterval <= 0 {
		c.RescanInterval = DefaultRescanInterval
	}
	if c.Debounce <= 0 {
		c.Debounce = DefaultDebounce
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Calendars == nil {
		c.Calendars = calendar.NewRegistry()
	}
}

// FileStatus is the state of one file of the rules directory.
type FileStatus struct {
	Kind  string // "rule", "people" or "calendar"
	Name  string // the rule or calendar name, when known
	File  string // path relative to the directory, with forward slashes
	Hash  string // content hash of the version in force; "" if none is
	Error string // why the file on disk is not in force; "" when it is
	Line  int    // line of Error, 0 when unknown
}

// File kinds in FileStatus.
const (
	KindRule     = "rule"
	KindPeople   = "people"
	KindCalendar = "calendar"
)

// Set is the loaded rule set. It implements engine.RuleSource and is safe
// for concurrent use; a reload swaps the whole set at once.
type Set struct {
	cfg     Config
	cur     atomic.Pointer[version]
	changed chan struct{}
	metrics *metrics

	reloadMu  sync.Mutex        // one build at a time; guards the fields below
	logged    map[string]string // file -> error last logged
	watchDirs []string          // directories found by the last scan
	dir       *DirectorySnapshot
	dirHash   string
	// stampFP is the stamp pass's fingerprint before the last read (see
	// racyWindow), stampedAt when that pass began, readAt the last read.
	stampFP    string
	stampedAt  time.Time
	readAt     time.Time
	racy       time.Duration // racyWindow; tests shorten it
	reads      int           // directory reads, for tests
	beforeRead func()        // tests: runs between the stamp pass and the read
	// recentDirs keeps the last few snapshots before dir, by hash
	// (recentOrder oldest first), for runs started with them.
	recentDirs  map[string]*DirectorySnapshot
	recentOrder []string

	testHook func(*sandbox) // tests add functions to every new state
}

// Load reads the directory once. Broken files are reported by Status (and
// logged); the good ones are loaded. It fails only when the directory
// cannot be read.
func Load(cfg Config) (*Set, error) {
	cfg.setDefaults()
	if fi, err := os.Stat(cfg.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %q", ErrNoDir, cfg.Dir)
	}
	s := &Set{
		cfg:     cfg,
		changed: make(chan struct{}, 1),
		logged:  map[string]string{},

		recentDirs: map[string]*DirectorySnapshot{},
		racy:       racyWindow,
	}
	s.metrics = newMetrics(cfg.Registerer)
	if _, err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Rules returns the good version of every rule, sorted by name.
func (s *Set) Rules() []engine.Rule {
	v := s.cur.Load()
	out := make([]engine.Rule, 0, len(v.order))
	for _, c := range v.order {
		r := c.rule
		r.Retry = slices.Clone(c.rule.Retry) // keeps nil (default) apart from {} (no retries)
		if r.PerRecipient {
			r.Zones = ruleZones(r, v.people)
		}
		out = append(out, r)
	}
	return out
}

// Hash identifies the whole good rule set: the rule files, people file
// and calendars in force.
func (s *Set) Hash() string { return s.cur.Load().hash }

// Changed is signalled after every reload that changed the set. It holds
// at most one signal, so a slow reader sees one signal for many reloads.
func (s *Set) Changed() <-chan struct{} { return s.changed }

// Calendars is the registry rule calendars resolve in, with the
// directory's company calendars registered.
func (s *Set) Calendars() *calendar.Registry { return s.cfg.Calendars }

// Schedule returns a scheduled rule's schedule, or nil for a rule
// triggered by API tasks or not loaded.
func (s *Set) Schedule(name string) *schedule.Schedule {
	if c, ok := s.cur.Load().rules[name]; ok {
		return c.sched
	}
	return nil
}

// Description returns a rule's description field.
func (s *Set) Description(name string) string {
	if c, ok := s.cur.Load().rules[name]; ok {
		return c.description
	}
	return ""
}

// Status lists every file of the directory, and every file whose last
// good version is still in force after it was broken, sorted by path.
func (s *Set) Status() []FileStatus {
	v := s.cur.Load()
	out := make([]FileStatus, 0, len(v.status))
	for _, st := range v.status {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// Broken lists every file whose version on disk is not in force, as
// "file:line: message", sorted by file.
func (s *Set) Broken() []string {
	var out []string
	for _, st := range s.Status() {
		if st.Error != "" {
			out = append(out, CheckError{File: st.File, Line: st.Line, Message: st.Error}.String())
		}
	}
	return out
}

// signal notes a change without blocking.
func (s *Set) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

var _ engine.RuleSource = (*Set)(nil)
