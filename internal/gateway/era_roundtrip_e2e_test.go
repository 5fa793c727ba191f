package gateway_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// TestEraRoundTrips drives the go-sdk client of each era through Switchboard
// to a legacy server (the everything-server over stdio pinned with protocol:
// legacy), a modern one (the everything-server in stateless mode over HTTP)
// and the aggregated /mcp holding both: tools/list, a tool call with an
// elicitation round trip, and (legacy clients) a resource subscription.
//
// The elicitation crosses the eras both ways: a legacy server's
// elicitation/create reaches a modern client as an input_required result
// (answered by the go-sdk client's MRTR middleware, which retries with
// inputResponses), and a modern server's input_required reaches a legacy
// client as a real elicitation/create request.
func TestEraRoundTrips(t *testing.T) {
	skipRemoteShort(t)
	bin := peertest.EverythingServer(t)
	url, _ := peertest.StartEverythingServer(t, true)
	h := startAgg(t, "max_sessions: 100\n",
		remoteDest{name: "modern", typ: "streamable_http", url: url, extra: "protocol: modern"}.yaml(),
		dest{name: "legacy", command: []string{bin}, extra: "protocol: legacy"})

	// Which tool asks for input on which server: the legacy server's
	// test_elicitation sends elicitation/create; the modern server answers
	// test_input_required_result_elicitation with input_required.
	type target struct {
		name, path, tool, want string
	}
	targets := []target{
		{"legacy", "/legacy/mcp", "test_elicitation", "action=accept"},
		{"modern", "/modern/mcp", "test_input_required_result_elicitation", "Hello, Alice!"},
		{"aggregated-legacy", "/mcp", "legacy__test_elicitation", "action=accept"},
		{"aggregated-modern", "/mcp", "modern__test_input_required_result_elicitation", "Hello, Alice!"},
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		for _, tg := range targets {
			t.Run(version+"/"+tg.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				var elicited atomic.Int32
				updated := make(chan string, 8)
				c := mcp.NewClient(&mcp.Implementation{Name: "era-test", Version: "1"}, &mcp.ClientOptions{
					ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						elicited.Add(1)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Alice", "username": "alice"}}, nil
					},
					ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
						select {
						case updated <- req.Params.URI:
						default:
						}
					},
				})
				cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url(tg.path), MaxRetries: -1},
					&mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				defer cs.Close()
				tools, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				found := false
				for _, tl := range tools.Tools {
					found = found || tl.Name == tg.tool
				}
				if !found {
					t.Fatalf("tools/list has no %s (%d tools)", tg.tool, len(tools.Tools))
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tg.tool, Arguments: map[string]any{"message": "Your name?"}})
				if err != nil {
					t.Fatalf("tools/call %s: %v", tg.tool, err)
				}
				text := ""
				for _, ct := range res.Content {
					if tc, ok := ct.(*mcp.TextContent); ok {
						text += tc.Text
					}
				}
				if res.IsError || !strings.Contains(text, tg.want) {
					t.Fatalf("tools/call %s: isError=%v %q; want it to contain %q", tg.tool, res.IsError, text, tg.want)
				}
				if n := elicited.Load(); n < 1 {
					t.Fatalf("the elicitation handler ran %d times; want at least once", n)
				}
				if version != "2025-11-25" || tg.name != "legacy" && tg.name != "modern" {
					return
				}
				// A resource subscription: the everything-server updates
				// test://watched-resource every 3 s.
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
					t.Fatalf("resources/subscribe: %v", err)
				}
				select {
				case uri := <-updated:
					if uri != "test://watched-resource" {
						t.Fatalf("resources/updated for %q", uri)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("no notifications/resources/updated within 20 s of subscribing")
				}
			})
		}
	}
}

// TestEraInspector drives MCP Inspector 2.12.0's CLI in each protocol era
// against a legacy server, a modern one and the aggregated /mcp holding
// both: tools/list and a tool call complete in every combination. The CLI
// declares no elicitation capability (it cannot answer one), so the
// elicitation tool shows the other half of the translation: the client's
// capabilities, sent per request (modern) or per session (legacy), reach
// the server of the other era, which refuses to ask for what was not
// declared. (It has no resources/subscribe either; TestEraRoundTrips
// covers elicitation and subscriptions with the go-sdk client.)
func TestEraInspector(t *testing.T) {
	skipRemoteShort(t)
	insp := peertest.Inspector(t)
	bin := peertest.EverythingServer(t)
	url, _ := peertest.StartEverythingServer(t, true)
	h := startAgg(t, "max_sessions: 100\n",
		remoteDest{name: "modern", typ: "streamable_http", url: url, extra: "protocol: modern"}.yaml(),
		dest{name: "legacy", command: []string{bin}, extra: "protocol: legacy"})
	home := t.TempDir()
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, errOut, _ := peertest.Run(ctx, t, "", append(append([]string{}, insp...), args...), "HOME="+home)
		return out + errOut
	}
	for _, era := range []string{"legacy", "modern"} {
		for _, ep := range []struct{ name, path, prefix, elicit, server string }{
			{"legacy", "/legacy/mcp", "", "test_elicitation", "legacy"},
			{"modern", "/modern/mcp", "", "test_input_required_result_elicitation", "modern"},
			{"aggregated", "/mcp", "legacy__", "legacy__test_elicitation", "legacy"},
			{"aggregated-modern-member", "/mcp", "modern__", "modern__test_input_required_result_elicitation", "modern"},
		} {
			t.Run(era+"/"+ep.name, func(t *testing.T) {
				base := []string{h.url(ep.path), "--protocol-era", era, "--format", "json"}
				if out := run(t, append(base, "--method", "tools/list")...); !strings.Contains(out, `"name":"`+ep.prefix+`test_simple_text"`) {
					t.Fatalf("tools/list has no %stest_simple_text:\n%s", ep.prefix, out)
				}
				if out := run(t, append(base, "--method", "tools/call", "--tool-name", ep.prefix+"test_simple_text")...); !strings.Contains(out, "This is a simple text response for testing.") {
					t.Fatalf("tools/call %stest_simple_text:\n%s", ep.prefix, out)
				}
				if era == ep.server {
					return // native: the server's own business
				}
				out := run(t, append(base, "--method", "tools/call", "--tool-name", ep.elicit, "--tool-arg", "message=hi")...)
				if !strings.Contains(out, "did not declare") && !strings.Contains(out, "does not support elicitation") {
					t.Fatalf("tools/call %s by a client without elicitation: want a refusal naming the capability:\n%s", ep.elicit, out)
				}
			})
		}
	}
}
