package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth/oauthtest"
)

// bearer sets a static token on every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestGatewayOAuthCallbackE2E: a destination with oauth.callback_url and
// no login. A client (inbound auth on) that did not declare
// elicitation.url opens a session: its initialize is answered -32008 with
// the authorization URL in the message and data; the person's browser
// follows it, the authorization server redirects to the gateway's
// /oauth/callback/remote (no credentials needed there), which answers
// once the tokens are stored; the client's next initialize and call go
// through. The same redirect again is refused. No token, secret or
// state is in the gateway's log.
func TestGatewayOAuthCallbackE2E(t *testing.T) {
	bin := buildBinary(t)
	as := oauthtest.Start(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	const clientToken = "e2e-client-token-7f3a"
	t.Setenv("SB_E2E_CLIENT_TOKEN", clientToken)
	cfg := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfg, []byte("listen: "+listen+"\naudit: {path: audit.jsonl}\nclients:\n  ci:\n    tokens: [\"${SB_E2E_CLIENT_TOKEN}\"]\n"+
		"    destinations: [remote]\ndestinations:\n  remote:\n    type: streamable_http\n    url: "+as.MCPURL+
		"\n    protocol: legacy\n    oauth:\n      token_dir: "+filepath.Join(dir, "tokens")+
		"\n      callback_url: http://"+listen+"/oauth/callback/remote\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs peertest.Buffer
	base := startServe(t, bin, cfg, &logs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/remote/mcp",
			HTTPClient: &http.Client{Transport: bearer(clientToken)}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	}

	// The first initialize, on the wire: a client without elicitation.url.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/remote/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := bearer(clientToken).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Error *struct {
			Code    int
			Message string
			Data    struct {
				Elicitations []struct {
					Mode, URL, ElicitationID string
				} `json:"elicitations"`
			}
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || answer.Error == nil {
		t.Fatalf("a session without a login: %s, %v; want a JSON-RPC error", resp.Status, err)
	}
	e := answer.Error
	if e.Code != -32008 || !strings.Contains(e.Message, "open "+as.URL+"/authorize?") || len(e.Data.Elicitations) != 1 ||
		e.Data.Elicitations[0].Mode != "url" || e.Data.Elicitations[0].ElicitationID == "" {
		t.Fatalf("a session without a login: %+v; want -32008 naming the authorization URL, with one URL elicitation", e)
	}
	data := e.Data
	authURL := data.Elicitations[0].URL
	au, _ := url.Parse(authURL)
	state := au.Query().Get("state")

	// The browser: to the authorization server, then to the gateway.
	var back string
	hc := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.Contains(r.URL.Path, "/oauth/callback/") {
			back = r.URL.String()
		}
		return nil
	}}
	resp, err = hc.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "authorized") || back == "" {
		t.Fatalf("the login's redirect: %s %q (via %q); want 200 authorized from the gateway", resp.Status, body, back)
	}

	cs, err := connect()
	if err != nil {
		t.Fatalf("a session after the login: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("a call after the login: %v %+v", err, res)
	}
	resp, err = http.Get(back)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the same redirect again: %s, want 400", resp.Status)
	}
	out := logs.String()
	for _, s := range append(as.Secrets(), clientToken, state) {
		if strings.Contains(out, s) {
			t.Errorf("the gateway's log holds a token, secret or the login's state")
		}
	}
}
