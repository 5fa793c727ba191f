package oauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Login runs the authorization code flow now (`switchboard auth login`):
// it sends the server an unauthenticated request to learn, from its
// refusal, where to authorize; prompt shows the authorization URL; the
// tokens are stored. A server that lets the request (an initialize)
// through is asked for its tools in that session, and learned from if
// it refuses them; else it is asked for its metadata at the well-known
// URLs (RFC 9728); one that publishes none is an error.
func (c *Client) Login(ctx context.Context, prompt Prompt) error {
	if c.opts.Grant != GrantAuthorizationCode {
		return errors.New("oauth: a client_credentials destination needs no login")
	}
	var req *http.Request
	var err error
	if c.opts.SSE {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, c.opts.URL, nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
	} else {
		const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"switchboard-login","version":"1"}}}`
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.opts.URL, strings.NewReader(initialize))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
	}
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("oauth: %s: %v", c.opts.URL, err)
	}
	if !refused(resp) {
		discard(resp)
		// Some servers let the handshake through and protect the rest:
		// ask for the tools (in that session; or, from a 2026-07-28
		// server that has no handshake, statelessly), whose refusal
		// names the scope the calls need; else discover from the
		// well-known metadata URLs, without a challenge.
		opened := resp.StatusCode/100 == 2
		if r2, resp2 := c.probeTools(ctx, opened, resp.Header.Get("Mcp-Session-Id")); resp2 != nil {
			req, resp = r2, resp2
		} else if opened {
			resp = &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody, Request: req}
		} else {
			return fmt.Errorf("oauth: %s answered %s, not 401: cannot discover its authorization server", c.opts.URL, resp.Status)
		}
	}
	c.authMu.Lock()
	defer c.authMu.Unlock()
	return c.loginLocked(ctx, req, resp, prompt)
}

// probeTools sends a tools/list without a token, and returns it and its
// answer when the server refused it (401, 403 insufficient_scope); else
// nil. In a session a server opened (opened; sid its id, "" for none) it
// sends notifications/initialized first; else (the server refused the
// initialize, as a 2026-07-28 one does) it sends the stateless 2026-07-28
// form.
func (c *Client) probeTools(ctx context.Context, opened bool, sid string) (*http.Request, *http.Response) {
	if c.opts.SSE {
		return nil, nil
	}
	post := func(body, version, method string) (*http.Request, *http.Response) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.URL, strings.NewReader(body))
		if err != nil {
			return nil, nil
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", version)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		if method != "" {
			req.Header.Set("Mcp-Method", method)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, nil
		}
		return req, resp
	}
	var req *http.Request
	var resp *http.Response
	if opened {
		if _, r := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "2025-11-25", ""); r != nil {
			discard(r)
		}
		req, resp = post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "2025-11-25", "")
	} else {
		req, resp = post(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, "2026-07-28", "tools/list")
	}
	if resp == nil {
		return nil, nil
	}
	if !refused(resp) {
		discard(resp)
		return nil, nil
	}
	return req, resp
}

// loginLocked runs the authorization code flow for the refused request
// req (resp is its answer, consumed here), showing the person the
// authorization URL with prompt. authMu is held.
func (c *Client) loginLocked(ctx context.Context, req *http.Request, resp *http.Response, prompt Prompt) error {
	if c.code == nil {
		h, lb, err := c.newCodeHandler(false)
		if err != nil {
			discard(resp)
			return err
		}
		c.code, c.redir = h, lb
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.LoginTimeout)
	defer cancel()
	c.log.Info("oauth: authorizing", "url", c.opts.URL)
	c.prompt = prompt
	defer func() { c.prompt = nil }()
	if err := c.code.Authorize(ctx, req, resp); err != nil {
		c.mu.Lock()
		c.setNeedsLoginLocked("the login failed")
		c.mu.Unlock()
		return fmt.Errorf("oauth: login to %s: %v", c.opts.URL, err)
	}
	return nil
}

// newCodeHandler makes a go-sdk authorization code handler: for the
// logins the Client starts itself (gateway, callback.go), redirected to
// CallbackURL; else to a loopback listener, bound first so that its port
// is known, and returned. authMu is held.
func (c *Client) newCodeHandler(gateway bool) (*auth.AuthorizationCodeHandler, *loopback, error) {
	var lb *loopback
	redirect := c.opts.CallbackURL
	if !gateway {
		var err error
		if lb, err = listenLoopback(c.opts.RedirectURL); err != nil {
			return nil, nil, err
		}
		redirect = lb.url
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: c.fetchCode,
		ScopeFilter:              c.scopeFilter,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs:  []string{redirect},
				ClientName:    "Switchboard",
				GrantTypes:    []string{"authorization_code", "refresh_token"},
				ResponseTypes: []string{"code"},
			},
		},
		RequestRefreshToken: true,
		Client:              c.http,
		NewTokenSource:      c.adopt,
	}
	if c.opts.ClientMetadataURL != "" {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: c.opts.ClientMetadataURL}
	}
	if c.opts.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: c.opts.ClientID}
		if c.opts.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: c.opts.ClientSecret}
		}
		cfg.PreregisteredClient = pre
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		if lb != nil {
			lb.close()
		}
		return nil, nil, fmt.Errorf("oauth: %v", err)
	}
	return h, lb, nil
}

// adopt is the handler's NewTokenSource hook: called with the client and
// the token of a successful code exchange, it stores them and makes them
// current. The handler keeps the token source it returns, but requests
// use the Client's.
func (c *Client) adopt(_ context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	t := *tok
	rec := &Record{Resource: c.opts.URL, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		AuthURL: cfg.Endpoint.AuthURL, TokenURL: cfg.Endpoint.TokenURL, AuthStyle: cfg.Endpoint.AuthStyle,
		Scopes: cfg.Scopes, Token: &t, Saved: time.Now().UTC()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.store.Save(c.opts.Key, rec); err != nil {
		return nil, fmt.Errorf("storing the tokens: %v", err)
	}
	c.loaded, c.version = true, c.store.Version(c.opts.Key)
	c.installLocked(rec)
	c.log.Info("oauth: logged in", "url", c.opts.URL, "expiry", tok.Expiry, "refreshable", tok.RefreshToken != "")
	return oauth2.StaticTokenSource(&t), nil
}

// fetchCode is the handler's AuthorizationCodeFetcher: it serves the
// redirect URL on the loopback listener, prompts with the authorization
// URL, and waits for the browser to come back.
func (c *Client) fetchCode(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	if err := checkAuthURL(args.URL); err != nil {
		return nil, err
	}
	if p, ok := ctx.Value(pendingKey{}).(*pendingLogin); ok {
		return c.awaitCallback(ctx, p, args.URL)
	}
	prompt := c.prompt
	if prompt == nil {
		return nil, c.needsLogin("no login possible here")
	}
	lb := c.redir
	if lb.ln == nil {
		if err := lb.reopen(); err != nil {
			return nil, err
		}
	}
	got := make(chan callback, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != lb.path {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		cb := callback{res: &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if e := q.Get("error"); e != "" {
			cb.err = fmt.Errorf("the authorization server refused: %s %s", e, q.Get("error_description"))
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "<p>Switchboard: authorization failed: %s</p>", html.EscapeString(e))
		} else {
			fmt.Fprint(w, "<p>Switchboard: authorized. You can close this window.</p>")
		}
		select {
		case got <- cb:
		default: // a second visit: the first one counts
		}
	})}
	served := make(chan struct{})
	ln := lb.ln
	lb.ln = nil // Serve owns it now; Close closes it
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	defer func() {
		srv.Close()
		<-served
	}()
	if err := prompt(ctx, args.URL); err != nil {
		return nil, err
	}
	select {
	case cb := <-got:
		return cb.res, cb.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no redirect came back to %s: %v", lb.url, ctx.Err())
	}
}

type callback struct {
	res *auth.AuthorizationResult
	err error
}

// checkAuthURL accepts only an https authorization URL, or http to a
// loopback host: never javascript: or a file.
func checkAuthURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("oauth: bad authorization URL: %v", err)
	}
	if u.Scheme == "https" || u.Scheme == "http" && IsLoopback(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("oauth: refusing the authorization URL %s://%s: want https (or http to a loopback host)", u.Scheme, u.Host)
}

// IsLoopback reports a loopback host name or address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopback is the redirect listener of the logins of a Client.
type loopback struct {
	url  string       // the redirect URL, its port resolved
	addr string       // host:port
	path string       // the path redirects come to
	ln   net.Listener // nil between logins
}

// listenLoopback binds the redirect URL (default
// http://127.0.0.1:0/callback, port 0 a free one).
func listenLoopback(redirect string) (*loopback, error) {
	redirect = cmp.Or(redirect, "http://127.0.0.1:0/callback")
	u, err := url.Parse(redirect)
	if err != nil || u.Scheme != "http" || !IsLoopback(u.Hostname()) {
		return nil, fmt.Errorf("oauth: redirect URL %q: want http://127.0.0.1:PORT/PATH (a loopback address)", redirect)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "80")))
	if err != nil {
		return nil, fmt.Errorf("oauth: the login's redirect listener: %v", err)
	}
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	u.Host = net.JoinHostPort(u.Hostname(), p)
	return &loopback{url: u.String(), addr: u.Host, path: cmp.Or(u.Path, "/"), ln: ln}, nil
}

func (l *loopback) reopen() error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("oauth: the login's redirect listener: %v", err)
	}
	l.ln = ln
	return nil
}

func (l *loopback) close() {
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
}

// Close releases the Client's redirect listener, if a login left one,
// and ends a login it started itself (CallbackURL), waiting for it.
func (c *Client) Close() {
	c.pmu.Lock()
	c.closed = true
	c.pmu.Unlock()
	c.bgCancel()
	c.bg.Wait()
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if c.redir != nil {
		c.redir.close()
	}
}
