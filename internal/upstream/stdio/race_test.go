//go:build race

package stdio

// raceOn: under the race detector a sync.Pool drops a quarter of what it
// is given, on purpose, so a test cannot count on getting it back.
const raceOn = true
