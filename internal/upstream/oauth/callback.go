package oauth

// Logins the gateway starts by itself (Options.CallbackURL): the Client
// runs the go-sdk's authorization code flow on a goroutine of its own
// (runLogin) and hands its URL to the client (MCP URL elicitation, error
// -32042); Callback brings the code back to the waiting flow, which checks
// the RFC 9207 iss, exchanges the code and stores the tokens before the
// browser is answered, so a client that retries then succeeds.
//
// The state is the callback's only credential (the browser brings no
// other), so it is checked in constant time, used once, bound to this
// Client (one destination), and dies with the login (LoginTimeout).

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// LoginRequiredError is the error of a request that needs a person to
// log in, when the Client started that login itself (CallbackURL). It
// wraps ErrNeedsLogin. Its text does not hold the URL (errors get
// logged); Elicitation gives it.
type LoginRequiredError struct {
	// URL is the authorization URL the person opens.
	URL string
	// ID names the login (an MCP elicitationId): the same for every
	// request that met it.
	ID string
	// Message says, for the person, what the login is for.
	Message string
}

func (e *LoginRequiredError) Error() string {
	return fmt.Sprintf("%v: %s (a login was started; the client was given its URL)", ErrNeedsLogin, e.Message)
}

func (e *LoginRequiredError) Unwrap() error { return ErrNeedsLogin }

// Elicitation returns what an MCP URL elicitation carries: its id, the
// URL and the message.
func (e *LoginRequiredError) Elicitation() (id, url, message string) { return e.ID, e.URL, e.Message }

// pendingLogin is a login started by the Client, from its start to the
// end of runLogin.
type pendingLogin struct {
	id     string        // the elicitation id
	ready  chan struct{} // closed once url is set, or the flow failed before it had one
	result chan callback // cap 1: the redirect's code (or error), sent by the one Callback that claims the login
	done   chan struct{} // closed when the flow has ended; err is then set

	url string // set before ready is closed
	err error  // set before done is closed

	// The fields below are guarded by Client.pmu.
	state   string    // the authorization request's state; "" until url is set
	expires time.Time // when the URL stops being honoured
	claimed bool      // a redirect with the right state came: the state is used up
}

// pendingKey marks the context of a login started by the Client, so
// that fetchCode waits for the callback instead of prompting.
type pendingKey struct{}

// OnLogin sets f to be called with the elicitation id (LoginRequiredError.ID)
// of each login the Client started that succeeded, once the tokens are
// stored and before its redirect is answered (the gateway sends
// notifications/elicitation/complete). f must not block long.
func (c *Client) OnLogin(f func(id string)) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	c.onLogin = f
}

// StartsLogins reports whether the Client starts logins itself
// (CallbackURL), whose redirects Callback serves.
func (c *Client) StartsLogins() bool {
	return c.opts.CallbackURL != "" && c.opts.Prompt == nil && c.opts.Grant == GrantAuthorizationCode
}

// canLogin reports whether the Client may start a login itself.
func (c *Client) canLogin() bool { return c.opts.Prompt != nil || c.opts.CallbackURL != "" }

// waitingLogin returns the error of a login that waits for its person,
// or nil when none does.
func (c *Client) waitingLogin() error {
	c.pmu.Lock()
	p := c.pending
	c.pmu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.ready:
		if p.url != "" {
			return c.loginRequired(p)
		}
	default:
	}
	return nil
}

func (c *Client) loginRequired(p *pendingLogin) error {
	return &LoginRequiredError{URL: p.url, ID: p.id, Message: "Authorize Switchboard to use " + c.opts.URL + " (OAuth login)"}
}

// startLogin starts a login for the refused request req (resp is its
// answer, consumed here) unless one waits already, and returns the
// error that hands its URL to the client: once the URL is known, or at
// once if the flow fails first. authMu is held (recover).
func (c *Client) startLogin(ctx context.Context, req *http.Request, resp *http.Response) error {
	c.pmu.Lock()
	p := c.pending
	switch {
	case c.closed:
		c.pmu.Unlock()
		discard(resp)
		return c.needsLogin("the client is closed")
	case p != nil:
		c.pmu.Unlock()
		discard(resp)
	default:
		if c.gwCode == nil {
			h, _, err := c.newCodeHandler(true)
			if err != nil {
				c.pmu.Unlock()
				discard(resp)
				return err
			}
			c.gwCode = h
		}
		p = &pendingLogin{id: rand.Text(), ready: make(chan struct{}), result: make(chan callback, 1), done: make(chan struct{})}
		c.union = nil
		if resp.StatusCode == http.StatusForbidden {
			// A step-up keeps what was granted (SEP-2350), also when the
			// first login was another process's (auth login).
			c.mu.Lock()
			if c.rec != nil {
				c.union = slices.Clone(c.rec.Scopes)
			}
			c.mu.Unlock()
		}
		c.pending = p
		c.bg.Add(1)
		c.pmu.Unlock()
		c.log.Info("oauth: starting a login for a client to complete", "url", c.opts.URL, "status", resp.StatusCode)
		go c.runLogin(p, c.gwCode, req, resp)
	}
	select {
	case <-p.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.url == "" {
		<-p.done
		why := "the server's refusal was not one a login cures"
		if p.err != nil {
			why = errSummary(p.err)
		}
		return c.needsLogin("the login could not start: " + why)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		c.mu.Lock()
		c.setNeedsLoginLocked("waiting for a login started by the gateway (the client was given its URL)")
		c.mu.Unlock()
	}
	return c.loginRequired(p)
}

// runLogin runs the authorization code flow of p to its end: it owns p
// until done is closed. The Client owns the goroutine (bg); Close ends
// it through bgCtx.
func (c *Client) runLogin(p *pendingLogin, h *auth.AuthorizationCodeHandler, req *http.Request, resp *http.Response) {
	defer c.bg.Done()
	ctx := context.WithValue(c.bgCtx, pendingKey{}, p)
	err := h.Authorize(ctx, req, resp) // the tokens are stored by adopt
	c.pmu.Lock()
	if c.pending == p {
		c.pending = nil
	}
	c.union = nil
	c.pmu.Unlock()
	p.err = err
	select {
	case <-p.ready:
	default:
		close(p.ready) // the flow failed before it had a URL
	}
	if err == nil {
		c.pmu.Lock()
		done := c.onLogin
		c.pmu.Unlock()
		if done != nil {
			done(p.id) // before the browser's page answers: the client may retry then
		}
	}
	close(p.done)
	if err != nil {
		c.log.Warn("oauth: the login the gateway started failed", "url", c.opts.URL, "err", errSummary(err))
		c.mu.Lock()
		if c.state == StateNeedsLogin {
			c.setNeedsLoginLocked("the login the gateway started failed; the next request starts another")
		}
		c.mu.Unlock()
	}
}

// scopeFilter is the code handler's ScopeFilter: a step-up login asks
// for the scopes granted before too.
func (c *Client) scopeFilter(discovered []string) []string {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	out := slices.Clone(discovered)
	for _, s := range c.union {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// awaitCallback is fetchCode for a login the Client started: it
// publishes the authorization URL and waits for Callback to bring the
// code, for LoginTimeout at most.
func (c *Client) awaitCallback(ctx context.Context, p *pendingLogin, authURL string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(authURL)
	if err != nil || u.Query().Get("state") == "" {
		return nil, errors.New("the authorization URL has no state")
	}
	c.pmu.Lock()
	p.url, p.state, p.expires = authURL, u.Query().Get("state"), time.Now().Add(c.opts.LoginTimeout)
	c.pmu.Unlock()
	close(p.ready)
	t := time.NewTimer(c.opts.LoginTimeout)
	defer t.Stop()
	select {
	case cb := <-p.result:
		return cb.res, cb.err
	case <-t.C:
		return nil, fmt.Errorf("nobody completed the login within %v", c.opts.LoginTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Callback serves the redirect of a login the Client started
// (CallbackURL). It answers 400 to a redirect whose state is not that of
// the waiting login (none waits, another's, already used, expired); else
// it hands the code to the login, waits for the exchange, and answers
// 200 once the tokens are stored, or 400 with why the login failed (the
// authorization server refused, the RFC 9207 iss is wrong, the exchange
// failed). The pages hold no token, code or state.
func (c *Client) Callback(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	c.pmu.Lock()
	p := c.pending
	var why string
	switch {
	case p == nil || p.state == "":
		why = "no login is waiting here (it ended, expired, or was never started)"
	case subtle.ConstantTimeCompare([]byte(state), []byte(p.state)) != 1:
		why = "the state is not the waiting login's"
	case p.claimed:
		why = "this login's redirect was used already"
	case time.Now().After(p.expires):
		why = "the login expired"
		p.claimed = true
		p.result <- callback{err: errors.New("the login expired")}
	default:
		p.claimed = true
	}
	c.pmu.Unlock()
	if why != "" {
		c.log.Warn("oauth: a login redirect was refused", "url", c.opts.URL, "reason", why)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<p>Switchboard: %s. Retry the request to get a new login link.</p>", html.EscapeString(why))
		return
	}
	cb := callback{res: &auth.AuthorizationResult{Code: q.Get("code"), State: state, Iss: q.Get("iss")}}
	if e := q.Get("error"); e != "" {
		cb.err = fmt.Errorf("the authorization server refused: %s", e)
	}
	p.result <- cb // cap 1; only the claiming Callback sends
	select {
	case <-p.done:
	case <-r.Context().Done():
		return
	}
	if p.err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<p>Switchboard: the login failed: %s</p>", html.EscapeString(errSummary(p.err)))
		return
	}
	fmt.Fprint(w, "<p>Switchboard: authorized. You can close this window and retry.</p>")
}
