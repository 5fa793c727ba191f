package cluster

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

func TestStatic(t *testing.T) {
	s := Static{{ID: "r2", Addr: "10.0.0.2:7946"}, {ID: "r1", Addr: "10.0.0.1:7946"}}
	got, err := s.Members(context.Background())
	want := []Replica{{ID: "r1", Addr: "10.0.0.1:7946"}, {ID: "r2", Addr: "10.0.0.2:7946"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Members = %v, %v; want %v", got, err, want)
	}
	if got, _ := (Static{}).Members(context.Background()); len(got) != 0 {
		t.Errorf("zero Static has members %v", got)
	}
	var _ Members = s
	var _ Members = (*Heartbeat)(nil)
}

// TestHeartbeats: replicas beating into one Redis see each other; one
// that stops (its context ends) leaves at once; one that dies leaves when
// its key expires; every key carries a TTL.
func TestHeartbeats(t *testing.T) {
	r := clustertest.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	hb := func(id string) *Heartbeat {
		h, err := NewHeartbeat(r.Client(t), HeartbeatOptions{Prefix: "sb:", Self: Replica{ID: id, Addr: id + ":7946"}, TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	r1, r2, r3 := hb("r1"), hb("r2"), hb("r3")

	// r1 runs its loop; r2 and r3 beat by hand.
	beaten := make(chan struct{})
	r1.beaten = beaten
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan struct{})
	var errs []error
	go func() {
		defer close(ended)
		r1.Run(runCtx, func(err error) { errs = append(errs, err) })
	}()
	<-beaten
	for _, h := range []*Heartbeat{r2, r3} {
		if err := h.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []Replica{{"r1", "r1:7946"}, {"r2", "r2:7946"}, {"r3", "r3:7946"}}
	if got, err := r2.Members(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Members = %v, %v; want %v", got, err, want)
	}
	for _, k := range []string{"sb:{members}:r1", "sb:{members}:r2", "sb:{members}"} {
		if ttl, _ := rdb.PTTL(ctx, k).Result(); ttl <= 0 || ttl > 6*time.Second {
			t.Errorf("%s: TTL %v", k, ttl)
		}
	}

	// r1 stops: it leaves at once.
	stop()
	go func() { // drain a beat that raced the stop
		for range beaten {
		}
	}()
	<-ended
	close(beaten)
	if len(errs) != 0 {
		t.Errorf("beat errors: %v", errs)
	}
	// r3 dies: its key expires (done here as Redis would).
	if err := rdb.Del(ctx, "sb:{members}:r3").Err(); err != nil {
		t.Fatal(err)
	}
	want = []Replica{{"r2", "r2:7946"}}
	if got, err := r3.Members(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Members = %v, %v; want %v", got, err, want)
	}
	if ids, _ := rdb.SMembers(ctx, "sb:{members}").Result(); !reflect.DeepEqual(ids, []string{"r2"}) {
		t.Errorf("index holds %v after the dead were read, want [r2]", ids)
	}
	// A late beat of r3 brings it back.
	if err := r3.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := r2.Members(ctx); len(got) != 2 {
		t.Errorf("after r3's beat: %v", got)
	}
}

func TestHeartbeatOptions(t *testing.T) {
	for _, o := range []HeartbeatOptions{
		{},
		{Self: Replica{ID: "a{b}"}},
		{Self: Replica{ID: "a"}, TTL: time.Millisecond},
	} {
		if _, err := NewHeartbeat(nil, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	h, err := NewHeartbeat(nil, HeartbeatOptions{Self: Replica{ID: "a"}})
	if err != nil || h.ttl != 15*time.Second {
		t.Errorf("zero TTL: %v, %v; want 15s", h, err)
	}
}

// TestHeartbeatRedisDown: with Redis gone, Beat and Members fail.
func TestHeartbeatRedisDown(t *testing.T) {
	r := clustertest.StartRedis(t)
	// No retries: the errors come at once, not after go-redis' backoff.
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	h, _ := NewHeartbeat(rdb, HeartbeatOptions{Self: Replica{ID: "a"}})
	r.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Beat(ctx); err == nil {
		t.Error("Beat without Redis succeeded")
	}
	if _, err := h.Members(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Members without Redis: %v", err)
	}
}
