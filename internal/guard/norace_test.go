//go:build !race

package guard

const raceOn = false
