package sandbox

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"
)

// The memory watchdog samples the heap while a script runs and stops the
// script once it has grown past the bound (see the package doc). A worker
// runs one script at a time: the heap's growth is that script's.
const (
	sampleEvery = 5 * time.Millisecond
	gcEvery     = 50 * time.Millisecond
)

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watch puts x under the watchdog, a goroutine that ends when the returned
// stop is called (stop returns once it has).
func watch(x *run) (stop func()) {
	base := heapBytes()
	done, ended := make(chan struct{}), make(chan struct{})
	// grown reports whether the heap grew past factor times the bound. A
	// heap below base (garbage of before the script, collected since)
	// lowers the base.
	grown := func(factor int64) bool {
		heap := heapBytes()
		base = min(base, heap)
		return int64(heap-base) > factor*x.limits.Memory
	}
	go func() {
		defer close(ended)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		var lastGC time.Time
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if !grown(1) {
				continue
			}
			if time.Since(lastGC) >= gcEvery {
				// Garbage counts until it is collected: confirm with a
				// collection before stopping the script.
				lastGC = time.Now()
				runtime.GC()
				if !grown(1) {
					continue
				}
			} else if !grown(2) {
				continue // a collection ran lately: only twice the bound is past doubt
			}
			x.stop(&LimitError{Limit: "memory", Msg: fmt.Sprintf(
				"memory: the heap grew by more than %s while the script ran", SizeText(x.limits.Memory))})
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}
