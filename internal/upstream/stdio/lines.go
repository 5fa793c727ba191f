package stdio

import (
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Default budget of a LineLimit, per stream: a burst of DefaultLogBurst
// lines, then DefaultLogRate lines a second.
const (
	DefaultLogRate  = 20
	DefaultLogBurst = 100
)

// stream is which output a line came from; each has its own budget, so a
// stderr flood does not hide stdout's diagnostics, nor the other way round.
type stream int

const (
	streamStdout stream = iota // stdout lines that are not JSON-RPC
	streamStderr
)

func (s stream) String() string { return [...]string{"stdout", "stderr"}[s] }

// LineLimit is a token bucket (x/time/rate), per stream, for the lines children write
// that go to the log (stdout lines that are not JSON-RPC, and stderr
// lines). A line that finds its bucket empty is counted, not logged; the
// count is logged as one "lines suppressed" record per stream a second
// after suppression began, and when a child exits. One LineLimit may be
// shared by several processes (all the children of one destination). Safe
// for concurrent use.
type LineLimit struct {
	mu    sync.Mutex
	b     [2]bucket   // guarded by mu, by stream
	timer *time.Timer // guarded by mu: the pending summary, if any
}

type bucket struct {
	lim        *rate.Limiter
	suppressed int          // lines refused since the last summary
	since      time.Time    // when the first of them was refused
	log        *slog.Logger // where the summary goes
}

// NewLineLimit returns a LineLimit that lets through burst lines of each
// stream at once and perSecond lines a second after that. Zero (or
// negative) values mean DefaultLogRate and DefaultLogBurst.
func NewLineLimit(perSecond float64, burst int) *LineLimit {
	if perSecond <= 0 {
		perSecond = DefaultLogRate
	}
	if burst <= 0 {
		burst = DefaultLogBurst
	}
	l := &LineLimit{}
	for i := range l.b {
		l.b[i].lim = rate.NewLimiter(rate.Limit(perSecond), burst)
	}
	return l
}

// allow reports whether one more line of s may be logged to log. When it
// may not, the line is counted and a summary is scheduled.
func (l *LineLimit) allow(s stream, log *slog.Logger) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &l.b[s]
	if b.lim.AllowN(now, 1) {
		return true
	}
	if b.suppressed == 0 {
		b.since = now
	}
	b.suppressed++
	b.log = log
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Second, l.flush)
	}
	return false
}

// flush logs how many lines of each stream were suppressed since the last
// summary, if any, and cancels the pending summary. The summaries are
// logged under mu, so a flush that returns has logged every count taken
// before it (a process's exit summary is complete).
func (l *LineLimit) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	for s := range l.b {
		b := &l.b[s]
		if b.suppressed > 0 && b.log != nil {
			b.log.Warn("child output lines suppressed (over the log budget)", "stream", stream(s).String(),
				"suppressed", b.suppressed, "over", time.Since(b.since).Round(time.Millisecond).String())
		}
		b.suppressed = 0
	}
}
