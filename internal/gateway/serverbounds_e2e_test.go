package gateway_test

// The HTTP server's bounds (issue 8, item 4): a declared oversized body is
// refused before it is sent, body buffers grow with the bytes that arrive,
// a stalled body ends, kept-alive connections close when idle, and the
// connection cap keeps /healthz reachable. The descriptor-limit run of the
// real binary is in cmd/switchboard.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// startOpts is start with gateway Options.
func startOpts(t *testing.T, opts gateway.Options, top string, dests ...dest) *harness {
	t.Helper()
	tag := newTag(t)
	yml := configYAML(t, tag, top, dests...)
	cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yml, err)
	}
	h, _ := serveConfig(t, tag, cfg, opts, nil)
	return h
}

// rawConn dials the harness's listener.
func (h *harness) rawConn(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// postHead is the head of a POST to path declaring a body of n bytes.
func postHead(path string, n int64, extra ...string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n%s\r\n", path, n, strings.Join(extra, ""))
}

// readAnswer reads one HTTP response from c within d.
func readAnswer(t *testing.T, c net.Conn, d time.Duration) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", d, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// A declared Content-Length over max_body_bytes is answered 413 at once:
// only the head is sent, and with Expect: 100-continue the client is not
// invited to send the body.
func TestDeclaredOversizedBodyRefusedAtOnce(t *testing.T) {
	t.Parallel()
	h := start(t, "max_body_bytes: 1MiB", dest{name: "a", mode: "plain"})
	for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
		c := h.rawConn(t)
		if _, err := io.WriteString(c, postHead("/a/mcp", 2<<20, expect)); err != nil {
			t.Fatal(err)
		}
		resp, body := readAnswer(t, c, 5*time.Second)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "exceeds 1048576 bytes") {
			t.Fatalf("Expect %q: HTTP %d %s, want 413 before any of the body is sent", expect, resp.StatusCode, body)
		}
	}
	// The legacy /message endpoint too.
	st := h.open("GET", "/a/sse", nil)
	defer st.close()
	ev := st.nextEvent()
	if ev.name != "endpoint" {
		t.Fatalf("first event %s %q, want the endpoint", ev.name, ev.data)
	}
	c := h.rawConn(t)
	if _, err := io.WriteString(c, postHead(string(ev.data), 2<<20)); err != nil {
		t.Fatal(err)
	}
	if resp, body := readAnswer(t, c, 5*time.Second); resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "exceeds 1048576 bytes") {
		t.Fatalf("legacy message: HTTP %d %s, want 413 before any of the body is sent", resp.StatusCode, body)
	}
	// Within the limit the body is read as usual.
	s := h.initialize("a", "")
	if out := s.tool("echo", map[string]any{"text": "fits"}); out.Text != "fits" {
		t.Fatalf("echo: %+v", out)
	}
}

// postsBlockedInBody counts the goroutines of this process serving a
// Streamable HTTP POST (the stalled uploads sit there, reading the body).
func postsBlockedInBody() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "streamable.(*Handler).post(")
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// 40 uploads that declare 16 MiB (max_body_bytes) and stall after 4 KB cost
// the gateway about what they sent, not what they declared: before, each
// got a 16 MiB buffer up front (640 MiB here). Not parallel: it measures
// the heap of the whole test process.
func TestStalledUploadsDoNotReserveDeclaredSize(t *testing.T) {
	h := start(t, "max_body_bytes: 16MiB", dest{name: "a", mode: "plain"})
	const n = 40
	before := heapInuse()
	base := postsBlockedInBody()
	head := postHead("/a/mcp", 16<<20)
	chunk := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 4<<10)
	for range n {
		c := h.rawConn(t)
		if _, err := io.WriteString(c, head+chunk); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(waitFor)
	for postsBlockedInBody()-base < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d uploads reached the handler", postsBlockedInBody()-base, n)
		}
		runtime.Gosched()
	}
	after := heapInuse()
	grew := int64(after) - int64(before)
	t.Logf("heap in use: %d KiB before, %d KiB with %d stalled uploads", before>>10, after>>10, n)
	if grew > 8<<20 {
		t.Fatalf("%d stalled uploads grew the heap by %d MiB, want under 8", n, grew>>20)
	}
}

// A body that stops arriving ends with 408 after BodyIdleTimeout, while a
// slow upload that keeps sending, and a long answer after the body, are
// not cut.
func TestBodyReadDeadline(t *testing.T) {
	t.Parallel()
	h := startOpts(t, gateway.Options{BodyIdleTimeout: time.Second}, "", dest{name: "a", mode: "plain"})
	s := h.initialize("a", "")

	c := h.rawConn(t)
	if _, err := io.WriteString(c, postHead("/a/mcp", 1000, "Mcp-Session-Id: "+s.id+"\r\n")+`{"jsonrpc":"2.0",`); err != nil {
		t.Fatal(err)
	}
	resp, body := readAnswer(t, c, 5*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "request body stalled: no bytes for 1s") {
		t.Fatalf("stalled body: HTTP %d %s, want 408 naming the stall", resp.StatusCode, body)
	}

	// 12 pieces 150 ms apart: 1.8 s in all, never 1 s without a byte (a
	// margin for a loaded machine).
	msg := rpc(7, "tools/call", toolParams("echo", map[string]any{"text": "slowly"}, nil))
	pr, pw := io.Pipe()
	go func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		step := (len(msg) + 11) / 12
		for rest := msg; len(rest) > 0; rest = rest[min(step, len(rest)):] {
			<-tick.C
			if _, err := pw.Write(rest[:min(step, len(rest))]); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := h.newRequest(t.Context(), "POST", "/a/mcp", nil, s.hdr()...)
	req.Body, req.ContentLength = pr, int64(len(msg))
	hr, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	if hr.StatusCode != 200 || !strings.Contains(string(b), "slowly") {
		t.Fatalf("slow upload: HTTP %d %s", hr.StatusCode, b)
	}

	// An answer that takes 2.5 times the body deadline, after the body.
	if out := s.tool("slow", map[string]any{"ms": 2500}); out.Text != "slept" {
		t.Fatalf("slow answer: %+v", out)
	}
}

// A kept-alive connection with no request for IdleTimeout is closed.
func TestIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	h := startOpts(t, gateway.Options{IdleTimeout: 200 * time.Millisecond}, "", dest{name: "a", mode: "plain"})
	c := h.rawConn(t)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("healthz: HTTP %d, close %v; want 200 kept alive", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF (closed by the server) within 5s", err)
	}
}

// With MaxConns 8, 30 kept-alive connections come in one after another:
// each displaces the one idle longest, /healthz on a new connection is
// answered, and the server never holds more than 8 (the displaced ones
// read EOF).
func TestConnectionCapClosesIdleOnes(t *testing.T) {
	t.Parallel()
	h := startOpts(t, gateway.Options{MaxConns: 8}, "", dest{name: "a", mode: "plain"})
	type kept struct {
		c  net.Conn
		br *bufio.Reader
	}
	var conns []kept
	for range 30 {
		c := h.rawConn(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		conns = append(conns, kept{c, br})
	}
	if r := h.do("GET", "/healthz", nil); r.status != 200 {
		t.Fatalf("healthz: %s", r)
	}
	open := 0
	for _, k := range conns {
		_ = k.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := k.br.ReadByte(); err != io.EOF {
			open++ // a timeout: the server still holds it
		}
	}
	if open > 8 {
		t.Fatalf("%d of 30 connections still open, want at most 8", open)
	}
}
