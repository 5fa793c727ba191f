package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// BenchmarkEcho measures the whole path of a tools/call: HTTP in, session,
// upstream multiplexer, a stdio child (the test binary's own server) and
// back. It is the in-repo companion of ../shared/bench (which compares with
// the peers and the direct-stdio ceiling); use it with -cpuprofile to find
// hot spots, -trace to count goroutine hand-offs:
//
//	go test -run '^$' -bench Echo -benchmem -benchtime 3s -cpuprofile cpu.out ./internal/gateway/
//
// c1 is one call in flight on one kept-alive connection, the harness's
// "echo 64 B, c1 s1" setting, driven by a raw HTTP/1.1 client that
// allocates nothing per call: its allocs/op and profile are the gateway's
// own. The parallel cases run about 16 calls in flight through net/http's
// client (whose allocations are counted too), for one session and for many
// sessions sharing one process or each owning one.
//
// Every case runs with observability off and on (obs=off: metrics and ui
// disabled; obs=on: /metrics and /ui, the defaults), so their cost shows;
// c1 also runs with obs=trace, obs=on plus tracing sampled at 100% to an
// OTLP receiver on loopback that discards what it gets (its cost against
// obs=on is tracing's):
//
//	go test -run '^$' -bench 'Echo/c1' -count 10 ./internal/gateway/ > bench.txt
//	benchstat -col /obs bench.txt
func BenchmarkEcho(b *testing.B) {
	for _, obs := range append(benchObs, "trace") {
		b.Run("c1/obs="+obs, func(b *testing.B) {
			url := benchGateway(b, "shared", obs)
			c := benchInit(b, &http.Client{}, url)
			rc := dialRaw(b, url, c)
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				resp := rc.call(b, int64(i+1))
				if !bytes.Contains(resp, rc.want) {
					b.Fatalf("unexpected answer %s", resp)
				}
			}
			b.StopTimer()
			// The CPU of this process (the gateway and the raw client, not
			// the server child) per call: steadier than wall time on a
			// shared machine.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
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
		for _, obs := range benchObs {
			benchParallel(b, bc.name+"/obs="+obs, bc.isolation, bc.sessions, obs)
		}
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchObs are the observability settings each case runs with.
var benchObs = []string{"off", "on"}

// benchParallel is a parallel case of BenchmarkEcho: about 16 calls in
// flight over net/http's client, spread over sessions.
func benchParallel(b *testing.B, name, isolation string, sessions int, obs string) {
	b.Run(name, func(b *testing.B) {
		url := benchGateway(b, isolation, obs)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		ids := make([]string, sessions)
		for i := range ids {
			ids[i] = benchInit(b, client, url)
		}
		var next, rid atomic.Int64
		// About 16 calls in flight, as the shared harness runs them.
		b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
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

func benchGateway(b *testing.B, isolation, obs string) string {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	on := obs == "on" || obs == "trace"
	var tracing string
	if obs == "trace" {
		// A collector that takes every export and discards it.
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		}))
		b.Cleanup(rcv.Close)
		tracing = "tracing: {endpoint: " + rcv.URL + ", sample_ratio: 1}"
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
max_sessions: 100
metrics: {enabled: %[4]v}
ui: {enabled: %[4]v}
%[5]s
destinations:
  d:
    type: stdio
    command: [%[1]q]
    isolation: %[2]s
    env: {%[3]s: plain, GORACE: atexit_sleep_ms=0}
`, exe, isolation, "SWITCHBOARD_TEST_SERVER", on, tracing)
	return serveBenchOpts(b, yaml, gateway.Options{}) + "/d/mcp"
}

// serveBench serves the config yaml on 127.0.0.1 for the benchmark and
// returns its base URL; the gateway stops when the benchmark ends (its
// shutdown is not measured).
func serveBench(b *testing.B, yaml string) string {
	return serveBenchOpts(b, yaml, gateway.Options{})
}

// serveBenchOpts is serveBench with opts (logger and audit discarded).
func serveBenchOpts(b *testing.B, yaml string, opts gateway.Options) string {
	cfg, err := config.Parse([]byte(yaml), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	opts.Logger, opts.AuditWriter = slog.New(slog.DiscardHandler), io.Discard
	g, err := gateway.New(cfg, opts)
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
	b.Cleanup(func() {
		b.StopTimer()
		cancel()
		<-served
	})
	return "http://" + ln.Addr().String()
}

// rawClient speaks HTTP/1.1 on one kept-alive connection with buffers it
// reuses, so that a benchmark's allocations are the server's. It reads
// only answers with a Content-Length (JSON), which is what a tools/call
// echo gets.
type rawClient struct {
	conn      net.Conn
	br        *bufio.Reader
	head      []byte // the request up to the Content-Length value
	req, body []byte // reused
	text      string // the echo text, 64 bytes as in the harness
	want      []byte // the text as it comes back
}

func dialRaw(b *testing.B, url, sid string) *rawClient {
	host := strings.TrimPrefix(url, "http://")
	host, path, _ := strings.Cut(host, "/")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	text := strings.Repeat("0123456789abcdef", 4)
	return &rawClient{
		conn: conn, br: bufio.NewReaderSize(conn, 64<<10),
		head: []byte("POST /" + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: bench\r\n" +
			"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
			"Mcp-Session-Id: " + sid + "\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: "),
		text: text, want: []byte(`"` + text + `"`),
	}
}

// call sends a tools/call of echo with id and returns the answer's body,
// valid until the next call.
func (c *rawClient) call(b testing.TB, id int64) []byte {
	c.body = append(c.body[:0], `{"jsonrpc":"2.0","id":`...)
	c.body = strconv.AppendInt(c.body, id, 10)
	c.body = append(c.body, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`...)
	c.body = append(c.body, c.text...)
	c.body = append(c.body, `"}}}`...)
	c.req = append(c.req[:0], c.head...)
	c.req = strconv.AppendInt(c.req, int64(len(c.body)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, c.body...)
	if _, err := c.conn.Write(c.req); err != nil {
		b.Fatal(err)
	}
	status, err := c.br.ReadSlice('\n')
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		b.Fatalf("status %q", status)
	}
	n := -1
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 {
		b.Fatal("answer without Content-Length")
	}
	c.body = c.body[:0]
	if cap(c.body) < n {
		c.body = make([]byte, n)
	}
	c.body = c.body[:n]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		b.Fatal(err)
	}
	return c.body
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
