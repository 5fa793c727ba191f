package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

// replicas returns n limiters, each with its own client, as n replicas
// sharing one Redis have.
func replicas(t testing.TB, r *clustertest.Redis, n int) []*Limiter {
	var out []*Limiter
	for range n {
		out = append(out, New(r.Client(t), "sb:"))
	}
	return out
}

// TestBurstSharedExactly: with a rate so low that nothing refills during
// the test, three replicas together admit exactly the burst, whoever asks.
func TestBurstSharedExactly(t *testing.T) {
	r := clustertest.StartRedis(t)
	lims := replicas(t, r, 3)
	ctx := context.Background()
	lim := Limit{Rate: 0.001, Burst: 7}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, l := range lims {
		wg.Go(func() {
			for range 10 {
				d, err := l.Allow(ctx, "alice", lim)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else if d.RetryAfter < 900*time.Second {
					t.Errorf("denied with RetryAfter %v, want about 1000 s", d.RetryAfter)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 7 {
		t.Errorf("3 replicas admitted %d of 30 requests, want the burst of 7", got)
	}
	// Another client's budget is its own.
	if d, err := lims[0].Allow(ctx, "bob", lim); err != nil || !d.Allowed {
		t.Errorf("bob: %+v, %v", d, err)
	}
	// Keys are prefixed and expire.
	keys, _ := r.Client(t).Keys(ctx, "*").Result()
	for _, k := range keys {
		if k != "rate:sb:alice" && k != "rate:sb:bob" {
			t.Errorf("unexpected key %q", k)
		}
		if ttl, _ := r.Client(t).TTL(ctx, k).Result(); ttl <= 0 {
			t.Errorf("key %q has no TTL (%v)", k, ttl)
		}
	}
}

// TestRateAcrossReplicas: three replicas calling as fast as they can for
// one client admit, together, the configured rate within 10%. The time is
// taken from the first admission to the last (the connections are made
// before), and the burst is large enough (half a second) that a loaded
// machine pausing the callers for less than that loses no admission.
func TestRateAcrossReplicas(t *testing.T) {
	r := clustertest.StartRedis(t)
	lims := replicas(t, r, 3)
	ctx := context.Background()
	const rate, burst, want = 50.0, 25, 100 // 75 after the burst: 1.5 s
	lim := Limit{Rate: rate, Burst: burst}
	for _, l := range lims {
		if _, err := l.Allow(ctx, "warm-up", lim); err != nil { // dials
			t.Fatal(err)
		}
	}
	var allowed, calls, first, last atomic.Int64
	epoch := time.Now()
	var wg sync.WaitGroup
	for _, l := range lims {
		wg.Go(func() {
			for allowed.Load() < want {
				sent := int64(time.Since(epoch))
				d, err := l.Allow(ctx, "alice", lim)
				if err != nil {
					t.Error(err)
					return
				}
				calls.Add(1)
				if !d.Allowed {
					continue
				}
				switch allowed.Add(1) {
				case 1:
					first.Store(sent)
				case want:
					last.Store(int64(time.Since(epoch)))
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Duration(last.Load() - first.Load())
	// GCRA admits the burst at once, then one per 1/rate.
	observed := float64(want-burst) / elapsed.Seconds()
	t.Logf("%d admitted of %d calls in %v: %.1f/s after the burst (limit %.0f/s)", want, calls.Load(), elapsed, observed, rate)
	if observed > rate*1.1 || observed < rate*0.9 {
		t.Errorf("3 replicas admitted %.1f requests/s, want %.0f ± 10%%", observed, rate)
	}
}

func TestBadLimit(t *testing.T) {
	l := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), "")
	for _, lim := range []Limit{{}, {Rate: -1}, {Rate: 1, Burst: -1}} {
		if _, err := l.Allow(context.Background(), "k", lim); err == nil {
			t.Errorf("%+v accepted", lim)
		}
	}
}

// TestRedisDownIsAnError: without Redis, Allow says so (the caller falls
// back to its own limiter) instead of deciding.
func TestRedisDownIsAnError(t *testing.T) {
	r := clustertest.StartRedis(t)
	// No retries: the error comes at once, not after go-redis' backoff.
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	l := New(rdb, "")
	r.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d, err := l.Allow(ctx, "k", Limit{Rate: 1}); err == nil {
		t.Errorf("Redis gone: %+v, want an error", d)
	}
}

func BenchmarkAllow(b *testing.B) {
	r := clustertest.StartRedis(b)
	l := New(r.Client(b), "")
	ctx := context.Background()
	for b.Loop() {
		if _, err := l.Allow(ctx, "k", Limit{Rate: 1e6}); err != nil {
			b.Fatal(err)
		}
	}
}
