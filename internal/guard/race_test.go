//go:build race

package guard

// raceOn: the race detector slows regular expressions about tenfold, so
// the detection-quality test reads a sparser sample of the ham mail.
const raceOn = true
