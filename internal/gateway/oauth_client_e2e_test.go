package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The go-sdk client's own OAuth flow against Switchboard and a local
// authorization server: the 401's challenge leads it to the RFC 9728
// metadata, the issuer's RFC 8414 metadata, an authorization code with
// PKCE for the resource it connects to (RFC 8707), a token, and a retry
// that Switchboard accepts.

// grant is an authorization code's request.
type grant struct {
	challenge, resource, scope, redirect string
}

// routeAuthorizationServer adds the authorization server's endpoints: its
// metadata, /authorize (answers at once with a code, as a user who
// consents would) and /token (authorization_code with PKCE S256).
func (is *issuer) routeAuthorizationServer(mux *http.ServeMux) {
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.url, "authorization_endpoint": is.url + "/authorize", "token_endpoint": is.url + "/token",
			"response_types_supported": []string{"code"}, "grant_types_supported": []string{"authorization_code"},
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"},
			"scopes_supported": []string{"mcp"}, "jwks_uri": is.url + "/jwks",
		})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "switchboard-test" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		code := "code-" + q.Get("state")
		is.codes.Store(code, grant{challenge: q.Get("code_challenge"), resource: q.Get("resource"), scope: q.Get("scope"), redirect: q.Get("redirect_uri")})
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		v, ok := is.codes.LoadAndDelete(r.PostForm.Get("code"))
		if !ok || r.PostForm.Get("grant_type") != "authorization_code" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		g := v.(grant)
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.PostForm.Get("resource") != g.resource || r.PostForm.Get("redirect_uri") != g.redirect {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		c := is.claimsFor("user-1", g.resource) // the audience is the resource asked for
		c["scope"] = g.scope
		is.tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": is.sign(c), "token_type": "Bearer", "expires_in": 3600, "scope": g.scope})
	})
}

// hostRT sends requests for host to base; others go as they are.
type hostRT struct{ host, base string }

func (rt hostRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != rt.host {
		return http.DefaultTransport.RoundTrip(r)
	}
	return rewriteRT{base: rt.base}.RoundTrip(r)
}

func TestOAuthGoSDKClientFlow(t *testing.T) {
	is := startIssuer(t)
	h := startAgg(t, oauthTop(is), "", aggDest("alpha", "a1"), aggDest("beta", "b1"))
	hc := &http.Client{Transport: hostRT{host: "gw.test", base: h.base}}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: "switchboard-test"},
		RedirectURL:         "http://127.0.0.1/callback",
		Client:              hc,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			req, err := http.NewRequestWithContext(ctx, "GET", args.URL, nil)
			if err != nil {
				return nil, err
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			loc, err := url.Parse(resp.Header.Get("Location"))
			if err != nil {
				return nil, err
			}
			return &auth.AuthorizationResult{Code: loc.Query().Get("code"), State: loc.Query().Get("state")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	cs, err := newInteropClient().Client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: gwResource + "/alpha/mcp", HTTPClient: hc, OAuthHandler: handler, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect with the go-sdk OAuth flow: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a1", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("call after the OAuth flow: %v %+v", err, res)
	}
	if n := is.tokens.Load(); n != 1 {
		t.Errorf("%d tokens issued, want 1", n)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(got, "alpha:a1") {
		t.Errorf("result %q", got)
	}
}
