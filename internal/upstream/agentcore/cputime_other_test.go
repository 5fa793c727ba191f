//go:build !unix

package agentcore_test

import "time"

// cpuTime is not measured here: the benchmark's cpu-µs/call reads 0.
func cpuTime() time.Duration { return 0 }
