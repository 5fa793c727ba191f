//go:build !linux

package stdio

import "time"

// threadsWaited cannot tell here (see cpuwait_linux.go).
func threadsWaited(int) (time.Duration, bool) { return 0, false }
