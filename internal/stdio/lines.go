package stdio

import (
	"log/slog"
	"sync"
	"time"
)

// Default budget of a LineLimit: a burst of DefaultLogBurst lines, then
// DefaultLogRate lines a second.
const (
	DefaultLogRate  = 20
	DefaultLogBurst = 100
)

// LineLimit is a token bucket for the lines children write that go to the
// log (stdout lines that are not JSON-RPC, and stderr lines). A line that
// finds the bucket empty is counted, not logged; the count is logged as one
// "lines suppressed" record a second after suppression began, and when a
// child exits. One LineLimit may be shared by several processes (all the
// children of one destination). Safe for concurrent use.
type LineLimit struct {
	rate, burst float64

	mu         sync.Mutex
	tokens     float64      // guarded by mu
	last       time.Time    // guarded by mu: last refill
	suppressed int          // guarded by mu: lines refused since the last summary
	since      time.Time    // guarded by mu: when the first of them was refused
	log        *slog.Logger // guarded by mu: where the summary goes
	timer      *time.Timer  // guarded by mu: the pending summary, if any
}

// NewLineLimit returns a LineLimit that lets through burst lines at once
// and perSecond lines a second after that. Zero (or negative) values mean
// DefaultLogRate and DefaultLogBurst.
func NewLineLimit(perSecond float64, burst int) *LineLimit {
	if perSecond <= 0 {
		perSecond = DefaultLogRate
	}
	if burst <= 0 {
		burst = DefaultLogBurst
	}
	return &LineLimit{rate: perSecond, burst: float64(burst), tokens: float64(burst)}
}

// allow reports whether one more line may be logged to log. When it may
// not, the line is counted and a summary is scheduled.
func (l *LineLimit) allow(log *slog.Logger) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	if l.suppressed == 0 {
		l.since = now
	}
	l.suppressed++
	l.log = log
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Second, l.flush)
	}
	return false
}

// flush logs how many lines were suppressed since the last summary, if
// any, and cancels the pending summary.
// The summary is logged under mu, so a flush that returns has logged
// every count taken before it (a process's exit summary is complete).
func (l *LineLimit) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.suppressed > 0 && l.log != nil {
		l.log.Warn("child output lines suppressed (over the log budget)", "suppressed", l.suppressed,
			"over", time.Since(l.since).Round(time.Millisecond).String())
	}
	l.suppressed = 0
}
