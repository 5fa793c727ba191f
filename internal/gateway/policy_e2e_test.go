package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Per-client policy: a client sees only its tools, prompts and resources,
// on lists and calls alike; read-only clients only readOnlyHint tools; a
// session serves only the client that opened it.

const (
	limitedToken = "limited-token-0123456789"
	readerToken  = "reader-token-0123456789"
	fullToken    = "full-token-0123456789"
)

func policyTop() string {
	return `max_sessions: 50
timeout: 20s
clients:
  limited:
    tokens: ["sha256:` + sha256Hex(limitedToken) + `"]
    destinations: [alpha]
    namespaces: [pair]
    tools: {deny: ["*secret*", "beta__b2"]}
    prompts: {deny: ["*"]}
    resources: {deny: ["alpha://*"]}
  reader:
    tokens: ["sha256:` + sha256Hex(readerToken) + `"]
    destinations: [alpha]
    read_only: true
  full:
    tokens: ["sha256:` + sha256Hex(fullToken) + `"]
    destinations: ["*"]
    namespaces: ["*"]
namespaces:
  pair: {servers: [alpha, beta]}
`
}

// connectAs opens a go-sdk session at path with tok (protocol 2025-11-25).
func connectAs(ctx context.Context, t *testing.T, h *harness, path, tok string) *mcp.ClientSession {
	t.Helper()
	return connectVersion(ctx, t, h, path, tok, legacy)
}

// connectVersion is connectAs with a protocol version ("" the SDK's
// latest: 2026-07-28, stateless).
func connectVersion(ctx context.Context, t *testing.T, h *harness, path, tok, version string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerRT{hdr: http.Header{"Authorization": {"Bearer " + tok}}, next: http.DefaultTransport}}
	cs, err := newInteropClient().Client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url(path), HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", path, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestPolicyListsAndCalls(t *testing.T) {
	h := startAgg(t, policyTop(), "", aggDest("alpha", "a1", "secret1", "ro_a"), aggDest("beta", "b1", "b2"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	call := func(cs *mcp.ClientSession, name string) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err == nil && res.IsError {
			return errString("tool error")
		}
		return err
	}

	lim := connectAs(ctx, t, h, "/alpha/mcp", limitedToken)
	wantNames(t, "limited's tools on alpha", aggTools(ctx, t, lim), "a1", "ro_a")
	if err := call(lim, "a1"); err != nil {
		t.Errorf("limited calls a1: %v", err)
	}
	if err := call(lim, "secret1"); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
		t.Errorf("limited calls hidden secret1: %v, want Unknown tool", err)
	}
	if ps, err := lim.ListPrompts(ctx, nil); err != nil || len(ps.Prompts) != 0 {
		t.Errorf("limited's prompts: %v %+v, want none", err, ps)
	}
	if _, err := lim.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); err == nil {
		t.Errorf("limited got a hidden prompt")
	}
	if rs, err := lim.ListResources(ctx, nil); err != nil || len(rs.Resources) != 0 {
		t.Errorf("limited's resources: %v %+v, want none", err, rs)
	}
	if _, err := lim.ReadResource(ctx, &mcp.ReadResourceParams{URI: "alpha://readme"}); err == nil {
		t.Errorf("limited read a hidden resource")
	}

	// Through the namespace, only the members whose destinations it is
	// granted (alpha, not beta), under the same tool rules.
	pair := connectAs(ctx, t, h, "/mcp/pair", limitedToken)
	wantNames(t, "limited's tools on pair", aggTools(ctx, t, pair), "alpha__a1", "alpha__ro_a")
	for _, n := range []string{"beta__b2", "beta__b1", "alpha__secret1"} {
		if err := call(pair, n); err == nil {
			t.Errorf("limited called hidden %s through the namespace", n)
		}
	}
	if err := call(pair, "alpha__a1"); err != nil {
		t.Errorf("limited calls alpha__a1: %v", err)
	}

	// The legacy SSE front of the namespace, the same rules.
	hc := &http.Client{Transport: headerRT{hdr: http.Header{"Authorization": {"Bearer " + limitedToken}}, next: http.DefaultTransport}}
	sse, err := newInteropClient().Client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: h.url("/sse/pair"), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect /sse/pair: %v", err)
	}
	defer sse.Close()
	if got := aggTools(ctx, t, sse); slices.Contains(got, "alpha__secret1") || !slices.Contains(got, "alpha__a1") {
		t.Errorf("limited's tools on /sse/pair = %v", got)
	}
	if err := call(sse, "alpha__secret1"); err == nil {
		t.Errorf("limited called a hidden tool over legacy SSE")
	}

	// A read-only client: only readOnlyHint tools, even called unlisted.
	rd := connectAs(ctx, t, h, "/alpha/mcp", readerToken)
	if err := call(rd, "ro_a"); err != nil {
		t.Errorf("reader calls ro_a before listing: %v", err)
	}
	if err := call(rd, "a1"); err == nil {
		t.Errorf("reader called a1, which is not read-only")
	}
	wantNames(t, "reader's tools", aggTools(ctx, t, rd), "ro_a")

	// The same rules for 2026-07-28 (stateless) requests.
	lim26 := connectVersion(ctx, t, h, "/alpha/mcp", limitedToken, "")
	wantNames(t, "limited's tools on alpha, 2026-07-28", aggTools(ctx, t, lim26), "a1", "ro_a")
	if err := call(lim26, "secret1"); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
		t.Errorf("limited calls hidden secret1 (2026-07-28): %v", err)
	}
	rd26 := connectVersion(ctx, t, h, "/alpha/mcp", readerToken, "")
	if err := call(rd26, "a1"); err == nil {
		t.Errorf("reader called a1 (2026-07-28)")
	}
	if err := call(rd26, "ro_a"); err != nil {
		t.Errorf("reader calls ro_a (2026-07-28): %v", err)
	}

	full := connectAs(ctx, t, h, "/alpha/mcp", fullToken)
	wantNames(t, "full's tools", aggTools(ctx, t, full), "a1", "ro_a", "secret1")

	// Another client's token on limited's session is refused, as if the
	// session did not exist.
	r := h.do("POST", "/alpha/mcp", rpc(9, "tools/list", nil), "Mcp-Session-Id", lim.ID(), "Mcp-Protocol-Version", legacy,
		"Authorization", "Bearer "+fullToken)
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "session not found") {
		t.Errorf("full on limited's session: %s", r)
	}
	// Nor may it open the session's listen stream or end the session.
	for _, m := range []string{"GET", "DELETE"} {
		if r := h.do(m, "/alpha/mcp", nil, "Mcp-Session-Id", lim.ID(), "Mcp-Protocol-Version", legacy, "Authorization", "Bearer "+fullToken); r.status != http.StatusNotFound {
			t.Errorf("%s on limited's session as full: %s, want 404", m, r)
		}
	}
	if r := h.do("POST", "/alpha/mcp", rpc(8, "tools/list", nil), "Mcp-Session-Id", lim.ID(), "Mcp-Protocol-Version", legacy); r.status != http.StatusUnauthorized {
		t.Errorf("limited's session without credentials: %d, want 401", r.status)
	}
	if _, err := lim.ListTools(ctx, nil); err != nil {
		t.Errorf("limited's own session after the attempts: %v", err)
	}
	assertNoTokens(t, h, limitedToken, readerToken, fullToken)
}

type errString string

func (e errString) Error() string { return string(e) }
