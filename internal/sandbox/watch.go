package sandbox

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// The memory watchdog: one goroutine, running while any script runs,
// samples the heap and stops scripts past their bound (see the package
// doc).
const (
	sampleEvery = 5 * time.Millisecond
	gcEvery     = 50 * time.Millisecond
)

const heapMetric = "/memory/classes/heap/objects:bytes"

var watchdog struct {
	mu     sync.Mutex
	runs   map[*watched]struct{}
	active bool
	lastGC time.Time
}

// watched is one script under the watchdog.
type watched struct {
	x    *run
	base uint64
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watch puts x under the watchdog until done is called.
func watch(x *run) *watched {
	w := &watched{x: x, base: heapBytes()}
	watchdog.mu.Lock()
	if watchdog.runs == nil {
		watchdog.runs = map[*watched]struct{}{}
	}
	watchdog.runs[w] = struct{}{}
	if !watchdog.active {
		watchdog.active = true
		go sample()
	}
	watchdog.mu.Unlock()
	return w
}

func (w *watched) done() {
	watchdog.mu.Lock()
	delete(watchdog.runs, w)
	watchdog.mu.Unlock()
}

// sample is the watchdog's goroutine; it ends when no script is left.
func sample() {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for range t.C {
		watchdog.mu.Lock()
		if len(watchdog.runs) == 0 {
			watchdog.active = false
			watchdog.mu.Unlock()
			return
		}
		over := overBound(heapBytes(), 1)
		if len(over) > 0 && time.Since(watchdog.lastGC) >= gcEvery {
			// Garbage counts until it is collected: confirm with a
			// collection before stopping anything.
			watchdog.lastGC = time.Now()
			watchdog.mu.Unlock()
			runtime.GC()
			watchdog.mu.Lock()
			over = overBound(heapBytes(), 1)
		} else if len(over) > 0 {
			// A collection ran lately: only twice the bound is past doubt.
			over = overBound(heapBytes(), 2)
		}
		watchdog.mu.Unlock()
		for _, w := range over {
			w.x.stop(&LimitError{Limit: "memory", Msg: fmt.Sprintf(
				"memory: the heap grew by more than %s while the script ran", SizeText(w.x.limits.Memory))})
		}
	}
}

// overBound returns the scripts whose heap growth passed factor times
// their bound. A heap below a script's base (garbage of before it started,
// collected since) lowers the base. mu held.
func overBound(heap uint64, factor int64) []*watched {
	var out []*watched
	for w := range watchdog.runs {
		if heap < w.base {
			w.base = heap
		}
		if int64(heap-w.base) > factor*w.x.limits.Memory {
			out = append(out, w)
		}
	}
	return out
}
