package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The cost of authenticating one request: a static token among 10
// clients (every digest compared), and an ES256 JWT with its key cached.
func BenchmarkAuthenticate(b *testing.B) {
	var clients []ClientSpec
	for i := range 10 {
		name := "c" + string(rune('0'+i))
		sum := sha256.Sum256([]byte("token-" + name))
		clients = append(clients, ClientSpec{Name: name, Tokens: []string{"sha256:" + hex.EncodeToString(sum[:])}, Subjects: []string{"user-*"}})
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	a := New(Options{Required: true, Realm: "r", Resource: "https://rs", Clients: clients,
		OAuth: &OAuth{Issuer: "https://iss", JWKSURL: "https://iss/jwks", Algorithms: []string{"ES256"}, GroupsClaim: "groups",
			Leeway: time.Second, JWKSCacheTTL: time.Hour, JWKSMinRefresh: time.Hour}})
	a.jwt.keys.set = &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: "ES256"}}}
	a.jwt.keys.fetched, a.jwt.keys.tried = now, now
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
	tok, _ := jwt.Signed(signer).Claims(map[string]any{"iss": "https://iss", "aud": "https://rs", "sub": "user-1",
		"exp": now.Add(time.Hour).Unix(), "scope": "mcp"}).Serialize()
	for _, c := range []struct{ name, token string }{{"static", "token-c9"}, {"jwt-es256", tok}} {
		b.Run(c.name, func(b *testing.B) {
			r, _ := http.NewRequestWithContext(context.Background(), "POST", "http://x/mcp", nil)
			r.Header.Set("Authorization", "Bearer "+c.token)
			b.ReportAllocs()
			for b.Loop() {
				if id, f := a.Authenticate(r, "/mcp"); f != nil || id.Client == nil {
					b.Fatalf("%+v %+v", id, f)
				}
			}
		})
	}
}
