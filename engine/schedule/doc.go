// Package schedule turns a rule's trigger (cron spec, time zone, calendar,
// shift) into its slots: the instants at which the rule fires.
//
// It is pure and deterministic: time is always passed in, so every leader,
// the CLI's "next five fire times" and the tests compute the same slots.
// Cron text is parsed by github.com/robfig/cron/v3 (5 fields, 6 with leading
// seconds, or a descriptor); the slots themselves are enumerated here from
// the parsed fields, because robfig's own Next is not safe around DST and
// knows nothing of calendars.
//
// # Time zones and DST
//
// Slots are wall-clock times in the spec's IANA zone (empty means UTC; the
// machine-dependent "Local" is refused). Each wall-clock slot becomes an
// instant with calendar.Date.In:
//
//   - A slot in a spring-forward gap fires once, at the first instant after
//     the gap. In America/New_York on 2026-03-08, "30 2 * * *" fires at
//     03:00 EDT, and "*/15 * * * *" fires 01:45 EST, then 03:00 EDT once
//     (02:00, 02:15, 02:30, 02:45 and 03:00 are all that instant), then
//     03:15 EDT.
//   - A slot in the repeated autumn hour fires once, at its first
//     occurrence. On 2026-11-01, "0 * * * *" fires 01:00 EDT and then
//     02:00 EST; it does not fire again at 01:00 EST.
//
// "@every <duration>" is not wall-clock: its slots are the multiples of the
// duration since the Unix epoch, so every leader computes the same slots
// whenever it starts, and DST does not touch them.
//
// # Calendars and shift
//
// With a calendar set, a slot whose civil date (in the zone) is not a
// workday is
//
//   - dropped, with Shift "skip" or "" (the default), or
//   - moved to the same wall-clock time on the next workday, with Shift
//     "next_workday". Slots moved onto a day that has the same slot of its
//     own fire once: a daily 09:00 rule fires once on the Monday after a
//     weekend, and a Monday 09:00 rule whose Monday is a holiday fires
//     Tuesday 09:00 once.
//
// Next always returns the first slot strictly after its argument, so the
// slots it yields are strictly increasing and never repeat an instant. The
// calendar is looked up in the registry on every call, so an edited company
// calendar file takes effect without rebuilding the schedule; if it has
// been removed, the calendar the schedule was built with stays in force.
// "next_workday" is refused for "@every" specs, whose slots are not tied
// to a time of day.
//
// Next searches Horizon ahead and reports false when no slot falls within
// it (for example "0 0 30 2 *").
package schedule
