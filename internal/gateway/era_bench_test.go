package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkEra compares the translated path of each client era with its
// native one: a 64 B echo tools/call, about 16 calls in flight, through a
// stdio server (the test binary's own in mode dual, which answers either
// era's requests and server/discover). The destination's protocol setting picks the path:
//
//	modern/native      protocol: modern   2026-07-28 requests go to the server as they are
//	modern/translated  protocol: legacy   … through era.ModernOverLegacy (a legacy member per call)
//	legacy/native      protocol: legacy   one legacy session, the server's own
//	legacy/translated  protocol: modern   … held by era.LegacyOverModern (_meta added per call)
//
// cpu-µs/op is this process's CPU per call (gateway and client, not the
// server child); compare translated with native within one run:
//
//	go test -run '^$' -bench Era -benchtime 3s -count 5 ./internal/gateway/
func BenchmarkEra(b *testing.B) {
	text := strings.Repeat("0123456789abcdef", 4)
	for _, bc := range []struct {
		name, protocol string
		modern         bool
	}{
		{"modern/native", "modern", true},
		{"modern/translated", "legacy", true},
		{"legacy/native", "legacy", false},
		{"legacy/translated", "modern", false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			url := benchEraGateway(b, bc.protocol)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			sid := ""
			if !bc.modern {
				sid = benchInit(b, client, url)
			}
			var rid atomic.Int64
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := rid.Add(1)
					var resp []byte
					if bc.modern {
						body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q},`+
							`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, n, text)
						resp = benchModernPost(b, client, url, body)
					} else {
						body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, n, text)
						resp = benchPost(b, client, url, sid, body)
					}
					if !bytes.Contains(resp, []byte(text)) {
						b.Errorf("unexpected answer %s", resp)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

func benchModernPost(b *testing.B, c *http.Client, url, body string) []byte {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Errorf("POST: %s %s", resp.Status, out)
	}
	return out
}

func benchEraGateway(b *testing.B, protocol string) string {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
max_sessions: 100
metrics: {enabled: false}
ui: {enabled: false}
destinations:
  d:
    type: stdio
    command: [%q]
    protocol: %s
    env: {SWITCHBOARD_TEST_SERVER: dual, GORACE: atexit_sleep_ms=0}
`, exe, protocol)
	return serveBench(b, yaml) + "/d/mcp"
}
