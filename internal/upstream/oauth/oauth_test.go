package oauth_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth/oauthtest"
)

// browse is a Prompt that plays the person: it follows the authorization
// URL (the test server approves at once) to the loopback redirect.
func browse(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return errors.New("the redirect answered " + resp.Status)
	}
	return nil
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func connect(ctx context.Context, t *testing.T, url string, rt http.RoundTripper) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}, nil)
}

func echo(ctx context.Context, cs *mcp.ClientSession, text string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != text {
		return errors.New("unexpected echo result")
	}
	return nil
}

// callConcurrently makes n echo calls at once, each on its own session
// (sessions share the Client, as a destination's do), and returns the
// first error.
func callConcurrently(ctx context.Context, t *testing.T, n int, url string, rt http.RoundTripper, sessions []*mcp.ClientSession) error {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- echo(ctx, sessions[i], "hi")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestLoginRefreshRevoke: a login by the authorization code flow (DCR,
// PKCE, resource) stores the tokens in a 0600 file; calls carry them; a
// token the server stops accepting is refreshed exactly once under 16
// concurrent calls, and so is one found expired; a revoked refresh token
// turns the state to needs_login, and a login by another Client on the
// same file (auth login) brings it back; no token reaches the log.
func TestLoginRefreshRevoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	as := oauthtest.Start(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store := oauth.FileStore{Dir: t.TempDir() + "/oauth"}

	// The gateway's Client: no Prompt.
	gw, err := oauth.New(oauth.Options{URL: as.MCPURL, Store: store, Key: "remote", Logger: log, LoginHint: "switchboard auth login remote"})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	rt := gw.Transport(nil)
	_, err = connect(ctx, t, as.MCPURL, rt)
	if !errors.Is(err, oauth.ErrNeedsLogin) || !strings.Contains(err.Error(), "switchboard auth login remote") {
		t.Fatalf("connect before a login: %v; want ErrNeedsLogin with the hint", err)
	}
	if st := gw.Status(); st.State != oauth.StateNeedsLogin {
		t.Fatalf("state before login %q, want needs_login", st.State)
	}

	// `auth login`: another Client on the same store.
	login := func() {
		t.Helper()
		lc, err := oauth.New(oauth.Options{URL: as.MCPURL, Store: store, Key: "remote", Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		defer lc.Close()
		if err := lc.Login(ctx, browse); err != nil {
			t.Fatalf("Login: %v", err)
		}
	}
	login()
	fi, err := os.Stat(store.Path("remote"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if st := gw.Status(); st.State != oauth.StateReady || !st.Refreshable {
		t.Fatalf("state after login %+v, want ok with a refresh token", st)
	}
	const n = 16
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		if sessions[i], err = connect(ctx, t, as.MCPURL, rt); err != nil {
			t.Fatalf("connect %d: %v", i, err)
		}
		defer sessions[i].Close()
	}
	if err := callConcurrently(ctx, t, n, as.MCPURL, rt, sessions); err != nil {
		t.Fatal(err)
	}
	if got := as.Refreshes.Load(); got != 0 {
		t.Fatalf("%d refreshes before any expiry", got)
	}

	t.Log("logged in, 16 calls done")
	// The server stops accepting the access token (revoked, expired by its
	// clock): 16 calls refused with 401 cause one refresh.
	as.ExpireAccessTokens()
	if err := callConcurrently(ctx, t, n, as.MCPURL, rt, sessions); err != nil {
		t.Fatalf("calls after the server expired the token: %v", err)
	}
	if got := as.Refreshes.Load(); got != 1 {
		t.Fatalf("%d refreshes after a 401 under %d concurrent calls, want 1", got, n)
	}

	t.Log("refreshed on 401")
	// The token is found expired before it is sent: its expiry is moved
	// into the past in the file (as time passing would), which the Client
	// reloads; 16 concurrent calls refresh it once.
	rec, err := store.Load("remote")
	if err != nil || rec == nil {
		t.Fatalf("Load: %v", err)
	}
	rec.Token.Expiry = time.Now().Add(-time.Minute)
	if err := store.Save("remote", rec); err != nil {
		t.Fatal(err)
	}
	as.ExpireAccessTokens()
	if err := callConcurrently(ctx, t, n, as.MCPURL, rt, sessions); err != nil {
		t.Fatalf("calls with an expired token: %v", err)
	}
	if got := as.Refreshes.Load(); got != 2 {
		t.Fatalf("%d refreshes in all after an expiry under %d concurrent calls, want 2", got, n)
	}

	t.Log("refreshed on expiry")
	// The refresh token is revoked: needs_login, and calls fail saying so.
	as.RevokeRefreshTokens()
	as.ExpireAccessTokens()
	if err := echo(ctx, sessions[0], "x"); err == nil {
		t.Fatal("a call succeeded with a revoked refresh token")
	}
	if st := gw.Status(); st.State != oauth.StateNeedsLogin || !strings.Contains(st.Reason, "refresh token was refused") {
		t.Fatalf("state after revocation %+v, want needs_login (refresh token refused)", st)
	}

	t.Log("revoked")
	// A new login elsewhere is picked up without a restart.
	login()
	if st := gw.Status(); st.State != oauth.StateReady {
		t.Fatalf("state after a new login %+v, want ok", st)
	}
	cs, err := connect(ctx, t, as.MCPURL, rt)
	if err != nil {
		t.Fatalf("connect after the new login: %v", err)
	}
	defer cs.Close()
	if err := echo(ctx, cs, "again"); err != nil {
		t.Fatal(err)
	}

	out := logs.String()
	for _, s := range as.Secrets() {
		if strings.Contains(out, s) {
			t.Fatalf("a token or secret issued by the server is in the log:\n%s", out)
		}
	}
	if !strings.Contains(out, "token refreshed") || !strings.Contains(out, "login needed") {
		t.Errorf("the log lacks the state changes:\n%s", out)
	}
}

// TestClientCredentials: a machine-to-machine client gets its token with
// the client credentials grant on the first 401, with no login.
func TestClientCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := oauthtest.Start(t)
	as.AddClient("machine", "machine-secret-123")
	c, err := oauth.New(oauth.Options{URL: as.MCPURL, Grant: oauth.GrantClientCredentials, ClientID: "machine", ClientSecret: "machine-secret-123"})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := connect(ctx, t, as.MCPURL, c.Transport(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := echo(ctx, cs, "m2m"); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st.State != oauth.StateReady {
		t.Fatalf("state %+v, want ok", st)
	}
	if _, err := oauth.New(oauth.Options{URL: as.MCPURL, Grant: oauth.GrantClientCredentials}); err == nil {
		t.Fatal("client_credentials without a client id and secret was accepted")
	}
}

// TestLoginNothingToLogInTo: a login against a URL that does not answer
// 401 says so.
func TestLoginNothingToLogInTo(t *testing.T) {
	ctx := context.Background()
	as := oauthtest.Start(t)
	c, err := oauth.New(oauth.Options{URL: as.URL + "/.well-known/oauth-authorization-server"})
	if err != nil {
		t.Fatal(err)
	}
	// A GET-only JSON endpoint answers the probe POST with 405: not a 401.
	err = c.Login(ctx, browse)
	if err == nil || !strings.Contains(err.Error(), "not 401") {
		t.Fatalf("Login against an unprotected URL: %v", err)
	}
	// A server that answers 200 and publishes no metadata.
	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer open.Close()
	c, err = oauth.New(oauth.Options{URL: open.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Login(ctx, browse); err == nil {
		t.Fatal("Login to a server with no authorization metadata succeeded")
	}
}
