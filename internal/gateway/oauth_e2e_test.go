package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// issuer is a local OAuth authorization server's key side: it serves its
// JWKS on 127.0.0.1 and signs access tokens; rotate replaces its key.
type issuer struct {
	t       *testing.T
	url     string
	mu      sync.Mutex
	kid     string
	key     *rsa.PrivateKey
	fetches atomic.Int32
	codes   sync.Map // authorization code -> grant (oauth_client_e2e_test.go)
	tokens  atomic.Int32
}

func startIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{t: t}
	is.rotate("k1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	is.routeAuthorizationServer(mux) // oauth_client_e2e_test.go
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: "RS256", Use: "sig"}}}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(set)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	is.url = "http://" + ln.Addr().String()
	return is
}

// rotate replaces the signing key (and the JWKS) with a new one.
func (is *issuer) rotate(kid string) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		is.t.Fatal(err)
	}
	is.mu.Lock()
	is.kid, is.key = kid, k
	is.mu.Unlock()
}

// claimsFor are claims valid for resource now.
func (is *issuer) claimsFor(sub, aud string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": is.url, "sub": sub, "aud": aud, "exp": now.Add(time.Hour).Unix(),
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "scope": "mcp", "groups": []string{"staff"}}
}

// sign signs claims with the issuer's current key (or with key/kid given).
func (is *issuer) sign(claims map[string]any) string {
	is.mu.Lock()
	key, kid := is.key, is.kid
	is.mu.Unlock()
	return signWith(is.t, jose.RS256, key, kid, claims)
}

func signWith(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsigned is an "alg: none" token.
func unsigned(kid string, claims map[string]any) string {
	enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	return enc(map[string]any{"alg": "none", "typ": "at+jwt", "kid": kid}) + "." + enc(claims) + "."
}

const gwResource = "https://gw.test"

func oauthTop(is *issuer) string {
	return `max_sessions: 50
timeout: 20s
auth:
  resource: ` + gwResource + `
  oauth:
    issuer: ` + is.url + `
    jwks_url: ` + is.url + `/jwks
    required_scopes: [mcp]
    jwks_min_refresh: 0s
clients:
  staff:
    groups: [staff]
    destinations: [alpha]
  robot:
    subjects: ["robot-*"]
    destinations: [beta]
`
}

func TestOAuthResourceServer(t *testing.T) {
	is := startIssuer(t)
	h := startAgg(t, oauthTop(is), "", aggDest("alpha", "a1"), aggDest("beta", "b1"))
	init := rpc(0, "initialize", initParams(""))
	try := func(tok, path string) *resp {
		t.Helper()
		return h.do("POST", path, init, bearer(tok)...)
	}
	aud := gwResource + "/alpha/mcp"
	good := is.sign(is.claimsFor("user-1", aud))
	if r := try(good, "/alpha/mcp"); r.status != http.StatusOK {
		t.Fatalf("good token: %s", r)
	}
	if r := try(is.sign(is.claimsFor("user-1", gwResource)), "/alpha/mcp"); r.status != http.StatusOK {
		t.Errorf("token for the whole gateway: %s", r)
	}
	robot := is.claimsFor("robot-7", gwResource+"/beta/mcp")
	robot["groups"] = nil
	if r := try(is.sign(robot), "/beta/mcp"); r.status != http.StatusOK {
		t.Errorf("robot subject on beta: %s", r)
	}
	// A good token outside its client's scope: 403.
	if r := try(is.sign(is.claimsFor("user-1", gwResource)), "/beta/mcp"); r.status != http.StatusForbidden {
		t.Errorf("staff on beta: %d, want 403", r.status)
	}

	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mod := func(f func(c map[string]any)) map[string]any {
		c := is.claimsFor("user-1", aud)
		f(c)
		return c
	}
	is.mu.Lock()
	pubBytes := is.key.PublicKey.N.Bytes()
	is.mu.Unlock()
	bad := []struct {
		name, tok, want string
	}{
		{"wrong audience", is.sign(is.claimsFor("user-1", "https://other.example.com/mcp")), "audience"},
		{"audience of another endpoint", is.sign(is.claimsFor("user-1", gwResource+"/beta/mcp")), "audience"},
		{"expired", is.sign(mod(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), "expired"},
		{"not yet valid", is.sign(mod(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), "not valid yet"},
		{"no exp", is.sign(mod(func(c map[string]any) { delete(c, "exp") })), "no exp"},
		{"wrong issuer", is.sign(mod(func(c map[string]any) { c["iss"] = "https://evil.example.com" })), "issuer"},
		{"bad signature", signWith(t, jose.RS256, otherKey, "k1", is.claimsFor("user-1", aud)), "signature"},
		{"tampered payload", tamper(good), "signature"},
		{"alg none", unsigned("k1", is.claimsFor("user-1", aud)), "none"},
		{"HMAC with the public key", signWith(t, jose.HS256, pubBytes, "k1", is.claimsFor("user-1", aud)), "HS256"},
		{"unknown key id", signWith(t, jose.ES256, ecKey, "k9", is.claimsFor("user-1", aud)), "no key"},
	}
	for _, b := range bad {
		r := try(b.tok, "/alpha/mcp")
		wa := r.header.Get("WWW-Authenticate")
		if r.status != http.StatusUnauthorized || !strings.Contains(wa, `error="invalid_token"`) || !strings.Contains(wa, b.want) {
			t.Errorf("%s: %d, WWW-Authenticate %q; want 401 invalid_token mentioning %q", b.name, r.status, wa, b.want)
		}
	}
	// A token without the required scope: 403 insufficient_scope.
	if r := try(is.sign(mod(func(c map[string]any) { c["scope"] = "other" })), "/alpha/mcp"); r.status != http.StatusForbidden ||
		!strings.Contains(r.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Errorf("missing scope: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}

	// Keys rotated mid-test: a token of the new key is accepted (the
	// unknown kid refetches the JWKS); one of the old key is not any more.
	is.rotate("k2")
	before := is.fetches.Load()
	if r := try(is.sign(is.claimsFor("user-1", aud)), "/alpha/mcp"); r.status != http.StatusOK {
		t.Errorf("token of the rotated key: %s", r)
	}
	if is.fetches.Load() == before {
		t.Errorf("the JWKS was not fetched again after the rotation")
	}
	if r := try(good, "/alpha/mcp"); r.status != http.StatusUnauthorized {
		t.Errorf("token of the retired key: %d, want 401", r.status)
	}

	// The challenge points at the RFC 9728 metadata, which validates.
	r := h.do("POST", "/alpha/mcp", init)
	chs, err := oauthex.ParseWWWAuthenticate(r.header.Values("WWW-Authenticate"))
	if err != nil || len(chs) != 1 || chs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %v %+v", r.header.Get("WWW-Authenticate"), err, chs)
	}
	mdURL := chs[0].Params["resource_metadata"]
	if mdURL != gwResource+"/.well-known/oauth-protected-resource/alpha/mcp" {
		t.Errorf("resource_metadata = %q", mdURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	hc := &http.Client{Transport: rewriteRT{base: h.base}}
	md, err := oauthex.GetProtectedResourceMetadata(ctx, mdURL, gwResource+"/alpha/mcp", hc)
	if err != nil {
		t.Fatalf("metadata does not validate: %v", err)
	}
	if len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != is.url || len(md.BearerMethodsSupported) != 1 {
		t.Errorf("metadata = %+v", md)
	}
	if _, err := oauthex.GetProtectedResourceMetadata(ctx, gwResource+"/.well-known/oauth-protected-resource", gwResource, hc); err != nil {
		t.Errorf("root metadata: %v", err)
	}

	// A go-sdk client with the token calls its tool; the token never
	// reaches a log.
	th := &http.Client{Transport: headerRT{hdr: http.Header{"Authorization": {"Bearer " + good}}, next: http.DefaultTransport}}
	good = is.sign(is.claimsFor("user-1", aud))
	th.Transport = headerRT{hdr: http.Header{"Authorization": {"Bearer " + good}}, next: http.DefaultTransport}
	cs, err := newInteropClient().Client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url("/alpha/mcp"), HTTPClient: th, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a1", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("call with an OAuth token: %v %+v", err, res)
	}
	secrets := []string{good}
	for _, b := range bad {
		secrets = append(secrets, b.tok)
	}
	assertNoTokens(t, h, secrets...)
}

// tamper changes the payload of a signed token, keeping its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	c["sub"] = "admin"
	nb, _ := json.Marshal(c)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(nb) + "." + parts[2]
}

// rewriteRT sends every request to base, whatever its URL's host.
type rewriteRT struct{ base string }

func (rt rewriteRT) RoundTrip(r *http.Request) (*http.Response, error) {
	u, _ := url.Parse(rt.base)
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, ""
	return http.DefaultTransport.RoundTrip(r)
}
