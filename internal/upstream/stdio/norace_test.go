//go:build !race

package stdio

const raceOn = false
