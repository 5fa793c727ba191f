package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwtValidator checks OAuth access tokens that are signed JWTs (RFC 9068
// shape): signature by a key of the issuer's JWKS, an allowed algorithm,
// iss, aud, exp (required), nbf and iat.
type jwtValidator struct {
	issuer      string
	audiences   []string // fixed audiences; empty: the resource of the request
	algs        []jose.SignatureAlgorithm
	leeway      time.Duration
	groupsClaim string
	keys        *keySet
	now         func() time.Time

	mu   sync.Mutex
	seen map[[sha256.Size]byte]*verified // by the token's SHA-256
}

// tokenError is a token that is not valid, with a description safe to
// show the client (it never contains the token).
type tokenError struct{ desc string }

func (e *tokenError) Error() string { return e.desc }

func invalid(format string, args ...any) error {
	return &tokenError{desc: fmt.Sprintf(format, args...)}
}

// verified is a token whose signature verified, and what the gateway
// reads of it.
type verified struct {
	std            jwt.Claims
	kid, alg       string
	scopes, groups []string
}

// maxVerified bounds the cache of verified tokens; at the bound it starts
// over.
const maxVerified = 4096

// validate returns the subject, scopes and groups of a valid token;
// resources are the audiences accepted when no fixed one is set.
//
// A token seen before skips parsing and the signature check (tens of
// microseconds for ES256 or RS256) while its key is still in the current
// key set; its claims are checked again each time.
func (v *jwtValidator) validate(ctx context.Context, raw string, resources []string) (sub string, scopes, groups []string, err error) {
	sum := sha256.Sum256([]byte(raw))
	v.mu.Lock()
	e := v.seen[sum]
	v.mu.Unlock()
	if e == nil || !v.keys.has(e.kid, e.alg) {
		if e, err = v.verify(ctx, raw); err != nil {
			return "", nil, nil, err
		}
		defer func() {
			if err == nil {
				v.mu.Lock()
				if len(v.seen) >= maxVerified || v.seen == nil {
					v.seen = make(map[[sha256.Size]byte]*verified)
				}
				v.seen[sum] = e
				v.mu.Unlock()
			}
		}()
	}
	if err := v.checkClaims(&e.std, resources); err != nil {
		return "", nil, nil, err
	}
	return e.std.Subject, e.scopes, e.groups, nil
}

// verify parses raw and checks its algorithm and signature.
func (v *jwtValidator) verify(ctx context.Context, raw string) (*verified, error) {
	tok, err := jwt.ParseSigned(raw, v.algs)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "unexpected signature algorithm") {
			// go-jose names the algorithm it refused ("none", HS256, …);
			// nothing else of the token goes into a message.
			if len(msg) > 200 {
				msg = msg[:200]
			}
			return nil, invalid("algorithm not accepted: %s", strings.TrimPrefix(msg, "go-jose/go-jose: "))
		}
		return nil, invalid("malformed token")
	}
	if len(tok.Headers) != 1 {
		return nil, invalid("want exactly one signature")
	}
	h := tok.Headers[0]
	key, err := v.keys.key(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return nil, err
	}
	e := &verified{kid: h.KeyID, alg: h.Algorithm}
	var extra map[string]json.RawMessage
	if err := tok.Claims(key, &e.std, &extra); err != nil {
		return nil, invalid("signature does not verify")
	}
	if e.std.Expiry == nil {
		return nil, invalid("the token has no exp claim")
	}
	if b, ok := extra["scope"]; ok { // RFC 9068: space-separated
		var scope string
		if json.Unmarshal(b, &scope) != nil {
			return nil, invalid("the scope claim is not a string")
		}
		e.scopes = strings.Fields(scope)
	}
	if b, ok := extra["scp"]; ok && e.scopes == nil { // a common alternative: a list, or a string
		if json.Unmarshal(b, &e.scopes) != nil {
			var one string
			if json.Unmarshal(b, &one) != nil {
				return nil, invalid("the scp claim is neither a string nor a list of strings")
			}
			e.scopes = strings.Fields(one)
		}
	}
	if b, ok := extra[v.groupsClaim]; ok {
		var one string
		if json.Unmarshal(b, &e.groups) != nil {
			if json.Unmarshal(b, &one) != nil {
				return nil, invalid("the %s claim is neither a string nor a list of strings", v.groupsClaim)
			}
			e.groups = []string{one}
		}
	}
	return e, nil
}

// checkClaims checks iss, aud, exp, nbf and iat at the current time.
func (v *jwtValidator) checkClaims(std *jwt.Claims, resources []string) error {
	auds := v.audiences
	if len(auds) == 0 {
		auds = resources
	}
	err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: auds, Time: v.now()}, v.leeway)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwt.ErrExpired):
		return invalid("the token has expired")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return invalid("the token's audience is not this resource (%s)", strings.Join(auds, " or "))
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return invalid("the token's issuer is not %s", v.issuer)
	case errors.Is(err, jwt.ErrNotValidYet):
		return invalid("the token is not valid yet")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return invalid("the token was issued in the future")
	}
	return invalid("invalid claims: %v", err)
}

// keySet is the issuer's JSON Web Key Set, fetched on first use, used for
// ttl, and fetched again early when a token names a key id it lacks (keys
// rotated), at most once per minRefresh.
type keySet struct {
	url        string
	client     *http.Client
	ttl        time.Duration
	minRefresh time.Duration
	now        func() time.Time

	mu      sync.Mutex // held across a fetch: concurrent misses share it
	set     *jose.JSONWebKeySet
	fetched time.Time // of set
	tried   time.Time // last fetch attempt, successful or not
	fetches int       // attempts (tests)
}

// maxJWKSBytes bounds the key set document.
const maxJWKSBytes = 1 << 20

// key returns the public key for kid (any signing key matching alg when
// kid is empty and the set has exactly one such key).
func (k *keySet) key(ctx context.Context, kid, alg string) (*jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	switch {
	case k.set == nil && !k.tried.IsZero() && now.Sub(k.tried) < k.minRefresh:
		return nil, &fetchError{err: errors.New("the last attempt failed; retrying later")}
	case k.set == nil || now.Sub(k.fetched) >= k.ttl:
		if err := k.fetchLocked(ctx, now); err != nil && k.set == nil {
			return nil, err
		}
	}
	if key := k.find(kid, alg); key != nil {
		return key, nil
	}
	if now.Sub(k.tried) >= k.minRefresh {
		// An unknown key id: the issuer may have rotated its keys.
		if err := k.fetchLocked(ctx, now); err != nil {
			return nil, err
		}
		if key := k.find(kid, alg); key != nil {
			return key, nil
		}
	}
	if kid == "" {
		return nil, invalid("the token names no key id and the issuer's key set has no single %s key", alg)
	}
	return nil, invalid("no key %q in the issuer's key set", kid)
}

// has reports whether the current key set, not yet due for a refetch,
// holds the key a token named (without fetching anything).
func (k *keySet) has(kid, alg string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.set != nil && k.now().Sub(k.fetched) < k.ttl && k.find(kid, alg) != nil
}

func (k *keySet) find(kid, alg string) *jose.JSONWebKey {
	if k.set == nil {
		return nil
	}
	usable := func(j *jose.JSONWebKey) bool {
		// Public keys only: a symmetric ("oct") key in the set is never
		// used, so a token cannot be signed with a public key as an HMAC
		// secret; a private key is used for its public half.
		if !j.Valid() || isSymmetric(j) {
			return false
		}
		return (j.Use == "" || j.Use == "sig") && (j.Algorithm == "" || j.Algorithm == alg)
	}
	var match *jose.JSONWebKey
	for i := range k.set.Keys {
		j := &k.set.Keys[i]
		if !usable(j) {
			continue
		}
		if kid != "" {
			if j.KeyID == kid {
				pub := j.Public()
				return &pub
			}
			continue
		}
		if match != nil {
			return nil // ambiguous
		}
		match = j
	}
	if match != nil {
		pub := match.Public()
		return &pub
	}
	return nil
}

func isSymmetric(j *jose.JSONWebKey) bool {
	_, ok := j.Key.([]byte)
	return ok
}

// fetchLocked fetches the key set. A failure keeps the old set.
func (k *keySet) fetchLocked(ctx context.Context, now time.Time) error {
	k.tried = now
	k.fetches++
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return &fetchError{err: err}
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return &fetchError{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &fetchError{err: fmt.Errorf("%s answered %s", k.url, resp.Status)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return &fetchError{err: err}
	}
	if len(b) > maxJWKSBytes {
		return &fetchError{err: fmt.Errorf("%s: key set larger than %d bytes", k.url, maxJWKSBytes)}
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return &fetchError{err: fmt.Errorf("%s: %v", k.url, err)}
	}
	set.Keys = slices.DeleteFunc(set.Keys, func(j jose.JSONWebKey) bool { return isSymmetric(&j) })
	k.set, k.fetched = &set, now
	return nil
}

// fetchError is a key set that could not be fetched: the gateway's
// problem, not the token's (503, logged).
type fetchError struct{ err error }

func (e *fetchError) Error() string { return "fetching the issuer's key set: " + e.err.Error() }
