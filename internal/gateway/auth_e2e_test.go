package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Static-token clients on every front: 401 without or with a wrong
// credential, 403 outside the client's scope, 200 inside it.

const (
	aliceToken = "alice-Secret-token-0123456789abcdef"
	bobToken   = "bob-Secret-token-fedcba9876543210"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// authTop is a config with two clients: alice (a ${VAR} token) uses alpha,
// namespace pair and the status pages; bob (a hashed token) uses beta and
// the default view.
func authTop(extra string) string {
	return `max_sessions: 50
timeout: 20s
auth: {required: true, identity_header: X-Switchboard-Client}
clients:
  alice:
    tokens: ["${SWITCHBOARD_TEST_ALICE_TOKEN}"]
    destinations: [alpha]
    namespaces: [pair]
    status: true
  bob:
    tokens: ["sha256:` + sha256Hex(bobToken) + `"]
    destinations: [beta]
    namespaces: [mcp]
namespaces:
  pair: {servers: [alpha, beta]}
` + extra
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestAuthStaticTokensEveryFront(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_ALICE_TOKEN", aliceToken)
	h := startAgg(t, authTop(""), "", aggDest("alpha", "a1", "a2"), aggDest("beta", "b1"))

	type front struct {
		method, path string
		body         []byte
		hdr          []string
	}
	init := rpc(0, "initialize", initParams(""))
	post := func(p string) front { return front{"POST", p, init, nil} }
	get := func(p string) front { return front{"GET", p, nil, nil} }
	cases := []struct {
		f            front
		okAs, denyAs string // client served 200, client answered 403
	}{
		{post("/alpha/mcp"), aliceToken, bobToken},
		{post("/beta/mcp"), bobToken, aliceToken},
		{get("/alpha/sse"), aliceToken, bobToken},
		{post("/mcp"), bobToken, aliceToken},
		{post("/mcp/pair"), aliceToken, bobToken},
		{front{"POST", "/mcp", init, []string{"X-Namespace", "pair"}}, aliceToken, bobToken},
		{get("/sse"), bobToken, aliceToken},
		{get("/sse/pair"), aliceToken, bobToken},
		{get("/ui"), aliceToken, bobToken},
		{get("/ui/status.json"), aliceToken, bobToken},
		{get("/metrics"), aliceToken, bobToken},
		{get("/healthz"), aliceToken, bobToken},
	}
	do := func(f front, hdr ...string) *resp {
		t.Helper()
		all := append(slices.Clone(f.hdr), hdr...)
		if f.method == "GET" && (strings.HasSuffix(f.path, "/sse") || strings.HasPrefix(f.path, "/sse")) {
			st := h.open(f.method, f.path, nil, all...)
			st.close()
			return &resp{status: st.status, header: st.header}
		}
		return h.do(f.method, f.path, f.body, all...)
	}
	for _, c := range cases {
		name := c.f.method + " " + c.f.path + strings.Join(c.f.hdr, ":")
		if r := do(c.f); r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="switchboard"`) {
			t.Errorf("%s without credentials: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", name, r.status, r.header.Get("WWW-Authenticate"))
		}
		if r := do(c.f, bearer("not-a-token")...); r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s with a wrong token: %d, WWW-Authenticate %q; want 401 invalid_token", name, r.status, r.header.Get("WWW-Authenticate"))
		}
		if r := do(c.f, "X-API-Key", c.denyAs); r.status != http.StatusForbidden {
			t.Errorf("%s as the other client: %d, want 403", name, r.status)
		}
		if r := do(c.f, bearer(c.okAs)...); r.status != http.StatusOK {
			t.Errorf("%s as its client: %d, want 200", name, r.status)
		}
	}
	// The legacy message endpoint and a malformed header.
	if r := h.do("POST", "/alpha/message?session_id=x", rpc(1, "ping", nil)); r.status != http.StatusUnauthorized {
		t.Errorf("legacy message POST without credentials: %d, want 401", r.status)
	}
	if r := h.do("POST", "/alpha/mcp", init, "Authorization", "Basic "+aliceToken); r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_request") {
		t.Errorf("Basic scheme: %d %q, want 401 invalid_request", r.status, r.header.Get("WWW-Authenticate"))
	}
	// /health and the metadata (404 without oauth) need no credentials.
	if r := h.do("GET", "/health", nil); r.status != http.StatusOK {
		t.Errorf("/health: %d", r.status)
	}
	if r := h.do("GET", "/.well-known/oauth-protected-resource", nil); r.status != http.StatusNotFound {
		t.Errorf("metadata without oauth: %d, want 404", r.status)
	}

	// A client calls its tools through the go-sdk client.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	hc := &http.Client{Transport: headerRT{hdr: http.Header{"Authorization": {"Bearer " + aliceToken}}, next: http.DefaultTransport}}
	cs, err := newInteropClient().Client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url("/alpha/mcp"), HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a1", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("alice calls a1: %v %+v", err, res)
	}

	assertNoTokens(t, h, aliceToken, bobToken)
	var sawAlice, sawBob bool
	for _, l := range auditRaw(h) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		sawAlice = sawAlice || m["client"] == "alice"
		sawBob = sawBob || m["client"] == "bob"
	}
	if !sawAlice || !sawBob {
		t.Errorf("audit log names alice %v, bob %v; want both", sawAlice, sawBob)
	}
}

// TestAuthOffByDefault: no auth block, no clients: everything is served
// without credentials, as before.
func TestAuthOffByDefault(t *testing.T) {
	h := startAgg(t, "", "", aggDest("alpha", "a1"))
	if r := h.do("POST", "/alpha/mcp", rpc(0, "initialize", initParams(""))); r.status != http.StatusOK || r.header.Get("WWW-Authenticate") != "" {
		t.Errorf("initialize without auth configured: %s", r)
	}
	if r := h.do("GET", "/metrics", nil); r.status != http.StatusOK {
		t.Errorf("/metrics: %d", r.status)
	}
}

// auditRaw returns the audit log's lines.
func auditRaw(h *harness) []string {
	h.audit.mu.Lock()
	defer h.audit.mu.Unlock()
	out := make([]string, 0, len(h.audit.lines))
	for _, l := range h.audit.lines {
		out = append(out, string(l))
	}
	return out
}

// assertNoTokens greps the audit log and the operational log for the
// secrets.
func assertNoTokens(t *testing.T, h *harness, secrets ...string) {
	t.Helper()
	var all strings.Builder
	for _, l := range auditRaw(h) {
		all.WriteString(l)
		all.WriteByte('\n')
	}
	for _, r := range h.logs.all() {
		all.WriteString(r.Msg + " " + r.Attrs + "\n")
	}
	if all.Len() == 0 {
		t.Fatal("no log lines to check")
	}
	for _, s := range secrets {
		if strings.Contains(all.String(), s) {
			t.Errorf("a log contains the token %q", s)
		}
	}
}
