// Package ratelimit is a rate limit shared by every replica of a cluster:
// GCRA (the generic cell rate algorithm) kept in Redis, one key per
// client, one script call (EVALSHA) per check, on Redis's clock, so the
// replicas' clocks do not matter. The algorithm and its script are
// go-redis/redis_rate's; this package maps a per-second rate and a burst,
// as the config states them, onto it and prefixes the keys.
//
// When Redis cannot be reached, Allow returns the error: the caller falls
// back to its own per-replica limiter (so a client then gets up to the
// limit once per replica), rather than refusing or admitting everything.
package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Limit is a rate and a burst.
type Limit struct {
	// Rate is the sustained rate, in requests per second; > 0.
	Rate float64
	// Burst is how many requests may come at once; 0 means
	// max(1, ceil(Rate)), as internal/config's rate limits default it.
	Burst int
}

// Redis is what the limiter needs of a Redis client: *redis.Client,
// *redis.ClusterClient and every redis.UniversalClient have it.
type Redis interface {
	redis.Scripter
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Limiter checks limits in Redis; safe for concurrent use, and shared by
// every Limiter on the same Redis and prefix.
type Limiter struct {
	lim    *redis_rate.Limiter
	prefix string
}

// New returns a limiter whose keys are prefix + "rate:" + key (redis_rate
// adds "rate:"); prefix "" means none.
func New(rdb Redis, prefix string) *Limiter {
	return &Limiter{lim: redis_rate.NewLimiter(rdb), prefix: prefix}
}

// Decision is the outcome of a check.
type Decision struct {
	Allowed bool
	// RetryAfter is, when not Allowed, how long until a request would be.
	RetryAfter time.Duration
	// Remaining is how many more requests would be allowed right now.
	Remaining int
}

// Allow takes one request of key's budget under lim. An error means Redis
// did not answer (the caller's fallback decides).
func (l *Limiter) Allow(ctx context.Context, key string, lim Limit) (Decision, error) {
	if !(lim.Rate > 0) || math.IsInf(lim.Rate, 0) || lim.Burst < 0 {
		return Decision{}, fmt.Errorf("ratelimit: bad limit %+v", lim)
	}
	burst := cmp.Or(lim.Burst, max(1, int(math.Ceil(lim.Rate))))
	// One request per period: the period is the emission interval.
	period := time.Duration(float64(time.Second) / lim.Rate)
	if period <= 0 {
		return Decision{}, errors.New("ratelimit: rate too high")
	}
	res, err := l.lim.Allow(ctx, l.prefix+key, redis_rate.Limit{Rate: 1, Burst: burst, Period: period})
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: %w", err)
	}
	d := Decision{Allowed: res.Allowed > 0, Remaining: res.Remaining}
	if !d.Allowed {
		d.RetryAfter = max(res.RetryAfter, 0)
	}
	return d, nil
}
