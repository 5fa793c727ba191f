package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// BenchmarkEcho measures the whole path of a tools/call: HTTP in, session,
// upstream multiplexer, a stdio child (the test binary's own server) and
// back, for one session and for many sessions sharing one process. It is
// the in-repo companion of ../shared/bench (which compares with the peers
// and the direct-stdio ceiling); use it with -cpuprofile to find hot spots:
//
//	go test -run '^$' -bench Echo -benchtime 3s -cpuprofile cpu.out ./internal/gateway/
func BenchmarkEcho(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name      string
		isolation string
		sessions  int
	}{
		{"shared/1-session", "shared", 1},
		{"shared/16-sessions", "shared", 16},
		{"session/16-sessions", "session", 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			yaml := fmt.Sprintf(`listen: 127.0.0.1:0
max_sessions: 100
destinations:
  d:
    type: stdio
    command: [%q]
    isolation: %s
    env: {%s: plain, GORACE: atexit_sleep_ms=0}
`, exe, bc.isolation, "SWITCHBOARD_TEST_SERVER")
			cfg, err := config.Parse([]byte(yaml), "bench.yaml")
			if err != nil {
				b.Fatal(err)
			}
			g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: io.Discard})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- g.Serve(ctx, ln) }()
			defer func() {
				b.StopTimer() // shutdown is not what is measured
				cancel()
				<-served
			}()

			url := "http://" + ln.Addr().String() + "/d/mcp"
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			ids := make([]string, bc.sessions)
			for i := range ids {
				ids[i] = benchInit(b, client, url)
			}
			var next, rid atomic.Int64
			// About 16 calls in flight, as the shared harness runs them.
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				sid := ids[int(next.Add(1))%len(ids)]
				for pb.Next() {
					n := rid.Add(1) // ids are unique per session while in flight
					body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, n)
					resp := benchPost(b, client, url, sid, body)
					if !bytes.Contains(resp, []byte(`"hello"`)) {
						b.Errorf("unexpected answer %s", resp)
						return
					}
				}
			})
		})
	}
}

func benchInit(b *testing.B, c *http.Client, url string) string {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		b.Fatalf("initialize: %s", resp.Status)
	}
	benchPost(b, c, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

func benchPost(b *testing.B, c *http.Client, url, sid, body string) []byte {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		b.Fatalf("POST: %s %s", resp.Status, out)
	}
	return out
}
