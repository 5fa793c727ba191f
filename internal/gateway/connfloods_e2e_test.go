package gateway_test

// Connections cannot starve the gateway (issue 20, item 4): floods of
// one-byte connections, GET streams on one session and trickling bodies
// leave /healthz answering within 100 ms; a request with both
// Content-Length and Transfer-Encoding closes its connection; silent and
// trickling connections are bounded in time.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// raiseNofile raises the soft descriptor limit of the test process to at
// least want (restored after), or skips when the hard limit is lower.
func raiseNofile(t *testing.T, want uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	if rl.Cur >= want {
		return
	}
	if rl.Max < want {
		t.Skipf("descriptor limit %d (hard %d), the floods need %d", rl.Cur, rl.Max, want)
	}
	old := rl
	rl.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// startFlooded starts a gateway with one plain destination d, a connection
// cap of 1024, and the config lines top.
func startFlooded(t *testing.T, top string) (*harness, *gateway.Gateway, string) {
	t.Helper()
	tag := newTag(t)
	yml := configYAML(t, tag, top, dest{name: "d", mode: "plain"})
	cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yml, err)
	}
	h, g := serveConfig(t, tag, cfg, gateway.Options{MaxConns: floodCap}, nil)
	if r := h.do("GET", "/healthz", nil); r.status != 200 { // serving, connection limit in place
		t.Fatalf("healthz: %s", r)
	}
	h.tr.CloseIdleConnections()
	return h, g, strings.TrimPrefix(h.base, "http://")
}

const floodCap = 1024

// flood dials n connections to addr and writes first on each.
func flood(t *testing.T, addr string, n int, first string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		conns = append(conns, c)
		// A connection the gateway closed already (displaced) may refuse
		// the write: that is the gateway's choice, not a failure.
		_, _ = io.WriteString(c, first)
	}
	return conns
}

// waitConns waits for the gateway's connection counts to meet cond.
func waitConns(t *testing.T, g *gateway.Gateway, what string, cond func(gateway.ConnCounts) bool) gateway.ConnCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := g.WaitConns(ctx, cond)
	if err != nil {
		t.Fatalf("%s: %v (counts %+v)", what, err, c)
	}
	return c
}

// probeHealthz asks for /healthz n times, each on a new connection, and
// fails the test for each answer (dial to last byte) slower than bound or
// not 200.
func probeHealthz(t *testing.T, addr string, n int, bound time.Duration) {
	t.Helper()
	var slowest time.Duration
	for i := range n {
		t0 := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
		_ = c.SetDeadline(t0.Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		took := time.Since(t0)
		_ = c.Close()
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), `"status":"ok"`) {
			t.Fatalf("probe %d: HTTP %d %q %v", i, resp.StatusCode, b, err)
		}
		if took > bound {
			t.Errorf("probe %d: /healthz answered in %v, over %v", i, took, bound)
		}
		slowest = max(slowest, took)
	}
	t.Logf("%d probes, slowest %v", n, slowest)
}

// TestProbesAnswerUnderConnectionFloods: with the connection cap at 1024,
// each flood is set up first (the gateway has counted every one of its
// connections), then /healthz is asked ten times, each answer within
// 100 ms.
//
//   - 1,100 connections that send one byte: idle for the cap (no complete
//     head), the probe's connection displaces the one idle longest;
//   - 1,024 GET streams on one session: 8 (the bound) get their stream, the
//     others 409 Conflict;
//   - 1,100 bodies that never complete: 1,024 hold the cap busy, the others
//     meet the reserve (503, closed), and the probes are served from the
//     reserve.
func TestProbesAnswerUnderConnectionFloods(t *testing.T) {
	raiseNofile(t, 8192)
	const probes, bound = 10, 100 * time.Millisecond

	t.Run("one-byte connections", func(t *testing.T) {
		_, g, addr := startFlooded(t, "connections: {read_header_timeout: 5m}")
		base := waitConns(t, g, "counts", func(gateway.ConnCounts) bool { return true }).Added
		flood(t, addr, 1100, "P")
		c := waitConns(t, g, "1,100 connections counted", func(c gateway.ConnCounts) bool { return c.Added >= base+1100 })
		if c.Main > floodCap {
			t.Fatalf("%d connections under the cap of %d", c.Main, floodCap)
		}
		probeHealthz(t, addr, probes, bound)
	})

	t.Run("GET streams on one session", func(t *testing.T) {
		h, _, addr := startFlooded(t, "")
		s := h.initialize("d", "")
		h.tr.CloseIdleConnections()
		conns := flood(t, addr, 1024, "GET /d/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"+
			"Mcp-Session-Id: "+s.id+"\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n")
		var ok, conflict, gone int
		for i, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(waitFor))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			switch {
			case err != nil:
				gone++ // displaced before its head was read (the cap is 1024 and the session's own connection took a place)
			case resp.StatusCode == http.StatusOK:
				ok++
			case resp.StatusCode == http.StatusConflict:
				b, _ := io.ReadAll(resp.Body)
				if !strings.Contains(string(b), "GET streams open already") {
					t.Fatalf("stream %d: 409 %q", i, b)
				}
				conflict++
			default:
				t.Fatalf("stream %d: HTTP %d", i, resp.StatusCode)
			}
			_ = c.SetReadDeadline(time.Time{})
		}
		if ok != config.DefaultGetStreams || gone > 1 || ok+conflict+gone != 1024 {
			t.Fatalf("1,024 GET streams: %d opened, %d 409, %d closed unanswered; want %d opened, at most 1 closed",
				ok, conflict, gone, config.DefaultGetStreams)
		}
		probeHealthz(t, addr, probes, bound)
	})

	t.Run("trickling bodies", func(t *testing.T) {
		_, g, addr := startFlooded(t, "")
		base := waitConns(t, g, "counts", func(gateway.ConnCounts) bool { return true }).Added
		// In two steps: a connection whose head has not been read yet
		// (its goroutine not yet run, or its segments retransmitted on a
		// loaded machine) is idle to the limit, and a later one of the
		// flood would displace it instead of meeting the reserve.
		head := postHead("/d/mcp", 1000) + "{"
		flood(t, addr, floodCap, head)
		waitConns(t, g, "the cap held busy by the flood", func(c gateway.ConnCounts) bool {
			return c.Added >= base+floodCap && c.BusyMain == floodCap
		})
		// The rest meet the reserve: 503 and closed, or closed at once
		// when the reserve is busy with others of them.
		for i, c := range flood(t, addr, 1100-floodCap, head) {
			_ = c.SetReadDeadline(time.Now().Add(waitFor))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil && resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("flood connection %d beyond the cap: HTTP %d", floodCap+i, resp.StatusCode)
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("flood connection %d beyond the cap: neither answered nor closed within %v", floodCap+i, waitFor)
			}
		}
		waitConns(t, g, "the cap still held busy, the reserve free", func(c gateway.ConnCounts) bool {
			return c.BusyMain == floodCap && c.Reserved == 0
		})
		probeHealthz(t, addr, probes, bound)
		// Anything but a probe on a reserved connection: 503, closed.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, postHead("/d/mcp", 2)+"{}"); err != nil {
			t.Fatal(err)
		}
		resp, body := readAnswer(t, c, waitFor)
		if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a call on a reserved connection: HTTP %d close=%v %q", resp.StatusCode, resp.Close, body)
		}
	})
}

// A request with both Content-Length and Transfer-Encoding is answered
// (net/http reads the chunked body, RFC 9112 §6.3) and its connection
// closed (§6.1); the same request with Content-Length alone keeps it.
func TestContentLengthWithTransferEncodingCloses(t *testing.T) {
	t.Parallel()
	h := start(t, "", dest{name: "a", mode: "plain"})
	body := rpc(1, "initialize", initParams(""))
	for _, te := range []bool{false, true} {
		c := h.rawConn(t)
		req := postHead("/a/mcp", int64(len(body)))
		payload := string(body)
		if te {
			req = strings.Replace(req, "\r\n\r\n", "\r\nTransfer-Encoding: chunked\r\n\r\n", 1)
			payload = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		}
		if _, err := io.WriteString(c, req+payload); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(waitFor))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "serverInfo") {
			t.Fatalf("te=%v: HTTP %d %q", te, resp.StatusCode, b)
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond)) // for te=false: a bounded look
		_, err = br.ReadByte()
		closed := err == io.EOF
		if closed != te || resp.Close != te {
			t.Fatalf("te=%v: Connection: close %v, closed %v (%v); want both %v", te, resp.Close, closed, err, te)
		}
	}
}

// A connection that sends nothing, or one byte, is closed once
// read_header_timeout has passed; a body that trickles a byte at a time is
// ended (408) once body_timeout has passed, however steadily it trickles.
func TestSilentAndTricklingConnectionsBounded(t *testing.T) {
	t.Parallel()
	h := start(t, "connections: {read_header_timeout: 300ms, body_timeout: 500ms}", dest{name: "a", mode: "plain"})
	for _, first := range []string{"", "P"} {
		t0 := time.Now() // before the dial: the server's clock starts after it
		c := h.rawConn(t)
		if first != "" {
			if _, err := io.WriteString(c, first); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(t0.Add(waitFor))
		got, err := io.ReadAll(c) // net/http may say 408 before it closes
		if err != nil {
			t.Fatalf("first %q: read %q, %v; want the connection closed by the server", first, got, err)
		}
		if took := time.Since(t0); took < 300*time.Millisecond {
			t.Fatalf("first %q: closed after %v, before the header timeout", first, took)
		}
	}

	c := h.rawConn(t)
	if _, err := io.WriteString(c, postHead("/a/mcp", 1000)+"{"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the trickle: a byte every 50 ms, well within the idle bound
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if _, err := io.WriteString(c, " "); err != nil {
					return
				}
			}
		}
	}()
	t0 := time.Now()
	resp, body := readAnswer(t, c, waitFor)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "not complete within") {
		t.Fatalf("trickling body: HTTP %d %q, want 408 (not complete within)", resp.StatusCode, body)
	}
	t.Logf("trickling body ended after %v", time.Since(t0))
}

// A client that half-closes its socket after sending a call (net/http's
// read of the connection then sees EOF, as for a client that left) is told
// with a JSON-RPC error that its call was abandoned, not sent an empty 200;
// a client that left and a half-closed one cannot be told apart (README,
// Connections), and a dropped POST must be abandoned at once
// (TestStdioClientDisconnectKeepsProcess).
func TestHalfClosedClientIsTold(t *testing.T) {
	t.Parallel()
	h := start(t, "", dest{name: "a", mode: "plain"})
	s := h.initialize("a", "")
	body := rpc(7, "tools/call", toolParams("slow", map[string]any{"ms": 300}, nil))
	c := h.rawConn(t)
	if _, err := io.WriteString(c, postHead("/a/mcp", int64(len(body)), "Mcp-Session-Id: "+s.id+"\r\n",
		"Mcp-Protocol-Version: 2025-11-25\r\n")+string(body)); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, got := readAnswer(t, c, waitFor)
	if resp.StatusCode != 200 || !strings.Contains(got, "closed its side of the connection") || !strings.Contains(got, `"id":7`) {
		t.Fatalf("half-closed client: HTTP %d %q, want a JSON-RPC error saying the call was abandoned", resp.StatusCode, got)
	}
}

// connections.per_client bounds a client's requests in progress: with a
// bound of 2 and two GET streams open, a third request gets 429 with
// Retry-After; another client is served; when a stream closes the client
// is served again. /readyz needs no credentials.
func TestPerClientRequestBound(t *testing.T) {
	t.Parallel()
	top := `connections: {per_client: 2}
clients:
  slow:
    tokens: ["sha256:` + sha256Hex(slowToken) + `"]
    destinations: ["*"]
  other:
    tokens: ["sha256:` + sha256Hex(otherToken) + `"]
    destinations: ["*"]
`
	h := start(t, top, dest{name: "a", mode: "plain"})
	if r := h.do("GET", "/readyz", nil); r.status != 200 || !strings.Contains(string(r.body), `"ready"`) {
		t.Fatalf("readyz: %s", r)
	}
	r := h.do("POST", "/a/mcp", rpc(0, "initialize", initParams("")), bearer(slowToken)...)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize: %s", r)
	}
	hdr := append(bearer(slowToken), "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25", "Accept", "text/event-stream")
	var streams []*stream
	for range 2 {
		st := h.open("GET", "/a/mcp", nil, hdr...)
		if st.status != 200 {
			t.Fatalf("GET stream: HTTP %d", st.status)
		}
		streams = append(streams, st)
	}
	ping := rpc(1, "ping", nil)
	r = h.do("POST", "/a/mcp", ping, append(bearer(slowToken), "Mcp-Session-Id", sid)...)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "connections.per_client") {
		t.Fatalf("third request of the client: %s, want 429", r)
	}
	if r := h.do("POST", "/a/mcp", rpc(0, "initialize", initParams("")), bearer(otherToken)...); r.status != 200 {
		t.Fatalf("another client: %s", r)
	}
	streams[0].cancel()
	<-streams[0].ended
	// The stream's audit line is written after its request has left the
	// client's count.
	h.audit.wait(t, "the closed stream's audit line", func(l auditLine) bool { return l.HTTPMethod == "GET" && l.Path == "/a/mcp" })
	if r = h.do("POST", "/a/mcp", ping, append(bearer(slowToken), "Mcp-Session-Id", sid)...); r.status != 200 {
		t.Fatalf("after a stream closed: %s", r)
	}
	streams[1].cancel()
}
