package calendar

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors returned by a Registry.
var (
	// ErrUnknownCalendar: no calendar of that name is registered.
	ErrUnknownCalendar = errors.New("unknown calendar")
	// ErrDuplicateCalendar: Register was given a name already in use.
	ErrDuplicateCalendar = errors.New("calendar already registered")
	// ErrBuiltinCalendar: a built-in calendar cannot be replaced.
	ErrBuiltinCalendar = errors.New("built-in calendar cannot be replaced")
	// ErrBadCalendar: an empty name or a nil calendar.
	ErrBadCalendar = errors.New("bad calendar")
)

// Names of the built-in calendars.
const (
	CNWorkday = "cn_workday"
	Weekday   = "weekday"
	EveryDay  = "every_day"
)

// Calendar decides which civil days are workdays. Implementations must be
// deterministic and safe for concurrent use.
type Calendar interface {
	Name() string
	IsWorkday(d Date) bool
}

// cnWorkday is mainland China's working calendar from lunar-go's table.
type cnWorkday struct{}

func (cnWorkday) Name() string { return CNWorkday }

func (cnWorkday) IsWorkday(d Date) bool {
	if h, ok := cnData().days[d]; ok {
		return h.work
	}
	return isWeekday(d)
}

// weekday is Monday to Friday.
type weekday struct{}

func (weekday) Name() string          { return Weekday }
func (weekday) IsWorkday(d Date) bool { return isWeekday(d) }

// everyDay has no days off.
type everyDay struct{}

func (everyDay) Name() string        { return EveryDay }
func (everyDay) IsWorkday(Date) bool { return true }

func isWeekday(d Date) bool {
	wd := d.Weekday()
	return wd != time.Saturday && wd != time.Sunday
}

// builtin returns the built-in calendar of that name.
func builtin(name string) (Calendar, bool) {
	switch name {
	case CNWorkday:
		return cnWorkday{}, true
	case Weekday:
		return weekday{}, true
	case EveryDay:
		return everyDay{}, true
	}
	return nil, false
}

var builtinNames = []string{CNWorkday, Weekday, EveryDay}

// Registry maps calendar names to calendars. It is safe for concurrent use,
// so the rules watcher can replace company calendars while the scheduler
// looks them up.
type Registry struct {
	mu   sync.RWMutex
	cals map[string]Calendar
}

// NewRegistry returns a registry holding the built-ins: cn_workday, weekday
// and every_day.
func NewRegistry() *Registry {
	r := &Registry{cals: make(map[string]Calendar)}
	for _, n := range builtinNames {
		c, _ := builtin(n)
		r.cals[n] = c
	}
	return r
}

// Register adds c under name. The name must be new.
func (r *Registry) Register(name string, c Calendar) error {
	if err := checkEntry(name, c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cals[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateCalendar, name)
	}
	r.cals[name] = c
	return nil
}

// Set adds or replaces the calendar under name, for a company calendar file
// that was edited. Built-ins cannot be replaced.
func (r *Registry) Set(name string, c Calendar) error {
	if err := checkEntry(name, c); err != nil {
		return err
	}
	if _, ok := builtin(name); ok {
		return fmt.Errorf("%w: %q", ErrBuiltinCalendar, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cals[name] = c
	return nil
}

// Remove drops a registered calendar; built-ins stay. It reports whether
// something was removed.
func (r *Registry) Remove(name string) bool {
	if _, ok := builtin(name); ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.cals[name]
	delete(r.cals, name)
	return ok
}

func checkEntry(name string, c Calendar) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrBadCalendar)
	}
	if c == nil {
		return fmt.Errorf("%w: %q is nil", ErrBadCalendar, name)
	}
	return nil
}

// Lookup returns the calendar registered under name.
func (r *Registry) Lookup(name string) (Calendar, error) {
	r.mu.RLock()
	c, ok := r.cals[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownCalendar, name, r.Names())
	}
	return c, nil
}

// Names lists the registered calendar names in order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.cals))
	for n := range r.cals {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// MaxWorkdaySearch bounds NextWorkday: a calendar with no workday in a
// whole year is treated as having none at all.
const MaxWorkdaySearch = 366

// NextWorkday is the first workday of c strictly after d, or the zero Date
// if there is none within MaxWorkdaySearch days.
func NextWorkday(c Calendar, d Date) Date {
	for i := 1; i <= MaxWorkdaySearch; i++ {
		n := d.AddDays(i)
		if c.IsWorkday(n) {
			return n
		}
	}
	return Date{}
}

var (
	_ Calendar = cnWorkday{}
	_ Calendar = weekday{}
	_ Calendar = everyDay{}
)

// PrevWorkday is the last workday of c strictly before d, or the zero Date
// if there is none within MaxWorkdaySearch days.
func PrevWorkday(c Calendar, d Date) Date {
	for i := 1; i <= MaxWorkdaySearch; i++ {
		n := d.AddDays(-i)
		if c.IsWorkday(n) {
			return n
		}
	}
	return Date{}
}
