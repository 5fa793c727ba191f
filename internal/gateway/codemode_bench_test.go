package gateway_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCodeMode compares one execute making 10 tool calls with 10
// direct tools/call requests through the gateway, both on one go-sdk
// client session of an aggregated namespace (code_mode: true) whose
// server is a go-sdk stdio server (newAggServer, the test binary itself).
// An op is the 10 calls either way; the ratio of the two ns/op is code
// mode's cost or gain per batch of calls:
//
//	go test -run '^$' -bench CodeMode -benchtime 200x ./internal/gateway/
func BenchmarkCodeMode(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	yml := fmt.Sprintf(`listen: 127.0.0.1:0
metrics: {enabled: false}
ui: {enabled: false}
namespaces:
  work: {servers: [alpha], code_mode: true}
destinations:
  alpha:
    type: stdio
    command: [%q]
    env: {%s: alpha, %s: echo, GORACE: atexit_sleep_ms=0}
`, exe, envAggName, envAggTools)
	base := serveBench(b, yml)
	ctx := b.Context()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/work", MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	call := func(name string, args map[string]any) string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError || len(res.Content) == 0 {
			b.Fatalf("%s: %+v", name, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}

	b.Run("direct-10", func(b *testing.B) {
		for b.Loop() {
			for i := range 10 {
				if got := call("alpha__echo", map[string]any{"i": i}); !strings.HasPrefix(got, "alpha:echo:") {
					b.Fatalf("echo = %q", got)
				}
			}
		}
	})
	b.Run("execute-10", func(b *testing.B) {
		const script = `const out = []; for (let i = 0; i < 10; i++) out.push(call_tool("alpha", "echo", {i})); out.length`
		for b.Loop() {
			if got := call("execute", map[string]any{"script": script}); !strings.Contains(got, `"result":10`) {
				b.Fatalf("execute = %q", got)
			}
		}
	})
	b.Run("execute-10-parallel", func(b *testing.B) {
		const script = `parallel(Array.from({length: 10}, (_, i) => ["alpha", "echo", {i}])).length`
		for b.Loop() {
			if got := call("execute", map[string]any{"script": script}); !strings.Contains(got, `"result":10`) {
				b.Fatalf("execute = %q", got)
			}
		}
	})
}
