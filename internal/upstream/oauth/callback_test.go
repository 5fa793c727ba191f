package oauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth/oauthtest"
)

// gatewayClient is a Client that starts logins itself, its callback
// served on a loopback listener of its own (the gateway's, in the test).
func gatewayClient(t *testing.T, as *oauthtest.Server, logs io.Writer) (*Client, *MemoryStore, string) {
	t.Helper()
	mux := http.NewServeMux()
	cb := httptest.NewServer(mux)
	t.Cleanup(cb.Close)
	store := &MemoryStore{}
	c, err := New(Options{URL: as.MCPURL, Store: store, Key: "remote", CallbackURL: cb.URL + "/oauth/callback/remote",
		HTTPClient: &http.Client{Timeout: 30 * time.Second}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mux.HandleFunc("/oauth/callback/remote", c.Callback)
	return c, store, cb.URL + "/oauth/callback/remote"
}

// list sends a tools/list through the Client's transport.
func list(ctx context.Context, c *Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return (&http.Client{Transport: c.Transport(nil)}).Do(req)
}

// loginURL makes a request that needs a login and returns the error
// that carries the login's URL.
func loginURL(ctx context.Context, t *testing.T, c *Client, u string) *LoginRequiredError {
	t.Helper()
	resp, err := list(ctx, c, u)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a request without a login answered %s, want a LoginRequiredError", resp.Status)
	}
	var le *LoginRequiredError
	if !errors.As(err, &le) || !errors.Is(err, ErrNeedsLogin) || le.URL == "" || le.ID == "" {
		t.Fatalf("err = %v, want a LoginRequiredError wrapping ErrNeedsLogin", err)
	}
	if strings.Contains(err.Error(), le.URL) {
		t.Errorf("the error's text holds the authorization URL (errors get logged): %v", err)
	}
	return le
}

// redirect follows the authorization URL to the authorization server,
// which approves at once, and returns where it sends the browser back
// (not followed).
func redirect(t *testing.T, authURL string) *url.URL {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("the authorization server answered %s without a redirect: %v", resp.Status, err)
	}
	return loc
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCallbackLogin: a request that needs a login gets the authorization
// URL (requests meanwhile get the same one: one login); a redirect with
// another state is refused and leaves the login waiting; the right one
// completes it (the page answers once the tokens are stored, so the
// retried request succeeds); the same redirect again is refused (the
// state is used up). No token reaches the log.
func TestCallbackLogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	as := oauthtest.Start(t)
	var logs syncLog
	c, store, cbURL := gatewayClient(t, as, &logs)

	le := loginURL(ctx, t, c, as.MCPURL)
	var wg sync.WaitGroup
	ids := make(chan string, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := list(ctx, c, as.MCPURL)
			var other *LoginRequiredError
			if errors.As(err, &other) {
				ids <- other.ID
			} else {
				ids <- fmt.Sprint("err: ", err)
			}
		}()
	}
	wg.Wait()
	close(ids)
	for id := range ids {
		if id != le.ID {
			t.Errorf("a concurrent request got login %q, want the waiting one %q", id, le.ID)
		}
	}

	back := redirect(t, le.URL)
	if got := back.Scheme + "://" + back.Host + back.Path; got != cbURL {
		t.Fatalf("the authorization server redirects to %s, want the callback %s", got, cbURL)
	}
	forged := *back
	q := forged.Query()
	q.Set("state", "not-the-state")
	forged.RawQuery = q.Encode()
	if code, body := get(t, forged.String()); code != http.StatusBadRequest || !strings.Contains(body, "state") {
		t.Errorf("a redirect with another state: %d %q, want 400 naming the state", code, body)
	}
	if code, body := get(t, back.String()); code != http.StatusOK || !strings.Contains(body, "authorized") {
		t.Fatalf("the redirect: %d %q, want 200 authorized", code, body)
	}
	if rec, _ := store.Load("remote"); rec == nil || rec.Token == nil || rec.Token.AccessToken == "" {
		t.Fatal("no tokens stored once the callback page answered")
	}
	resp, err := list(ctx, c, as.MCPURL)
	if err != nil {
		t.Fatalf("the request retried after the login: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the request retried after the login: %s", resp.Status)
	}
	if code, _ := get(t, back.String()); code != http.StatusBadRequest {
		t.Errorf("the same redirect again: %d, want 400 (the state is used once)", code)
	}
	if n := as.Logins.Load(); n != 1 {
		t.Errorf("%d code exchanges, want 1", n)
	}
	for _, s := range as.Secrets() {
		if strings.Contains(logs.String(), s) {
			t.Errorf("a token or secret is in the log")
		}
	}
	if s := c.Status(); s.State != StateReady {
		t.Errorf("state %q (%s) after the login, want ok", s.State, s.Reason)
	}
}

// TestCallbackRefused: a redirect that comes after the login expired,
// or with an RFC 9207 iss the authorization server does not send (a
// mix-up), is refused, and no code is exchanged; the next request starts
// another login.
func TestCallbackRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	as := oauthtest.Start(t)
	var logs syncLog
	c, store, _ := gatewayClient(t, as, &logs)

	// Expired.
	le := loginURL(ctx, t, c, as.MCPURL)
	back := redirect(t, le.URL)
	c.pmu.Lock()
	p := c.pending
	p.expires = time.Now().Add(-time.Second)
	c.pmu.Unlock()
	if code, body := get(t, back.String()); code != http.StatusBadRequest || !strings.Contains(body, "expired") {
		t.Errorf("a redirect after the login expired: %d %q, want 400 expired", code, body)
	}
	<-p.done
	if p.err == nil {
		t.Error("the expired login succeeded")
	}

	// A wrong iss: the next request starts another login.
	le2 := loginURL(ctx, t, c, as.MCPURL)
	if le2.ID == le.ID {
		t.Fatal("the request after a failed login got the failed one's URL")
	}
	back = redirect(t, le2.URL)
	q := back.Query()
	q.Set("iss", "https://evil.example.com")
	back.RawQuery = q.Encode()
	if code, body := get(t, back.String()); code != http.StatusBadRequest || !strings.Contains(body, "failed") {
		t.Errorf("a redirect with a wrong iss: %d %q, want 400 failed", code, body)
	}
	if n := as.Logins.Load(); n != 0 {
		t.Errorf("%d codes exchanged, want none", n)
	}
	if rec, _ := store.Load("remote"); rec != nil && rec.Token != nil {
		t.Error("tokens stored by a refused login")
	}
	if code, _ := get(t, back.String()); code != http.StatusBadRequest {
		t.Errorf("a redirect when no login waits: %d, want 400", code)
	}
	if s := c.Status(); s.State != StateNeedsLogin {
		t.Errorf("state %q, want needs_login", s.State)
	}
}

// syncLog is a log sink safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
