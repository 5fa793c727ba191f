// Package backoff computes the waits of retry loops: each wait doubles from
// Base up to Max, and a random part of it is taken off, so that loops set off
// by one event (a server going down, file descriptors running out) do not
// retry in step. The loop that retries owns its Backoff: Next before each
// wait, Reset after a success.
package backoff

import (
	"math/rand/v2"
	"time"
)

// DefaultJitter is the part of each wait drawn at random when
// Backoff.Jitter is zero.
const DefaultJitter = 0.2

// Backoff is the state of one retry loop. It is not safe for concurrent use.
type Backoff struct {
	// Base is the first wait; it must be positive (Next returns zero
	// otherwise).
	Base time.Duration
	// Max caps every wait. Zero means no cap (the doubling still stops
	// short of overflowing).
	Max time.Duration
	// Jitter is the part of each wait taken off at random: a wait d
	// becomes uniform in [d - Jitter·d, d], so Max stays an upper bound.
	// Zero means DefaultJitter; negative means none (exact doubling, for
	// waits that are announced, such as /healthz's next_retry). Values
	// above 1 count as 1.
	Jitter float64
	// Rand returns a number in [0, 1). Nil means math/rand/v2's Float64;
	// tests set a seeded source.
	Rand func() float64

	n int // waits returned since the last Reset
}

// Next returns the wait before the next attempt and counts it: Base, then
// twice the last, up to Max, each less its random part.
func (b *Backoff) Next() time.Duration {
	if b.Base <= 0 {
		return 0
	}
	d := b.Base
	for i := 0; i < b.n; i++ {
		if (b.Max > 0 && d >= b.Max) || d > maxDuration/2 {
			break
		}
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	b.n++
	j := b.Jitter
	switch {
	case j == 0:
		j = DefaultJitter
	case j < 0:
		return d
	case j > 1:
		j = 1
	}
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	return d - time.Duration(j*r()*float64(d))
}

// Reset starts the doubling again from Base: the loop's attempt succeeded.
func (b *Backoff) Reset() { b.n = 0 }

// Waits reports how many waits Next returned since the last Reset.
func (b *Backoff) Waits() int { return b.n }

const maxDuration = time.Duration(1<<63 - 1)
