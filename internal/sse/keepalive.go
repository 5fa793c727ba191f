package sse

import "time"

// KeepAlive ticks every interval, for comment keep-alives on a stream; a
// non-positive interval never ticks (C is nil).
type KeepAlive struct {
	C <-chan time.Time
	t *time.Ticker
}

// NewKeepAlive returns a KeepAlive ticking every d.
func NewKeepAlive(d time.Duration) KeepAlive {
	if d <= 0 {
		return KeepAlive{}
	}
	t := time.NewTicker(d)
	return KeepAlive{C: t.C, t: t}
}

// Stop stops the ticker.
func (k KeepAlive) Stop() {
	if k.t != nil {
		k.t.Stop()
	}
}
