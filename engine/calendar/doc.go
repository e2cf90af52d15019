// Package calendar knows which civil days are workdays.
//
// It is pure and deterministic: nothing here reads the clock, starts a
// goroutine or touches the network, so the scheduler, the Lua rule library
// and the CLI can all ask the same questions and get the same answers on
// every node.
//
// # Dates
//
// A [Date] is a civil date with no zone. [Date.In] turns a date and a
// wall-clock time into an instant in a zone, with the one DST policy that the
// whole of Herald uses:
//
//   - A wall-clock time that does not exist (the spring-forward gap) becomes
//     the next instant that does: 02:30 on the day New York springs forward
//     is 03:00 EDT. Several gap times therefore collapse onto one instant;
//     callers that list slots fire that instant once.
//   - A wall-clock time that happens twice (the autumn repeat) is the first
//     occurrence: 01:30 on the day New York falls back is 01:30 EDT, never
//     01:30 EST. A slot in the repeated hour fires once.
//
// # Calendars
//
// A [Calendar] answers IsWorkday. The built-ins, registered in every
// [NewRegistry], are:
//
//   - "cn_workday": mainland China. Weekends are off, statutory holidays are
//     off and make-up workdays (调休) are on. The holiday data is
//     github.com/6tail/lunar-go's HolidayUtil, not a table typed in here;
//     [HolidayDataRange] reports the years it covers (2001–2027 with
//     lunar-go v1.4.7). After the last covered year cn_workday falls back to
//     plain Monday–Friday until lunar-go is upgraded, which is why callers
//     that plan far ahead should check the range and warn.
//   - "weekday": Monday to Friday.
//   - "every_day": every day.
//
// A company calendar file ([ParseFile]) names one built-in as its base and
// lists extra holidays and workdays that override it.
//
// # Lunar dates
//
// [LunarOf] and [SolarOfLunar] convert between the Gregorian and the Chinese
// lunar calendar (also lunar-go), for lunar birthdays and festivals.
package calendar
