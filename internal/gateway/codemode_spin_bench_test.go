package gateway_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCallsWhileScriptsSpin measures ordinary tools/call latency
// through the gateway (a go-sdk client on /mcp/work, a go-sdk stdio server
// behind it) with nothing else running ("idle") and while four execute
// scripts spin (`for (;;) {}`, code mode's whole concurrency): it reports
// p50 and p99 in ms. An op is one call.
//
//	go test -run '^$' -bench CallsWhileScriptsSpin -benchtime 400x ./internal/gateway/
func BenchmarkCallsWhileScriptsSpin(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	yml := fmt.Sprintf(`listen: 127.0.0.1:0
metrics: {enabled: false}
ui: {enabled: false}
timeout: 120s
namespaces:
  work: {servers: [alpha], code_mode: true, sandbox: {timeout: 90s, concurrency: 4}}
destinations:
  alpha:
    type: stdio
    command: [%q]
    env: {%s: alpha, %s: echo, GORACE: atexit_sleep_ms=0}
`, exe, envAggName, envAggTools)
	base := serveBench(b, yml)
	connect := func() *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp/work", MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	cs := connect()
	if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"script": "1"}}); err != nil {
		b.Fatal(err)
	}
	measure := func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"i": i}})
			if err != nil || res.IsError {
				b.Fatalf("call: %v %+v", err, res)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
	}
	b.Run("idle", measure)
	b.Run("4-spinning", func(b *testing.B) {
		ctx, cancel := context.WithCancel(b.Context())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		spinners := connect()
		for range 4 {
			wg.Go(func() {
				_, _ = spinners.CallTool(ctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"script": "for (;;) {}"}})
			})
		}
		// Warm up for half a second while the scripts start (a benchmark:
		// no event tells a script started on both designs measured).
		for start := time.Now(); time.Since(start) < 500*time.Millisecond; {
			if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{}}); err != nil {
				b.Fatal(err)
			}
		}
		measure(b)
	})
}
