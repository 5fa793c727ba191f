package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
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

// TestVerifiedCache: a token seen before is not verified again, but its
// claims are checked each time, and it stops working once its key is
// gone from the key set.
func TestVerifiedCache(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var served atomic.Bool // the key is in the set
	served.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := jose.JSONWebKeySet{}
		if served.Load() {
			set.Keys = []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "ec", Algorithm: "ES256"}}
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	defer srv.Close()
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	v := &jwtValidator{issuer: "https://iss", algs: []jose.SignatureAlgorithm{jose.ES256}, leeway: 0, groupsClaim: "groups", now: clock,
		keys: &keySet{url: srv.URL, client: srv.Client(), ttl: time.Minute, minRefresh: time.Second, now: clock}}
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "ec"))
	tok, _ := jwt.Signed(signer).Claims(map[string]any{"iss": "https://iss", "aud": "https://rs", "sub": "u", "exp": now.Add(10 * time.Minute).Unix()}).Serialize()
	ctx := context.Background()
	for range 3 {
		if _, _, _, err := v.validate(ctx, tok, []string{"https://rs"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(v.seen) != 1 {
		t.Errorf("%d cached tokens, want 1", len(v.seen))
	}
	if _, _, _, err := v.validate(ctx, tok, []string{"https://other"}); err == nil {
		t.Error("a cached token passed for another audience")
	}
	// The key leaves the set: after the next fetch the token fails.
	served.Store(false)
	now = now.Add(2 * time.Minute)
	if _, _, _, err := v.validate(ctx, tok, []string{"https://rs"}); err == nil {
		t.Error("a cached token passed after its key left the set")
	}
	served.Store(true)
	now = now.Add(2 * time.Minute)
	if _, _, _, err := v.validate(ctx, tok, []string{"https://rs"}); err != nil {
		t.Errorf("key back: %v", err)
	}
	now = now.Add(10 * time.Minute)
	if _, _, _, err := v.validate(ctx, tok, []string{"https://rs"}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a cached token past exp: %v", err)
	}
}
