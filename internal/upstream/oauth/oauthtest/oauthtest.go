// Package oauthtest is test support: a small OAuth 2.1 authorization
// server and an MCP server it protects, both on one 127.0.0.1 listener.
// The authorization server publishes RFC 8414 metadata, registers clients
// (RFC 7591), approves every authorization request at once (it redirects
// straight back with a code, as a person clicking "allow" would), checks
// PKCE S256 and the RFC 8707 resource, and issues opaque tokens it can be
// told to expire or revoke. The MCP server (go-sdk) publishes RFC 9728
// metadata and serves one tool, "echo", to bearers of a valid token.
//
// It is imported only by tests.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is a running authorization server and MCP server.
type Server struct {
	// URL is the issuer (http://127.0.0.1:PORT); MCPURL the Streamable
	// HTTP MCP endpoint (URL + "/mcp"), SSEURL the legacy HTTP+SSE one
	// (URL + "/sse"), each a protected resource of its own.
	URL, MCPURL, SSEURL string

	// TokenTTL is the lifetime of the access tokens issued from now on.
	TokenTTL atomic.Int64 // time.Duration

	// Refreshes counts refresh-token grants that were honoured; Logins
	// authorization-code grants; Rejected refused MCP requests.
	Refreshes, Logins, Rejected atomic.Int64

	mu      sync.Mutex
	clients map[string]string    // guarded by mu: client id → secret
	codes   map[string]codeGrant // guarded by mu
	access  map[string]time.Time // guarded by mu: access token → expiry
	refresh map[string]bool      // guarded by mu: refresh tokens honoured
	issued  []string             // guarded by mu: every secret value handed out
}

type codeGrant struct {
	clientID, challenge, resource, redirect string
}

// Start starts a Server on 127.0.0.1; it stops at the test's cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), clients: map[string]string{}, codes: map[string]codeGrant{},
		access: map[string]time.Time{}, refresh: map[string]bool{}}
	s.MCPURL, s.SSEURL = s.URL+"/mcp", s.URL+"/sse"
	s.TokenTTL.Store(int64(time.Hour))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", s.prm(s.MCPURL))
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/sse", s.prm(s.SSEURL))
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.asMeta)
	mux.HandleFunc("POST /register", s.register)
	mux.HandleFunc("GET /authorize", s.authorize)
	mux.HandleFunc("POST /token", s.token)
	ms := mcp.NewServer(&mcp.Implementation{Name: "oauthtest", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(ms, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: s.URL + "/.well-known/oauth-protected-resource/mcp"})(h))
	sh := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	mux.Handle("/sse", auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: s.URL + "/.well-known/oauth-protected-resource/sse"})(sh))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return s
}

// Secrets returns every token and client secret issued so far, for tests
// that check none reached a log.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.issued...)
}

// ExpireAccessTokens makes every access token issued so far invalid at the
// MCP server (as if its lifetime had passed).
func (s *Server) ExpireAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.access {
		s.access[k] = time.Unix(1, 0)
	}
}

// RevokeRefreshTokens makes every refresh token issued so far refused.
func (s *Server) RevokeRefreshTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.refresh)
}

func (s *Server) newSecret(prefix string) string {
	v := prefix + rand.Text()
	s.issued = append(s.issued, v)
	return v
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code int, e string) {
	writeJSON(w, code, map[string]string{"error": e})
}

// prm serves the protected-resource metadata of resource.
func (s *Server) prm(resource string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{"resource": resource, "authorization_servers": []string{s.URL},
			"scopes_supported": []string{"mcp"}, "bearer_methods_supported": []string{"header"}})
	}
}

// isResource reports whether u is one of the server's MCP endpoints.
func (s *Server) isResource(u string) bool { return u == s.MCPURL || u == s.SSEURL }

func (s *Server) asMeta(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{
		"issuer": s.URL, "authorization_endpoint": s.URL + "/authorize", "token_endpoint": s.URL + "/token",
		"registration_endpoint": s.URL + "/register", "response_types_supported": []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"scopes_supported":                      []string{"mcp"},
	})
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var md struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&md); err != nil || len(md.RedirectURIs) == 0 {
		oauthError(w, 400, "invalid_client_metadata")
		return
	}
	s.mu.Lock()
	id, secret := "client-"+rand.Text(), s.newSecret("secret-")
	s.clients[id] = secret
	s.mu.Unlock()
	writeJSON(w, 201, map[string]any{"client_id": id, "client_secret": secret, "redirect_uris": md.RedirectURIs,
		"token_endpoint_auth_method": "client_secret_basic"})
}

// AddClient registers a client with a known secret (pre-registration).
func (s *Server) AddClient(id, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[id] = secret
	s.issued = append(s.issued, secret)
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	_, known := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case !known, err != nil, redirect.Scheme != "http":
		http.Error(w, "unknown client or bad redirect_uri", 400)
		return
	case q.Get("response_type") != "code", q.Get("code_challenge_method") != "S256", q.Get("code_challenge") == "",
		!s.isResource(q.Get("resource")):
		http.Error(w, "want response_type=code, PKCE S256 and resource="+s.MCPURL+" or "+s.SSEURL, 400)
		return
	}
	s.mu.Lock()
	code := s.newSecret("code-")
	s.codes[code] = codeGrant{clientID: q.Get("client_id"), challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), redirect: q.Get("redirect_uri")}
	s.mu.Unlock()
	v := redirect.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, 400, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want, known := s.clients[id]; !known || want != secret {
		oauthError(w, 401, "invalid_client")
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || g.clientID != id || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge ||
			r.PostForm.Get("resource") != g.resource || r.PostForm.Get("redirect_uri") != g.redirect {
			oauthError(w, 400, "invalid_grant")
			return
		}
		s.Logins.Add(1)
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if !s.refresh[rt] {
			oauthError(w, 400, "invalid_grant")
			return
		}
		if !s.isResource(r.PostForm.Get("resource")) { // RFC 8707 §2: a refresh names its resource too
			oauthError(w, 400, "invalid_target")
			return
		}
		delete(s.refresh, rt) // rotated
		s.Refreshes.Add(1)
	case "client_credentials":
	default:
		oauthError(w, 400, "unsupported_grant_type")
		return
	}
	ttl := time.Duration(s.TokenTTL.Load())
	at, rt := s.newSecret("at-"), s.newSecret("rt-")
	s.access[at] = time.Now().Add(ttl)
	s.refresh[rt] = true
	writeJSON(w, 200, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(ttl.Seconds()),
		"refresh_token": rt, "scope": "mcp"})
}

func (s *Server) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	exp, ok := s.access[token]
	s.mu.Unlock()
	if !ok || time.Now().After(exp) {
		s.Rejected.Add(1)
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{Scopes: []string{"mcp"}, Expiration: exp}, nil
}
