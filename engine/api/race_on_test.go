//go:build race

package api_test

// raceEnabled: the race detector doubles allocations and slows encoding
// tenfold; memory bounds are loosened and long walks shortened.
const raceEnabled = true
