package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// FuzzValidateToken: any bearer value goes through the JWT checks without
// a panic, and only the one token signed by the key set's key is accepted:
// a mutation of it never is (a fuzzer cannot forge a signature).
func FuzzValidateToken(f *testing.F) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
	good, _ := jwt.Signed(signer).Claims(map[string]any{"iss": "https://iss", "aud": "https://rs", "sub": "u",
		"exp": now.Add(time.Hour).Unix(), "scope": "a b", "groups": []string{"g"}}).Serialize()
	v := &jwtValidator{issuer: "https://iss", algs: []jose.SignatureAlgorithm{jose.ES256, jose.RS256}, leeway: time.Second,
		groupsClaim: "groups", now: func() time.Time { return now },
		keys: &keySet{ttl: time.Hour, minRefresh: time.Hour, now: func() time.Time { return now }, fetched: now, tried: now,
			set: &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: "ES256"}}}}}
	if sub, scopes, groups, err := v.validate(context.Background(), good, []string{"https://rs"}); err != nil || sub != "u" || len(scopes) != 2 || len(groups) != 1 {
		f.Fatalf("the good token: %q %v %v %v", sub, scopes, groups, err)
	}
	parts := strings.Split(good, ".")
	for _, s := range []string{good, parts[0] + "." + parts[1] + ".", "e30.e30.", "a.b.c", "..", parts[0] + ".e30." + parts[2],
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "eyJhbGciOiJIUzI1NiIsImtpZCI6ImsifQ.e30.AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		sub, _, _, err := v.validate(context.Background(), tok, []string{"https://rs"})
		if err == nil && tok != good {
			t.Fatalf("accepted %q (sub %q)", tok, sub)
		}
		if err != nil {
			if _, ok := err.(*tokenError); !ok {
				t.Fatalf("error %T %v is not a token error", err, err)
			}
			if tok != "" && len(tok) > 20 && strings.Contains(err.Error(), tok) {
				t.Fatalf("the error repeats the token")
			}
		}
	})
}
