// Package oauth makes Switchboard an OAuth 2.1 client of a remote MCP
// server (a streamable_http or sse destination, or `switchboard relay
// --url`): a Client holds the gateway's own tokens for one server and its
// Transport sets them on every request.
//
// The protocol work is done by maintained libraries: the go-sdk's auth and
// oauthex packages discover the protected-resource metadata (RFC 9728,
// from the 401's WWW-Authenticate, then the well-known URLs) and the
// authorization server's metadata (RFC 8414 / OpenID discovery, with the
// 2025-03-26 fallbacks and the issuer checks), register the client (a
// client-ID metadata document, a pre-registered client, or RFC 7591
// dynamic registration), select the scopes (WWW-Authenticate, then
// scopes_supported; the union on a step-up), and run the authorization
// code grant with PKCE S256, the RFC 8707 resource parameter and the RFC
// 9207 iss check; golang.org/x/oauth2 exchanges and refreshes the tokens;
// the client credentials grant is the go-sdk's extauth handler.
//
// This package adds what a gateway needs around them (see Client): tokens
// that persist in a Store, one refresh however many requests find a token
// expired, StateNeedsLogin when the server refuses the refresh token, and
// logins the gateway starts itself (Options.CallbackURL, callback.go).
//
// Token values never reach a log, an error or a status: only their expiry
// and whether a refresh token is held.
package oauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Grants.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// States of a Client (Status.State).
const (
	// StateUnknown: nothing is known yet (no request has been sent).
	StateUnknown = ""
	// StateReady: a token is held, or can be had without a person (a
	// refresh token, client credentials).
	StateReady = "ok"
	// StateNeedsLogin: a person must log in (`switchboard auth login`):
	// there is no token, or the refresh token was refused, or the server
	// asks for more scope.
	StateNeedsLogin = "needs_login"
)

// ErrNeedsLogin is wrapped by the errors of requests that cannot be sent
// until a person logs in.
var ErrNeedsLogin = errors.New("needs an OAuth login")

// Prompt sends a person to authURL: prints it, opens a browser. It
// returns once the URL is shown; the redirect comes back on the loopback
// listener.
type Prompt func(ctx context.Context, authURL string) error

// Options configure a Client for one remote MCP server.
type Options struct {
	// URL is the MCP server's endpoint: the protected resource, and the
	// "resource" of the authorization and token requests. Required.
	URL string

	// Grant is GrantAuthorizationCode (default "") or
	// GrantClientCredentials.
	Grant string

	// ClientID and ClientSecret are a pre-registered client. Default "":
	// a client-ID metadata document when ClientMetadataURL is set and the
	// server supports them, else dynamic client registration. Required for
	// GrantClientCredentials.
	ClientID, ClientSecret string

	// ClientKey is a PEM private key (EC, RSA or Ed25519) with which a
	// GrantClientCredentials client authenticates instead of a secret:
	// private_key_jwt (RFC 7523), a new signed assertion per token request.
	// Default nil: ClientSecret.
	ClientKey []byte

	// ClientMetadataURL is the https URL of this client's metadata
	// document (its client_id where the authorization server supports
	// them). Default "": none.
	ClientMetadataURL string

	// RedirectURL is where the authorization server sends the browser
	// back: a loopback http URL on which the login listens. Default "":
	// http://127.0.0.1:PORT/callback on a free port.
	RedirectURL string

	// Store keeps the tokens under Key. Default nil: a MemoryStore (the
	// tokens last as long as the process).
	Store Store
	// Key names the record in Store (the destination's name). Default
	// "default".
	Key string

	// HTTPClient sends the discovery, registration and token requests.
	// Default: a client with a 30 s timeout that refuses addresses the
	// server should not make the gateway reach (endpoints.go).
	HTTPClient *http.Client

	// Prompt, when set, lets a request that finds no usable token start
	// the authorization code flow (relay --login). Default nil: the
	// request fails with ErrNeedsLogin and the state is StateNeedsLogin.
	Prompt Prompt

	// CallbackURL, when set (and Prompt is nil), lets the Client start an
	// authorization code login by itself, for a gateway destination whose
	// clients have a person behind them: a request that finds no usable
	// token, is refused for want of scope (403 insufficient_scope), or
	// meets a new authorization server fails with a *LoginRequiredError
	// that carries the authorization URL, and the browser's redirect
	// comes back to CallbackURL, which the gateway serves with Callback.
	// One login waits at a time; the requests that meet it meanwhile get
	// the same URL. An absolute http or https URL. Default "": the Client
	// never starts a login (ErrNeedsLogin).
	CallbackURL string

	// RefreshMargin is how long before its expiry a token is refreshed.
	// Default 0: 30 s.
	RefreshMargin time.Duration

	// LoginTimeout bounds how long a login waits for the browser's
	// redirect (with CallbackURL: how long its URL may be used). Default
	// 0: 5 minutes.
	LoginTimeout time.Duration

	// LoginHint completes the ErrNeedsLogin message with what to run,
	// such as "switchboard auth login github". Default "": none.
	LoginHint string

	// SSE says the server is a legacy HTTP+SSE endpoint (Login probes it
	// with a GET, not an initialize POST).
	SSE bool

	// Logger receives state changes, never token values. Default: discard.
	Logger *slog.Logger
}

// Client holds the tokens of one remote server. It is safe for concurrent
// use; one Client serves every session of a destination.
//
// The tokens persist in a Store (a 0600 file by default) and are reloaded
// when another process (`switchboard auth login`) rewrites it. Since one
// Client is shared by every session, a token is refreshed once, however
// many requests find it expired (oauth2.ReuseTokenSource holds the others
// until the refresh is done), and a 401 is answered by one refresh; a
// refresh token the server refuses puts the Client in StateNeedsLogin,
// which /healthz and `check` report. Without a Prompt or a CallbackURL a
// Client never starts an interactive login by itself.
type Client struct {
	opts  Options
	store Store
	log   *slog.Logger
	http  *http.Client

	mu      sync.Mutex
	loaded  bool               // guarded by mu: rec was read from the store
	version string             // guarded by mu: the store's Version when rec was read or written
	rec     *Record            // guarded by mu: nil when there is none
	src     oauth2.TokenSource // guarded by mu: tokens of rec (or of the client credentials); nil: none
	gen     uint64             // guarded by mu: bumped whenever src changes
	state   string             // guarded by mu
	reason  string             // guarded by mu: why state is StateNeedsLogin

	// authMu serialises the recovery from a 401/403 (a forced refresh, a
	// login, a client-credentials grant), so concurrent requests that
	// were refused recover once.
	authMu sync.Mutex
	code   *auth.AuthorizationCodeHandler    // guarded by authMu; made by the first login with a Prompt
	gwCode *auth.AuthorizationCodeHandler    // guarded by authMu; made by the first login the Client starts (CallbackURL)
	cc     *extauth.ClientCredentialsHandler // guarded by authMu; nil unless GrantClientCredentials with a secret
	signer jose.Signer                       // the private_key_jwt assertions' (ClientKey); nil without
	redir  *loopback                         // guarded by authMu; the login's redirect listener
	prompt Prompt                            // guarded by authMu: the running login's

	refreshes atomic.Int64 // refresh-token grants sent

	// The logins started by the Client itself (CallbackURL; callback.go).
	pmu      sync.Mutex
	pending  *pendingLogin      // guarded by pmu: the login waiting for its redirect; nil: none
	union    []string           // guarded by pmu: scopes a step-up login asks for besides the challenge's
	closed   bool               // guarded by pmu: Close was called; no login starts
	onLogin  func(id string)    // guarded by pmu: see OnLogin
	bg       sync.WaitGroup     // the logins' goroutines (runLogin); Close waits for them
	bgCtx    context.Context    // the logins' context, cancelled by Close
	bgCancel context.CancelFunc // cancels bgCtx
}

// New returns a Client; it reads nothing yet.
func New(opts Options) (*Client, error) {
	if opts.URL == "" {
		return nil, errors.New("oauth: no URL")
	}
	switch opts.Grant {
	case "", GrantAuthorizationCode:
		opts.Grant = GrantAuthorizationCode
	case GrantClientCredentials:
		if opts.ClientID == "" || (opts.ClientSecret == "") == (opts.ClientKey == nil) {
			return nil, errors.New("oauth: the client_credentials grant needs a client id and a secret or a key")
		}
	default:
		return nil, fmt.Errorf("oauth: unknown grant %q: want authorization_code or client_credentials", opts.Grant)
	}
	if opts.RedirectURL != "" {
		u, err := url.Parse(opts.RedirectURL)
		if err != nil || u.Scheme != "http" || !IsLoopback(u.Hostname()) {
			return nil, errors.New("oauth: the redirect URL must be http on a loopback address, such as http://127.0.0.1:8976/callback")
		}
	}
	if opts.CallbackURL != "" {
		u, err := url.Parse(opts.CallbackURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("oauth: the callback URL must be an absolute http or https URL, such as https://gateway.example.com/oauth/callback/NAME")
		}
	}
	opts.Key = cmp.Or(opts.Key, "default")
	if opts.RefreshMargin <= 0 {
		opts.RefreshMargin = 30 * time.Second
	}
	if opts.LoginTimeout <= 0 {
		opts.LoginTimeout = 5 * time.Minute
	}
	c := &Client{opts: opts, store: opts.Store, log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)), http: opts.HTTPClient}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	if c.store == nil {
		c.store = &MemoryStore{}
	}
	if c.http == nil {
		c.http = newGuardedHTTPClient(opts.URL)
	}
	if opts.Grant == GrantClientCredentials && opts.ClientKey != nil {
		signer, err := newAssertionSigner(opts.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("oauth: %w", err)
		}
		c.signer = signer
	} else if opts.Grant == GrantClientCredentials {
		cc, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
			Credentials: &oauthex.ClientCredentials{ClientID: opts.ClientID,
				ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: opts.ClientSecret}},
			HTTPClient: c.http,
		})
		if err != nil {
			return nil, fmt.Errorf("oauth: %w", err)
		}
		c.cc = cc
	}
	return c, nil
}

// Status is what a Client can say about its tokens without showing them.
type Status struct {
	// State is StateUnknown, StateReady or StateNeedsLogin.
	State string
	// Reason says why State is StateNeedsLogin.
	Reason string
	// Expiry is the access token's expiry; zero when unknown or none.
	Expiry time.Time
	// Refreshable says a refresh token is held.
	Refreshable bool
	// ClientID is the client the tokens were issued to; TokenURL the
	// authorization server's token endpoint; Scopes those asked for.
	ClientID, TokenURL string
	Scopes             []string
	// Refreshes counts the refresh-token grants this Client sent.
	Refreshes int64
}

// Status reports the Client's state, reading the store first.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reloadLocked()
	s := Status{State: c.state, Reason: c.reason, Refreshes: c.refreshes.Load()}
	if r := c.rec; r != nil {
		s.ClientID, s.TokenURL, s.Scopes = r.ClientID, r.TokenURL, slices.Clone(r.Scopes)
		if r.Token != nil {
			s.Expiry, s.Refreshable = r.Token.Expiry, r.Token.RefreshToken != ""
		}
	}
	return s
}

// Logout forgets the tokens, in the store too.
func (c *Client) Logout() error {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.store.Delete(c.opts.Key); err != nil {
		return err
	}
	c.loaded, c.version = true, c.store.Version(c.opts.Key)
	c.installLocked(nil)
	return nil
}

// needsLogin returns the error of a request that needs a login.
func (c *Client) needsLogin(reason string) error {
	msg := fmt.Sprintf("%s: %s", c.opts.URL, reason)
	if c.opts.LoginHint != "" {
		msg += "; run: " + c.opts.LoginHint
	}
	return fmt.Errorf("%w: %s", ErrNeedsLogin, msg)
}

// setNeedsLoginLocked records that a person must log in.
func (c *Client) setNeedsLoginLocked(reason string) {
	if c.state != StateNeedsLogin || c.reason != reason {
		c.log.Warn("oauth: login needed", "url", c.opts.URL, "reason", reason)
	}
	c.state, c.reason = StateNeedsLogin, reason
}

// reloadLocked reads the store's record when it changed since it was last
// read or written here: another process logged in or out.
func (c *Client) reloadLocked() {
	if c.opts.Grant == GrantClientCredentials {
		return
	}
	v := c.store.Version(c.opts.Key)
	if c.loaded && v == c.version {
		return
	}
	rec, err := c.store.Load(c.opts.Key)
	c.loaded, c.version = true, v
	if err != nil {
		c.log.Warn("oauth: the token store cannot be read", "url", c.opts.URL, "err", err)
		rec = nil
	}
	if rec != nil && rec.Resource != "" && rec.Resource != c.opts.URL {
		c.log.Warn("oauth: the stored tokens are for another URL; ignored", "url", c.opts.URL, "stored_for", rec.Resource)
		rec = nil
	}
	c.installLocked(rec)
}

// installLocked makes rec the current record and builds its token source.
func (c *Client) installLocked(rec *Record) {
	c.rec = rec
	c.gen++
	if rec == nil || rec.Token == nil || (rec.Token.AccessToken == "" && rec.Token.RefreshToken == "") {
		c.src = nil
		reason := "no login yet"
		if rec != nil && rec.Refused != "" {
			reason = rec.Refused
		}
		c.setNeedsLoginLocked(reason)
		return
	}
	tok := *rec.Token
	c.src = oauth2.ReuseTokenSourceWithExpiry(&tok, &refresher{c: c}, c.opts.RefreshMargin)
	c.state, c.reason = StateReady, ""
}

// config is the oauth2 configuration of the current record.
func (r *Record) config() *oauth2.Config {
	return &oauth2.Config{ClientID: r.ClientID, ClientSecret: r.ClientSecret, Scopes: r.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: r.AuthURL, TokenURL: r.TokenURL, AuthStyle: r.AuthStyle}}
}

// refresher is the token source under the ReuseTokenSource of a record: it
// is called (one call at a time) when the cached token is near its expiry,
// and sends the refresh-token grant with the record's latest refresh token.
type refresher struct{ c *Client }

func (r *refresher) Token() (*oauth2.Token, error) {
	c := r.c
	c.mu.Lock()
	rec := c.rec
	var rt string
	if rec != nil && rec.Token != nil {
		rt = rec.Token.RefreshToken
	}
	if rt == "" {
		c.setNeedsLoginLocked("the access token expired and there is no refresh token")
		c.mu.Unlock()
		return nil, c.needsLogin("the access token expired and there is no refresh token")
	}
	cfg := rec.config()
	resource := cmp.Or(rec.Resource, c.opts.URL)
	c.mu.Unlock()
	hc := *c.http
	hc.Transport = &resourceParam{base: c.http.Transport, tokenURL: cfg.Endpoint.TokenURL, resource: resource}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &hc)
	c.refreshes.Add(1)
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && (re.ErrorCode == "invalid_grant" || re.Response != nil && (re.Response.StatusCode == 400 || re.Response.StatusCode == 401)) {
			reason := "the refresh token was refused"
			if re.ErrorCode != "" {
				reason += " (" + re.ErrorCode + ")"
			}
			c.dropTokens(rec, reason)
			return nil, c.needsLogin(reason)
		}
		// A network error, a 5xx: the next request tries again. The
		// error's text never holds a token (it holds the error body).
		return nil, fmt.Errorf("oauth: refreshing the token of %s: %v", c.opts.URL, errSummary(err))
	}
	c.log.Info("oauth: token refreshed", "url", c.opts.URL, "expiry", tok.Expiry)
	c.saveToken(rec, tok)
	return tok, nil
}

// errSummary is an oauth2 error without the response body it may carry.
func errSummary(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		s := re.Response.Status
		if re.ErrorCode != "" {
			s += " " + re.ErrorCode
		}
		return s
	}
	return err.Error()
}

// dropTokens forgets the tokens of rec, if rec is still current, in the
// store too (so that `auth status` and `check` in another process see
// that a login is needed), and records why.
func (c *Client) dropTokens(rec *Record, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rec != rec {
		return
	}
	next := *rec
	next.Token, next.Refused, next.Saved = nil, reason, time.Now().UTC()
	if err := c.store.Save(c.opts.Key, &next); err != nil {
		c.log.Warn("oauth: the token store could not be updated", "url", c.opts.URL, "err", err)
	} else {
		c.version = c.store.Version(c.opts.Key)
	}
	c.installLocked(&next)
}

// saveToken stores tok as the token of rec, if rec is still current.
func (c *Client) saveToken(rec *Record, tok *oauth2.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rec != rec {
		return
	}
	next := *rec
	t := *tok
	next.Token, next.Saved = &t, time.Now().UTC()
	c.rec = &next
	c.state, c.reason = StateReady, ""
	if err := c.store.Save(c.opts.Key, &next); err != nil {
		c.log.Warn("oauth: the refreshed token could not be stored", "url", c.opts.URL, "err", err)
		return
	}
	c.version = c.store.Version(c.opts.Key)
}

// current returns the token source (nil: none), its generation, and the
// state and its reason.
func (c *Client) current() (oauth2.TokenSource, uint64, string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reloadLocked()
	return c.src, c.gen, c.state, c.reason
}

// Transport returns a RoundTripper that sends every request through base
// (nil: http.DefaultTransport) with the Client's token, and on a 401 (or
// a 403 insufficient_scope) recovers once and sends it again: a forced
// refresh, a new client-credentials token, or (with a Prompt) a login.
func (c *Client) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{c: c, base: base}
}

type transport struct {
	c    *Client
	base http.RoundTripper
}

// maxRecoveries bounds the recoveries of one request: a refresh, then a
// login (or a step-up); a server that still refuses gets its answer
// passed on.
const maxRecoveries = 2

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.c
	for attempt := 0; ; attempt++ {
		src, gen, state, reason := c.current()
		if src == nil && state == StateNeedsLogin && c.opts.Grant == GrantAuthorizationCode {
			if err := c.waitingLogin(); err != nil {
				// A login started here waits for its person: same URL.
				closeBody(req)
				return nil, err
			}
			if !c.canLogin() {
				// Nothing to send but a request the server will refuse.
				closeBody(req)
				return nil, c.needsLogin(reason)
			}
		}
		var tok *oauth2.Token
		if src != nil {
			var err error
			tok, err = src.Token()
			if err != nil && (!c.canLogin() || !errors.Is(err, ErrNeedsLogin)) {
				closeBody(req)
				return nil, err
			}
		}
		out := req
		if attempt > 0 || tok != nil {
			out = req.Clone(req.Context())
			if attempt > 0 && req.Body != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				out.Body = body
			}
			if tok != nil {
				out.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			}
		}
		resp, err := t.base.RoundTrip(out)
		if err != nil || !refused(resp) || attempt >= maxRecoveries || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		if err := c.recover(req.Context(), out, resp, gen, tok != nil); err != nil {
			return nil, err
		}
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// refused reports a response that authorization may cure: 401, or 403
// with error="insufficient_scope".
func refused(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden && insufficientScope(resp)
}

func insufficientScope(resp *http.Response) bool {
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	return err == nil && slices.ContainsFunc(cs, func(ch oauthex.Challenge) bool {
		return strings.EqualFold(ch.Scheme, "bearer") && ch.Params["error"] == "insufficient_scope"
	})
}

func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// recover answers a refused request that was sent with the token source of
// generation gen. It consumes resp. Only one recovery runs at a time; one
// that finds the generation changed (another request recovered first)
// does nothing, and the request is sent again with the new token.
func (c *Client) recover(ctx context.Context, req *http.Request, resp *http.Response, gen uint64, hadToken bool) error {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	c.mu.Lock()
	cur := c.gen
	c.mu.Unlock()
	if cur != gen {
		discard(resp)
		return nil
	}
	if c.opts.Grant == GrantClientCredentials {
		var ts oauth2.TokenSource
		var err error
		if c.signer != nil {
			ts, err = c.assertionAuthorize(ctx, req, resp)
		} else if err = c.cc.Authorize(ctx, req, resp); err == nil {
			ts, _ = c.cc.TokenSource(ctx)
		}
		if err != nil {
			return fmt.Errorf("oauth: client credentials for %s: %v", c.opts.URL, err)
		}
		c.mu.Lock()
		c.src, c.state, c.reason = ts, StateReady, ""
		c.gen++
		c.mu.Unlock()
		return nil
	}
	if resp.StatusCode == http.StatusUnauthorized && hadToken && c.waitingLogin() == nil {
		err := c.forceRefresh(gen)
		if err == nil {
			discard(resp)
			return nil
		}
		if errors.Is(err, ErrNeedsLogin) && !c.canLogin() {
			discard(resp)
			return err
		}
	}
	if c.opts.Prompt != nil {
		return c.loginLocked(ctx, req, resp, c.opts.Prompt)
	}
	if c.opts.CallbackURL != "" {
		return c.startLogin(ctx, req, resp)
	}
	reason := "the server refused the request without a valid token"
	if resp.StatusCode == http.StatusForbidden {
		reason = "the server asks for more scope (insufficient_scope)"
	}
	discard(resp)
	c.mu.Lock()
	if c.gen == gen {
		if c.state == StateNeedsLogin {
			reason = c.reason // the more precise one
		}
		c.setNeedsLoginLocked(reason)
	}
	c.mu.Unlock()
	return c.needsLogin(reason)
}

// forceRefresh refreshes the token of generation gen although it has not
// expired (the server refused it), and installs the result. nil: a new
// token is current.
func (c *Client) forceRefresh(gen uint64) error {
	c.mu.Lock()
	rec := c.rec
	if c.gen != gen || rec == nil || rec.Token == nil || rec.Token.RefreshToken == "" {
		c.mu.Unlock()
		return errors.New("no refresh token")
	}
	c.mu.Unlock()
	tok, err := (&refresher{c: c}).Token()
	if err != nil {
		c.log.Info("oauth: a refused token could not be refreshed", "url", c.opts.URL, "err", err)
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = oauth2.ReuseTokenSourceWithExpiry(tok, &refresher{c: c}, c.opts.RefreshMargin)
	c.gen++
	return nil
}

// Refreshes counts the refresh-token grants sent.
func (c *Client) Refreshes() int64 { return c.refreshes.Load() }
