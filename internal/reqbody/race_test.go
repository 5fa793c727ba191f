//go:build race

package reqbody

// raceOn: under the race detector a sync.Pool drops a quarter of what it
// is given, on purpose, so a test cannot count on getting it back.
const raceOn = true
