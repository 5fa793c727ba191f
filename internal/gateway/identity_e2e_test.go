package gateway_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The caller's identity goes upstream in the configured header and _meta
// key, never its
// token: not even a destination that forwards the client's other headers
// sees the Authorization the client sent, and a client cannot forge the
// identity header.
func TestIdentityHeaderUpstream(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			who, _ := req.Params.Meta["dev.switchboard/client"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "caller=" + who}}}, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		sdk.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); <-done })

	t.Setenv("SWITCHBOARD_TEST_ALICE_TOKEN", aliceToken)
	top := `timeout: 20s
auth: {identity_header: X-Switchboard-Client, identity_meta: dev.switchboard/client}
clients:
  alice:
    tokens: ["${SWITCHBOARD_TEST_ALICE_TOKEN}"]
    destinations: [up]
`
	h := startRemote(t, top, remoteDest{name: "up", typ: "streamable_http", url: "http://" + ln.Addr().String() + "/mcp",
		extra: "forward_headers: [X-Request-Id, X-Switchboard-Client, X-Api-Key-Extra]"})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	hc := &http.Client{Transport: headerRT{hdr: http.Header{
		"Authorization": {"Bearer " + aliceToken}, "X-Switchboard-Client": {"admin"}, "X-Request-Id": {"req-1"}}, next: http.DefaultTransport}}
	cs, err := newInteropClient().Client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url("/up/mcp"), HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// The client's own value of the _meta key is replaced too.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t", Arguments: map[string]any{},
		Meta: mcp.Meta{"dev.switchboard/client": "admin", "other": "kept"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "caller=alice" {
		t.Errorf("the upstream saw %q in _meta, want caller=alice", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, hdr := range seen {
		if got := hdr.Values("X-Switchboard-Client"); !slices.Equal(got, []string{"alice"}) {
			t.Errorf("upstream X-Switchboard-Client = %q, want [alice]", got)
		}
		for k, vs := range hdr {
			for _, v := range vs {
				if strings.Contains(v, aliceToken) {
					t.Errorf("the client's token reached the upstream in %s", k)
				}
			}
		}
		if hdr.Get("X-Request-Id") != "req-1" {
			t.Errorf("forwarded X-Request-Id = %q", hdr.Get("X-Request-Id"))
		}
	}
}
