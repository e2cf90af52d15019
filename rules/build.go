package rules

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
)

// version is one immutable rule set: what Plan, Rules and Status read. A
// reload builds a new version beside the current one and swaps it in.
type version struct {
	env         *env
	pool        *pool
	rules       map[string]*compiled // by rule name
	order       []*compiled          // by rule name
	byFile      map[string]*compiled // rule in force for each rule file
	cals        map[string]*calEntry // calendar in force for each calendar file
	people      *Directory
	peopleHash  string
	status      map[string]FileStatus
	hash        string
	fingerprint string
	filePeople  *Directory         // the people file alone, before the merge
	dir         *DirectorySnapshot // merged into people; nil when none
	dirHash     string
	// catchupErrs are the rule files refused by MaxCatchup (CatchupErrors).
	catchupErrs []error
}

type calEntry struct {
	name string
	hash string
	cal  calendar.Calendar
}

// reload rescans the directory and, if anything changed, builds and swaps
// in a new version. It fails only when the directory cannot be read; the
// current version then stays.
func (s *Set) reload() (bool, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	setting := "\x00directory " + s.dirHash + fmt.Sprintf("\x00channels %q catchup %d", s.cfg.Channels, s.cfg.MaxCatchup)
	started := time.Now()
	stamps, err := scanDir(s.cfg.Dir, false)
	if err != nil {
		s.metrics.reload("error")
		return false, err
	}
	prev := s.cur.Load()
	stampFP := stamps.fingerprint() + setting
	if prev != nil && stampFP == s.stampFP && stamps.stillSince(s.stampedAt, s.racy) && started.Sub(s.readAt) < fullReadInterval {
		s.watchDirs = stamps.dirs
		return false, nil // nothing changed since the last read (see racyWindow)
	}
	if s.beforeRead != nil {
		s.beforeRead()
	}
	scan, err := scanDir(s.cfg.Dir, true)
	if err != nil {
		s.metrics.reload("error")
		return false, err
	}
	s.reads++
	// The stamps are kept only when they held throughout the read: the
	// stamps after it are the same (a link swapped during the read and
	// swapped back later would otherwise match and leave the content read
	// in force), and no read failed for a reason its stamp would not show.
	s.stampFP, s.stampedAt, s.readAt = "", started, started
	if after, err := scanDir(s.cfg.Dir, false); err == nil && !scan.readFailed() && after.fingerprint()+setting == stampFP {
		s.stampFP = stampFP
	}
	s.watchDirs = scan.dirs
	fp := scan.fingerprint() + setting
	if prev != nil && prev.fingerprint == fp {
		return false, nil
	}
	v := s.build(scan, prev)
	v.fingerprint = fp
	s.cur.Store(v)
	if prev != nil {
		prev.pool.close()
	}
	s.report(prev, v)
	s.signal()
	return true, nil
}

// SetChannels changes the channels a rule may name and the longest
// catchup a rule may have (Config.Channels and MaxCatchup: a node's
// config reload), and rebuilds the set under them at once: a rule
// refused for naming a channel that now exists loads, one over a shorter
// ledger is refused and keeps its last good version.
func (s *Set) SetChannels(channels []string, maxCatchup time.Duration) error {
	s.reloadMu.Lock()
	s.cfg.Channels, s.cfg.MaxCatchup = slices.Clone(channels), maxCatchup
	s.reloadMu.Unlock()
	_, err := s.reload()
	return err
}

// Reload rescans the directory now (Watch does this on changes and every
// RescanInterval). It reports whether a new version was swapped in.
func (s *Set) Reload() (bool, error) { return s.reload() }

// build makes a version from a scan. A file that fails keeps the version
// that was in force before (last good), and its error goes to status.
func (s *Set) build(scan *scanResult, prev *version) *version {
	if prev == nil {
		prev = &version{byFile: map[string]*compiled{}, cals: map[string]*calEntry{}}
	}
	v := &version{
		rules:  map[string]*compiled{},
		byFile: map[string]*compiled{},
		cals:   map[string]*calEntry{},
		status: map[string]FileStatus{},
	}
	files := make([]string, 0, len(scan.files))
	for f := range scan.files {
		files = append(files, f)
	}
	slices.Sort(files)
	s.buildCalendars(scan, files, prev, v)
	s.buildPeople(scan, prev, v)
	v.dir, v.dirHash = s.dir, s.dirHash
	v.filePeople = v.people
	v.people = mergeDirectory(v.people, v.dir)
	v.env = &env{people: v.people, calendars: s.cfg.Calendars, logger: s.cfg.Logger, memoryLimit: s.cfg.memoryLimitFor(v.people.Len())}
	v.pool = newPool(v.env, s.cfg.PoolSize)
	v.pool.hook = s.testHook
	// Every rule file is compiled first; then the files whose rule was in
	// force claim their names before the others, so a new file naming an
	// existing rule (a copy made for an edit) is the duplicate, whatever
	// the order of their names.
	var ruleFiles []string
	built := map[string]builtRule{}
	for _, f := range files {
		if scan.files[f].kind == KindRule {
			ruleFiles = append(ruleFiles, f)
			built[f] = s.compileRule(f, scan.files[f], v)
		}
	}
	inForce := func(f string) int {
		if old, b := prev.byFile[f], built[f]; old != nil && (b.err != nil || b.c.rule.Name == old.rule.Name) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(ruleFiles, func(a, b string) int { return inForce(a) - inForce(b) })
	for _, f := range ruleFiles {
		s.placeRule(f, built[f], prev, v)
	}
	for _, c := range v.rules {
		v.order = append(v.order, c)
	}
	slices.SortFunc(v.order, func(a, b *compiled) int { return strings.Compare(a.rule.Name, b.rule.Name) })
	v.hash = v.setHash()
	return v
}

func (s *Set) buildCalendars(scan *scanResult, files []string, prev, v *version) {
	names := map[string]string{} // calendar name -> file
	for _, f := range files {
		sf := scan.files[f]
		if sf.kind != KindCalendar {
			continue
		}
		base := path.Base(f)
		name := strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
		st := FileStatus{Kind: KindCalendar, Name: name, File: f}
		var err error
		var entry *calEntry
		switch {
		case sf.err != nil:
			err = sf.err
		case names[name] != "":
			err = fmt.Errorf("calendar %q is already defined by %s", name, names[name])
		case slices.Contains([]string{calendar.CNWorkday, calendar.Weekday, calendar.EveryDay}, name):
			err = fmt.Errorf("%q is a built-in calendar; name the file differently", name)
		case prev.cals[f] != nil && prev.cals[f].hash == sf.hash && prev.status[f].Error == "":
			entry = prev.cals[f]
		default:
			var cal calendar.Calendar
			if cal, err = calendar.ParseFile(name, sf.data); err == nil {
				entry = &calEntry{name: name, hash: sf.hash, cal: cal}
			}
		}
		if err != nil {
			st.Error, st.Line = errorLine(err)
			entry = prev.cals[f] // last good, if any
		}
		if entry != nil {
			names[entry.name] = f
			v.cals[f] = entry
			st.Hash = entry.hash
		}
		v.status[f] = st
	}
	// The registry is shared with the engine's schedules: update it in
	// place, and drop calendars whose file is gone.
	for _, e := range v.cals {
		if err := s.cfg.Calendars.Set(e.name, e.cal); err != nil {
			s.cfg.Logger.Warn("rules: register calendar", "calendar", e.name, "err", err)
		}
	}
	for _, e := range prev.cals {
		if _, ok := names[e.name]; !ok {
			s.cfg.Calendars.Remove(e.name)
		}
	}
}

func (s *Set) buildPeople(scan *scanResult, prev, v *version) {
	found := 0
	for _, f := range PeopleFiles {
		sf, ok := scan.files[f]
		if !ok {
			continue
		}
		found++
		st := FileStatus{Kind: KindPeople, File: f}
		if found > 1 {
			st.Error = fmt.Sprintf("only one people file may exist; %s is in use", v.people.File)
			v.status[f] = st
			continue
		}
		var (
			dir *Directory
			err error
		)
		switch {
		case sf.err != nil:
			err = sf.err
		case prev.filePeople != nil && prev.filePeople.File == f && prev.peopleHash == sf.hash:
			dir = prev.filePeople
		default:
			dir, err = parsePeople(f, sf.data)
		}
		if err != nil {
			st.Error, st.Line = errorLine(err)
			if prev.filePeople != nil { // last good
				v.people, v.peopleHash = prev.filePeople, prev.peopleHash
				st.Hash = prev.peopleHash
			}
		} else {
			v.people, v.peopleHash = dir, sf.hash
			st.Hash = sf.hash
		}
		v.status[f] = st
	}
	if v.people == nil {
		v.people = &Directory{extra: map[string]bool{}}
	}
}

// builtRule is a rule file compiled, or why it could not be.
type builtRule struct {
	c   *compiled
	err error
}

// compileRule compiles one rule file with v's states. The file's top level
// runs like any rule call, under the watchdog: a load must not wait on a
// file stuck in a Go function.
func (s *Set) compileRule(f string, sf *scanned, v *version) builtRule {
	var (
		c   *compiled
		err error
	)
	if sf.err != nil {
		err = &RuleError{File: f, Msg: sf.err.Error()}
	} else {
		var got *compiled // written by the call; read only once it returned
		err = s.withSandbox(context.Background(), v, f, func(sb *sandbox) error {
			var err error
			got, err = compileFile(context.Background(), sb, f, sf.data, s.cfg.CallTimeout)
			return err
		})
		var re *RuleError
		switch {
		case err == nil:
			c = got
		case !errors.As(err, &re): // stuck past the time limit, or a panic
			err = &RuleError{File: f, Msg: err.Error(), Err: err}
		}
	}
	return builtRule{c: c, err: err}
}

// placeRule puts a compiled rule file into v, or keeps its last good
// version when it failed or names a rule another file already placed.
func (s *Set) placeRule(f string, b builtRule, prev, v *version) {
	st := FileStatus{Kind: KindRule, File: f}
	c, err := b.c, b.err
	if err == nil {
		if other, dup := v.rules[c.rule.Name]; dup {
			err = &RuleError{File: f, Line: c.nameLine, Msg: fmt.Sprintf("rule name %q is already used by %s", c.rule.Name, other.file)}
		} else if msg := s.unknownChannel(c.rule.Channel); msg != "" {
			err = &RuleError{File: f, Line: c.channelLine, Msg: msg}
		} else if msg := s.catchupTooLong(c.rule.Catchup); msg != "" {
			err = &RuleError{File: f, Line: c.catchupLine, Msg: msg, Err: ErrCatchup}
			v.catchupErrs = append(v.catchupErrs, err)
		}
	}
	if err != nil {
		st.Error, st.Line = errorLine(err)
		if old := prev.byFile[f]; old != nil && v.rules[old.rule.Name] == nil {
			c = old // last good version stays in force
		} else {
			c = nil
		}
	}
	if c != nil {
		v.rules[c.rule.Name] = c
		v.byFile[f] = c
		st.Name, st.Hash = c.rule.Name, c.hash
	}
	v.status[f] = st
}

// setHash names the content in force: every good rule file, the people
// file and the calendars.
func (v *version) setHash() string {
	var lines []string
	for f, c := range v.byFile {
		lines = append(lines, "rule "+f+" "+c.hash)
	}
	for f, e := range v.cals {
		lines = append(lines, "calendar "+f+" "+e.hash)
	}
	if v.people != nil && v.people.File != "" {
		lines = append(lines, "people "+v.people.File+" "+v.peopleHash)
	}
	slices.Sort(lines)
	return contentHash([]byte(strings.Join(lines, "\n")))
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// errorLine splits an error into the message and line Status shows.
func errorLine(err error) (string, int) {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Msg, re.Line
	}
	var le *lineError
	if errors.As(err, &le) {
		return le.Msg, le.Line
	}
	var ae *lua.ApiError
	if errors.As(err, &ae) {
		return ae.Object.String(), 0
	}
	msg := err.Error()
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return msg, n
	}
	return msg, 0
}

// unknownChannel says why channel is not one the node has, or "" when it is
// (or when the set was given no channel list to check against). A rule
// naming a channel that does not exist would otherwise load, plan, and sit
// pending until its deadline: it is refused like any other error, and its
// last good version stays in force.
func (s *Set) unknownChannel(channel string) string {
	if s.cfg.Channels == nil || slices.Contains(s.cfg.Channels, channel) {
		return ""
	}
	have := slices.Sorted(slices.Values(s.cfg.Channels))
	if len(have) == 0 {
		return fmt.Sprintf("channel %q is not configured (this node has no channels)", channel)
	}
	return fmt.Sprintf("channel %q is not configured (have: %s)", channel, strings.Join(have, ", "))
}

// catchupTooLong says why a rule's catchup is not shorter than MaxCatchup,
// or "" when it is (or when there is no MaxCatchup).
func (s *Set) catchupTooLong(catchup time.Duration) string {
	if catchup == 0 {
		catchup = engine.DefaultCatchup
	}
	if s.cfg.MaxCatchup <= 0 || catchup < s.cfg.MaxCatchup {
		return ""
	}
	return fmt.Sprintf("catchup %s is not shorter than ledger_retention %s: a slot caught up after the ledger forgot its run would be sent again (shorten catchup or raise ledger_retention)",
		catchup, s.cfg.MaxCatchup)
}

// CatchupErrors are the rule files of the set in force that were refused
// because their catchup is not shorter than Config.MaxCatchup: a node
// refuses to start with them (its ledger_retention is too short for its
// rules); on a reload they are only refused, their last good version kept.
func (s *Set) CatchupErrors() []error { return slices.Clone(s.cur.Load().catchupErrs) }
