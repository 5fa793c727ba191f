package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// TestKeySetRefresh: keys are fetched once, kept for the TTL, and fetched
// again for an unknown key id at most once per minRefresh however many
// tokens name made-up kids; a symmetric key in the set is never used.
func TestKeySetRefresh(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &k.PublicKey, KeyID: "ec", Algorithm: "ES256"},
			{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "oct", Algorithm: "HS256"},
		}})
	}))
	defer srv.Close()
	now := time.Unix(1_000_000, 0)
	ks := &keySet{url: srv.URL, client: srv.Client(), ttl: time.Hour, minRefresh: 10 * time.Second, now: func() time.Time { return now }}
	ctx := context.Background()
	if _, err := ks.key(ctx, "ec", "ES256"); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.key(ctx, "ec", "ES256"); err != nil || fetches.Load() != 1 {
		t.Fatalf("second lookup: %v, %d fetches, want 1", err, fetches.Load())
	}
	if _, err := ks.key(ctx, "oct", "HS256"); err == nil {
		t.Errorf("a symmetric key was usable")
	}
	now = now.Add(11 * time.Second)
	for range 50 {
		if _, err := ks.key(ctx, "made-up", "ES256"); err == nil {
			t.Fatal("unknown kid found")
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d fetches after a flood of unknown kids, want 2", n)
	}
	now = now.Add(11 * time.Second)
	_, _ = ks.key(ctx, "made-up", "ES256")
	if n := fetches.Load(); n != 3 {
		t.Errorf("%d fetches once minRefresh passed, want 3", n)
	}
	now = now.Add(2 * time.Hour)
	if _, err := ks.key(ctx, "ec", "ES256"); err != nil || fetches.Load() != 4 {
		t.Errorf("after the TTL: %v, %d fetches, want 4", err, fetches.Load())
	}
	if key, _ := ks.key(ctx, "", "ES256"); key == nil {
		t.Errorf("no kid with one ES256 key: not found")
	}
}

// TestKeySetUnavailable: an issuer that cannot be reached is a fetch
// error (503), retried at most once per minRefresh.
func TestKeySetUnavailable(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	now := time.Unix(1_000_000, 0)
	ks := &keySet{url: srv.URL, client: srv.Client(), ttl: time.Hour, minRefresh: 10 * time.Second, now: func() time.Time { return now }}
	for range 5 {
		_, err := ks.key(context.Background(), "a", "RS256")
		if _, ok := err.(*fetchError); !ok {
			t.Fatalf("err = %v, want a fetchError", err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}
