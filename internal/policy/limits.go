package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Limiter is a token bucket per key (a client's name), kept across config
// generations: Update replaces the buckets whose settings changed and drops
// those of keys gone.
type Limiter struct {
	// Shared, when set before the first Allow, is asked first: a
	// cluster's limiter, whose budget all replicas share. When it fails
	// (Redis down), this replica's own bucket decides. Nil: own buckets
	// only.
	Shared SharedLimiter

	mu      sync.Mutex
	buckets map[string]*bucket
}

// SharedLimiter takes one request of key's budget under r in a store the
// replicas share; an error means it could not tell.
type SharedLimiter interface {
	Allow(key string, r Rate) (ok bool, retryAfter time.Duration, err error)
}

type bucket struct {
	cfg Rate
	lim *rate.Limiter
}

// Update sets the limits by key (nil: none).
func (l *Limiter) Update(limits map[string]*Rate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := map[string]*bucket{}
	for k, rl := range limits {
		if rl == nil {
			continue
		}
		if b := l.buckets[k]; b != nil && b.cfg == *rl {
			next[k] = b
			continue
		}
		next[k] = &bucket{cfg: *rl, lim: rate.NewLimiter(rate.Limit(rl.Rate), rl.Burst)}
	}
	l.buckets = next
}

// Allow takes a token of key's bucket at now; when there is none it
// returns false and how long until there will be.
func (l *Limiter) Allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	b := l.buckets[key]
	l.mu.Unlock()
	if b == nil {
		return true, 0
	}
	if l.Shared != nil {
		if ok, wait, err := l.Shared.Allow(key, b.cfg); err == nil {
			return ok, wait
		}
	}
	return take(b.lim, now)
}

func take(lim *rate.Limiter, now time.Time) (bool, time.Duration) {
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// RetryAfterSeconds is d as the whole seconds of a Retry-After header (at
// least 1).
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// DestinationLimiter bounds one destination, all callers together: a
// token bucket for its requests, one per tool for tools/call, and a cap
// on requests in flight. Over a rate, the request is answered with a
// JSON-RPC error (code -32007, data {"retryAfter": seconds}) without
// reaching the upstream; at the concurrency cap it waits for a slot
// until its context ends.
type DestinationLimiter struct {
	name  string
	cfg   DestinationLimits
	all   *rate.Limiter            // nil: no rate limit
	tools map[string]*rate.Limiter // by tool name
	slots chan struct{}            // nil: no concurrency cap
}

// DestinationLimits bound the traffic to one destination. The zero value
// bounds nothing.
type DestinationLimits struct {
	// RateLimit bounds all its requests; nil means no bound.
	RateLimit *Rate
	// MaxConcurrent bounds its requests in flight; zero means no bound.
	MaxConcurrent int
	// Tools bound the calls of each tool, by name; nil means none.
	Tools map[string]*Rate
}

// NewDestinationLimiter returns the limiter of cfg, or prev when its
// settings are the same (its buckets and slots carry over a reload). Nil
// cfg means no limits (nil).
func NewDestinationLimiter(name string, cfg *DestinationLimits, prev *DestinationLimiter) *DestinationLimiter {
	if cfg == nil {
		return nil
	}
	if prev != nil && reflect.DeepEqual(prev.cfg, *cfg) {
		return prev
	}
	l := &DestinationLimiter{name: name, cfg: *cfg, tools: map[string]*rate.Limiter{}}
	if rl := cfg.RateLimit; rl != nil {
		l.all = rate.NewLimiter(rate.Limit(rl.Rate), rl.Burst)
	}
	for tool, rl := range cfg.Tools {
		l.tools[tool] = rate.NewLimiter(rate.Limit(rl.Rate), rl.Burst)
	}
	if cfg.MaxConcurrent > 0 {
		l.slots = make(chan struct{}, cfg.MaxConcurrent)
	}
	return l
}

// Send sends req with send within the limits. A nil limiter sends at once.
func (l *DestinationLimiter) Send(ctx context.Context, req *jsonrpc.Message, send func(context.Context, *jsonrpc.Message) (session.Call, error)) (session.Call, error) {
	if l == nil {
		return send(ctx, req)
	}
	now := time.Now()
	if l.all != nil {
		if ok, d := take(l.all, now); !ok {
			return rateRefusal(req, "destination "+l.name, d), nil
		}
	}
	if len(l.tools) > 0 && req.Method == "tools/call" {
		name := paramString(req, "name")
		if lim := l.tools[name]; lim != nil {
			if ok, d := take(lim, now); !ok {
				return rateRefusal(req, "tool "+name+" of destination "+l.name, d), nil
			}
		}
	}
	if l.slots == nil {
		return send(ctx, req)
	}
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, jsonrpc.Errorf(mcp.CodeUpstreamTimeout, "destination %s: no free slot (max_concurrent %d) before the deadline", l.name, cap(l.slots))
	}
	c, err := send(ctx, req)
	if err != nil {
		<-l.slots
		return nil, err
	}
	if c.LongLived() {
		<-l.slots // a subscription stream is not a request in flight
		return c, nil
	}
	return &slotCall{Call: c, release: func() { <-l.slots }}, nil
}

// rateRefusal answers req with the JSON-RPC error of a rate limit (what's)
// exceeded: -32007, data {"retryAfter": seconds}.
func rateRefusal(req *jsonrpc.Message, what string, d time.Duration) session.Call {
	secs := RetryAfterSeconds(d)
	data, _ := json.Marshal(map[string]any{"retryAfter": secs})
	return session.NewAnswer(jsonrpc.NewError(req.ID, &jsonrpc.Error{Code: mcp.CodeRequestRefused,
		Message: fmt.Sprintf("rate limit of %s exceeded; retry after %ss", what, strconv.Itoa(secs)), Data: data}))
}

// slotCall gives its concurrency slot back once the response is taken or
// the call is abandoned.
type slotCall struct {
	session.Call
	once    sync.Once
	release func()
}

func (c *slotCall) Poll() (*jsonrpc.Message, bool) {
	m, ended := c.Call.Poll()
	if ended || m != nil && m.IsResponse() {
		c.once.Do(c.release)
	}
	return m, ended
}

func (c *slotCall) Abandon(cancel bool) {
	c.Call.Abandon(cancel)
	c.once.Do(c.release)
}

// UpstreamTime passes on the wrapped call's upstream time.
func (c *slotCall) UpstreamTime() time.Duration { return session.UpstreamTime(c.Call) }
