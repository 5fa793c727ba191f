// Package bigbuf pools the buffers of large messages (a request body, an
// answer on its way to the client): a large call in flight takes them
// from here and gives them back when its answer has been written, so a
// stream of large calls reuses the same memory instead of leaving garbage
// behind for the collector to find (which lets the heap grow to twice what
// is live). Memory goes back to the system once large messages stop.
//
// Buffers come in size classes of at least Min bytes, sixteen to each
// doubling (a buffer is at most 6.25% larger than asked for). What the
// pool holds is capped at MaxPooled bytes; a buffer given back beyond that
// is left to the garbage collector. When no buffer has been taken or given
// back for IdleRelease, everything pooled is dropped and the process's
// free memory is returned to the system (debug.FreeOSMemory), once per
// burst of large messages.
package bigbuf

import (
	"math/bits"
	"runtime/debug"
	"sync"
	"time"
)

const (
	// Min is the smallest pooled size: smaller buffers are allocated.
	Min = 64 << 10
	// MaxPooled caps the bytes the pool holds.
	MaxPooled = 64 << 20
	// IdleRelease is how long the pool must go unused before it is
	// emptied and memory returned to the system.
	IdleRelease = 2 * time.Second
	// maxClass is the largest pooled class size: 32 MiB (a 16 MiB
	// message, the default limit, and its growth).
	maxClass = 32 << 20
)

// pool is the process's one pool.
var pool struct {
	mu     sync.Mutex
	free   map[int][][]byte // guarded by mu: by class size
	bytes  int              // guarded by mu: the bytes free holds
	last   time.Time        // guarded by mu: when a buffer was last taken or given back
	timer  *time.Timer      // guarded by mu: the idle release, when armed
	onIdle func()           // guarded by mu: for tests, run after a release
}

// ClassSize returns the size of the class that holds n bytes: n rounded up
// to four significant bits below the top one. Sizes below Min and above
// the largest class are not pooled: ClassSize returns n for them.
func ClassSize(n int) int {
	if n < Min || n > maxClass {
		return n
	}
	shift := bits.Len(uint(n-1)) - 5
	return ((n-1)>>shift + 1) << shift
}

// Get returns a buffer of length n, pooled when n is at least Min: its
// capacity is then ClassSize(n) and it should be given back with Put once
// nothing reads it. Its bytes are not zeroed.
func Get(n int) []byte {
	if n < Min || n > maxClass {
		return make([]byte, n)
	}
	c := ClassSize(n)
	pool.mu.Lock()
	touch()
	l := pool.free[c]
	if k := len(l); k > 0 {
		b := l[k-1]
		l[k-1] = nil
		pool.free[c] = l[:k-1]
		pool.bytes -= c
		pool.mu.Unlock()
		return b[:n]
	}
	pool.mu.Unlock()
	return make([]byte, n, c)
}

// Put gives b back, when it came from Get (its capacity is a class size)
// and the pool has room; nothing may read or write b afterwards. Other
// buffers are left to the garbage collector.
func Put(b []byte) {
	c := cap(b)
	if c < Min || c > maxClass || ClassSize(c) != c {
		return
	}
	pool.mu.Lock()
	touch()
	if pool.bytes+c <= MaxPooled {
		if pool.free == nil {
			pool.free = map[int][][]byte{}
		}
		pool.free[c] = append(pool.free[c], b[:0])
		pool.bytes += c
	}
	pool.mu.Unlock()
}

// touch notes that the pool is in use and arms the idle release. mu held.
func touch() {
	pool.last = time.Now()
	if pool.timer == nil {
		pool.timer = time.AfterFunc(IdleRelease, idle)
	}
}

// idle runs IdleRelease after the pool was first used since the last
// release: it empties the pool and returns free memory to the system if
// nothing used the pool since, and waits again otherwise.
func idle() {
	pool.mu.Lock()
	if wait := IdleRelease - time.Since(pool.last); wait > 0 {
		pool.timer.Reset(wait)
		pool.mu.Unlock()
		return
	}
	pool.timer = nil
	pool.free, pool.bytes = nil, 0
	done := pool.onIdle
	pool.mu.Unlock()
	debug.FreeOSMemory()
	if done != nil {
		done()
	}
}
