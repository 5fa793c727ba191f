package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDoublesUpToMax: without jitter the waits are Base, 2·Base, … up to
// Max, and Reset starts again from Base.
func TestDoublesUpToMax(t *testing.T) {
	b := Backoff{Base: 5 * time.Millisecond, Max: time.Second, Jitter: -1}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if b.Waits() != len(want) {
		t.Errorf("Waits() = %d, want %d", b.Waits(), len(want))
	}
	b.Reset()
	if got := b.Next(); got != 5*time.Millisecond {
		t.Errorf("after Reset: %v, want 5ms", got)
	}
}

// TestJitter: with a seeded source every wait lies in [d - Jitter·d, d] for
// the doubled d, the waits are not all the same, and the default jitter
// applies when Jitter is zero.
func TestJitter(t *testing.T) {
	for _, tt := range []struct {
		jitter, want float64 // Jitter set, jitter expected
	}{{0, DefaultJitter}, {0.5, 0.5}, {3, 1}} {
		src := rand.New(rand.NewPCG(1, 2))
		b := Backoff{Base: time.Second, Max: 30 * time.Second, Jitter: tt.jitter, Rand: src.Float64}
		exact := Backoff{Base: time.Second, Max: 30 * time.Second, Jitter: -1}
		distinct := map[time.Duration]bool{}
		for i := range 200 {
			got, d := b.Next(), exact.Next()
			lo := d - time.Duration(tt.want*float64(d))
			if got < lo || got > d {
				t.Fatalf("Jitter %v: wait %d = %v, want within [%v, %v]", tt.jitter, i, got, lo, d)
			}
			if d == 30*time.Second {
				distinct[got] = true
			}
		}
		if len(distinct) < 100 {
			t.Errorf("Jitter %v: %d distinct capped waits of 195, want them spread", tt.jitter, len(distinct))
		}
	}
}

// TestBounds: the extremes of the random part, a zero Base, and no Max:
// doubling stops before it overflows.
func TestBounds(t *testing.T) {
	b := Backoff{Base: time.Second, Jitter: 0.5, Rand: func() float64 { return 0 }}
	if got := b.Next(); got != time.Second {
		t.Errorf("Rand 0: %v, want 1s", got)
	}
	b = Backoff{Base: time.Second, Jitter: 0.5, Rand: func() float64 { return 0.999999 }}
	if got := b.Next(); got < 500*time.Millisecond || got > 501*time.Millisecond {
		t.Errorf("Rand near 1: %v, want about 500ms", got)
	}
	if got := (&Backoff{}).Next(); got != 0 {
		t.Errorf("zero Base: %v, want 0", got)
	}
	b = Backoff{Base: time.Hour, Jitter: -1}
	last := time.Duration(0)
	for i := range 100 {
		got := b.Next()
		if got < last {
			t.Fatalf("wait %d = %v after %v: the doubling overflowed", i, got, last)
		}
		last = got
	}
}
