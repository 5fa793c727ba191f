//go:build !race

package reqbody

const raceOn = false
