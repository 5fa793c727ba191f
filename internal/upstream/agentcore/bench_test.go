package agentcore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
)

// BenchmarkRelayAgentCore: calls/s of a 64-byte echo through relay →
// AgentCore emulator → go-sdk server, 16 calls in flight, with signing off
// and on (the real sigv4.Signer through agentcore.Resolve). The emulator
// checks no signature in either run (AgentCore's check is not the relay's
// cost; the tests verify every signature); the signed run only makes sure
// its requests carried one. Compare the two ns/op figures.
func BenchmarkRelayAgentCore(b *testing.B) {
	for _, signed := range []bool{false, true} {
		name := "unsigned"
		if signed {
			name = "signed"
		}
		b.Run(name, func(b *testing.B) {
			emu := peertest.NewAgentCore(b, peertest.AgentCoreOptions{})
			b.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
			var cs *mcp.ClientSession
			if signed {
				peertest.NewAWSEnv(b)
				_, cs = startRelayVersion(b, agentcore.Options{ARN: testARN}, "2025-11-25")
			} else {
				rt, err := agentcore.New(context.Background(), agentcore.Options{ARN: testARN})
				if err != nil {
					b.Fatal(err)
				}
				_, cs = startRuntime(b, rt, "2025-11-25")
			}
			text := strings.Repeat("x", 64)
			ctx := context.Background()
			sem := make(chan struct{}, 16)
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
					if err != nil || peertest.Text(res) != "agentcore echo: "+text {
						b.Errorf("echo: %v", err)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			// CPU time per call (the whole process: client, relay,
			// emulator, server) is steadier than ns/op on a busy machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
			if calls := emu.Calls(); len(calls) == 0 || strings.HasPrefix(calls[0].Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") != signed {
				b.Fatalf("signed=%v, but the first invocation's Authorization is %q", signed, calls[0].Header.Get("Authorization"))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
