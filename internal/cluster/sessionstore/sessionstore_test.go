package sessionstore

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

func TestPutGetTouchDelete(t *testing.T) {
	r := clustertest.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	s := New(rdb, "sb:", time.Minute)
	if _, ok, err := s.Get(ctx, "s1"); ok || err != nil {
		t.Fatalf("Get of nothing: %v, %v", ok, err)
	}
	want := Record{Owner: "r1", LogLevel: "debug", Subscriptions: []string{"file:///a", "file:///b"}, UpstreamSession: "up-123"}
	if err := s.Put(ctx, "s1", want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := New(r.Client(t), "sb:", time.Minute).Get(ctx, "s1") // another replica reads it
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Get = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	// A later Put replaces the whole record.
	if err := s.Put(ctx, "s1", Record{Owner: "r1"}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Get(ctx, "s1"); !reflect.DeepEqual(got, Record{Owner: "r1"}) {
		t.Errorf("after a second Put: %+v", got)
	}
	if ttl, _ := rdb.PTTL(ctx, "sb:{s1}:rec").Result(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("TTL %v, want (0, 1m]", ttl)
	}
	rdb.PExpire(ctx, "sb:{s1}:rec", time.Second)
	if ok, err := s.Touch(ctx, "s1"); !ok || err != nil {
		t.Errorf("Touch: %v, %v", ok, err)
	}
	if ttl, _ := rdb.PTTL(ctx, "sb:{s1}:rec").Result(); ttl <= time.Second {
		t.Errorf("Touch left the TTL at %v", ttl)
	}
	if err := s.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Touch(ctx, "s1"); ok {
		t.Error("Touch of a deleted record reported one")
	}
	for _, bad := range []string{"", "a{b"} {
		if err := s.Put(ctx, bad, Record{}); err == nil {
			t.Errorf("Put(%q) accepted", bad)
		}
	}
}

// TestClaimOnce: when r1 dies, r2 and r3 (several goroutines each) claim
// its session at once: exactly one claim succeeds, the record keeps its
// state, and a live owner's session cannot be claimed.
func TestClaimOnce(t *testing.T) {
	r := clustertest.StartRedis(t)
	ctx := context.Background()
	s := New(r.Client(t), "", time.Minute)
	if err := s.Put(ctx, "s", Record{Owner: "r1", LogLevel: "info"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	won := map[string]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		self := []string{"r2", "r3"}[i%2]
		store := New(r.Client(t), "", time.Minute)
		wg.Go(func() {
			err := store.Claim(ctx, "s", "r1", self)
			switch {
			case err == nil:
				mu.Lock()
				won[self]++
				mu.Unlock()
			case !errors.Is(err, ErrOwned):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// The winner's own repeated claims succeed too (idempotent), so count
	// replicas, not calls: one replica won, the other never did.
	if len(won) != 1 {
		t.Fatalf("claims won by %v, want exactly one replica", won)
	}
	got, _, _ := s.Get(ctx, "s")
	if _, ok := won[got.Owner]; !ok || got.LogLevel != "info" {
		t.Errorf("record after the claims: %+v (winners %v)", got, won)
	}
	// The new owner is alive: a claim naming r1 dead fails and names it.
	loser := map[string]string{"r2": "r3", "r3": "r2"}[got.Owner]
	if err := s.Claim(ctx, "s", "r1", loser); !errors.Is(err, ErrOwned) || !strings.Contains(err.Error(), got.Owner) {
		t.Errorf("claiming a live owner's session: %v", err)
	}
	// The old owner, back from a pause, can no longer write the record.
	if err := s.Put(ctx, "s", Record{Owner: "r1", LogLevel: "debug"}); !errors.Is(err, ErrOwned) {
		t.Errorf("the old owner's Put after the claim: %v, want ErrOwned", err)
	}
	if got, _, _ := s.Get(ctx, "s"); got.LogLevel != "info" {
		t.Errorf("the old owner's Put changed the record: %+v", got)
	}
	// A session without a record (never written) is claimed and gets one.
	if err := s.Claim(ctx, "fresh", "r1", "r2"); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := s.Get(ctx, "fresh"); !ok || got.Owner != "r2" {
		t.Errorf("fresh session after a claim: %+v, %v", got, ok)
	}
}
