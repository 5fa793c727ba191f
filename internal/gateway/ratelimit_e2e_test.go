package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	sbmcp "github.com/switchboard-mcp/switchboard/internal/mcp"
)

// Rate limits: a client over its bucket gets 429 with Retry-After while
// other clients are served; a tool over its destination's bucket gets a
// JSON-RPC error carrying retryAfter, other tools are served.

const (
	slowToken  = "slow-token-0123456789"
	otherToken = "other-token-0123456789"
	fastToken  = "fast-token-0123456789"
)

func TestRateLimits(t *testing.T) {
	// rate 0.01/s: no token comes back during the test, so the counts are
	// exact however slow the machine.
	top := `max_sessions: 50
timeout: 20s
clients:
  slow:
    tokens: ["sha256:` + sha256Hex(slowToken) + `"]
    destinations: ["*"]
    rate_limit: {rate: 0.01, burst: 5}
  other:
    tokens: ["sha256:` + sha256Hex(otherToken) + `"]
    destinations: ["*"]
    rate_limit: {rate: 0.01, burst: 5}
  fast:
    tokens: ["sha256:` + sha256Hex(fastToken) + `"]
    destinations: ["*"]
limits:
  destinations:
    beta:
      tools:
        b1: {rate: 0.01, burst: 2}
`
	h := startAgg(t, top, "", aggDest("alpha", "a1"), aggDest("beta", "b1", "b2"))
	init := rpc(0, "initialize", initParams(""))
	burst := func(tok string, n int) (ok, limited int) {
		t.Helper()
		for range n {
			r := h.do("POST", "/alpha/mcp", init, bearer(tok)...)
			switch r.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
				secs, err := strconv.Atoi(r.header.Get("Retry-After"))
				var body struct {
					Error struct {
						Data struct {
							RetryAfter int `json:"retryAfter"`
						} `json:"data"`
					} `json:"error"`
				}
				_ = json.Unmarshal(r.body, &body)
				if err != nil || secs < 1 || body.Error.Data.RetryAfter != secs {
					t.Errorf("429 with Retry-After %q and body %s", r.header.Get("Retry-After"), r.body)
				}
			default:
				t.Errorf("unexpected answer %s", r)
			}
		}
		return ok, limited
	}
	if ok, limited := burst(slowToken, 12); ok != 5 || limited != 7 {
		t.Errorf("slow's burst of 12: %d served, %d limited; want 5 and 7", ok, limited)
	}
	// Neither another limited client nor an unlimited one is slowed.
	if ok, limited := burst(otherToken, 5); ok != 5 || limited != 0 {
		t.Errorf("other's 5 after slow's burst: %d served, %d limited", ok, limited)
	}
	if ok, limited := burst(fastToken, 20); ok != 20 || limited != 0 {
		t.Errorf("fast's 20: %d served, %d limited", ok, limited)
	}
	if r := h.do("POST", "/alpha/mcp", init, bearer(slowToken)...); r.status != http.StatusTooManyRequests {
		t.Errorf("slow after the others: %d, want still 429", r.status)
	}

	// Per tool: b1 has a bucket of 2; b2 none.
	r := h.do("POST", "/beta/mcp", init, bearer(fastToken)...)
	s := &sess{h: h, dest: "beta", id: r.header.Get("Mcp-Session-Id")}
	auth := bearer(fastToken)
	if n := s.post(rpc(nil, "notifications/initialized", nil), auth...); n.status != http.StatusAccepted {
		t.Fatalf("initialized: %s", n)
	}
	for i := range 4 {
		r := s.call("tools/call", toolParams("b1", map[string]any{}, nil), auth...)
		m := r.last(t)
		if i < 2 {
			if m.Error != nil {
				t.Errorf("b1 call %d: %s", i, r)
			}
			continue
		}
		var data struct {
			RetryAfter int `json:"retryAfter"`
		}
		if m.Error == nil || m.Error.Code != -32007 || json.Unmarshal(m.Error.Data, &data) != nil || data.RetryAfter < 1 {
			t.Errorf("b1 call %d over the limit: %s, want error -32007 with retryAfter", i, r)
		}
	}
	for range 3 {
		if m := s.call("tools/call", toolParams("b2", map[string]any{}, nil), auth...).last(t); m.Error != nil {
			t.Errorf("b2 was limited: %+v", m.Error)
		}
	}

	// A go-sdk client over b1's limit gets the refusal as a JSON-RPC error
	// of its code, not as its connection closed (what the go-sdk makes of
	// its own -32003 and -32004), and its session goes on.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	hc := &http.Client{Transport: headerRT{hdr: http.Header{"Authorization": {"Bearer " + fastToken}}, next: http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ratelimited", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: h.url("/beta/mcp"), HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "b1", Arguments: map[string]any{}})
	var we *sdkjsonrpc.Error
	if !errors.As(err, &we) || we.Code != sbmcp.CodeRequestRefused || errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("go-sdk client over b1's limit: %v; want JSON-RPC error %d, not a closed connection", err, sbmcp.CodeRequestRefused)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b2", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("go-sdk client's b2 after the refusal: %v %+v", err, res)
	}
	assertNoTokens(t, h, slowToken, otherToken, fastToken)
}
