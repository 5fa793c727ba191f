package bigbuf

import (
	"testing"
	"time"
)

func TestClassSize(t *testing.T) {
	for n := Min; n <= maxClass; n += n/37 + 1 {
		c := ClassSize(n)
		if c < n || float64(c) > float64(n)*1.0625 {
			t.Fatalf("ClassSize(%d) = %d: not within [n, 1.0625 n]", n, c)
		}
		if ClassSize(c) != c {
			t.Fatalf("ClassSize(%d) = %d, but ClassSize(%d) = %d", n, c, c, ClassSize(c))
		}
	}
	if ClassSize(Min-1) != Min-1 || ClassSize(maxClass+1) != maxClass+1 {
		t.Error("sizes outside the pooled range are not left as they are")
	}
}

// A buffer given back is the next one taken of its class; the pool holds
// at most MaxPooled bytes; small buffers are not pooled; once unused for
// IdleRelease the pool is emptied.
func TestPool(t *testing.T) {
	released := make(chan struct{}, 1)
	pool.mu.Lock()
	pool.onIdle = func() { released <- struct{}{} }
	pool.mu.Unlock()
	t.Cleanup(func() {
		pool.mu.Lock()
		pool.onIdle = nil
		pool.mu.Unlock()
	})

	b := Get(1<<20 + 100)
	if len(b) != 1<<20+100 || cap(b) != ClassSize(1<<20+100) {
		t.Fatalf("Get: len %d cap %d", len(b), cap(b))
	}
	Put(b)
	if got := Get(1<<20 + 1); &got[0] != &b[0] {
		t.Error("a buffer given back is not taken again")
	} else {
		Put(got)
	}
	small := Get(Min - 1)
	Put(small)
	if pooled() != ClassSize(1<<20+100) {
		t.Errorf("pooled %d bytes, want %d (one buffer; small ones are not pooled)", pooled(), ClassSize(1<<20+100))
	}
	var many [][]byte
	for range 2 * MaxPooled / (16 << 20) {
		many = append(many, Get(16<<20))
	}
	for _, b := range many {
		Put(b)
	}
	if pooled() > MaxPooled {
		t.Errorf("pooled %d bytes, over MaxPooled", pooled())
	}
	select {
	case <-released:
	case <-time.After(IdleRelease + 30*time.Second):
		t.Fatal("the pool was not released after going unused")
	}
	if pooled() != 0 {
		t.Errorf("pooled %d bytes after the idle release", pooled())
	}
}

// pooled returns the bytes the pool holds.
func pooled() int {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.bytes
}
