package streamable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	sbmcp "github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// The client's waits, shortened so a dropped stream is reopened at once.
func init() {
	listenBackoff = 10 * time.Millisecond
	listenBackoffMax = 50 * time.Millisecond
	resumeDelay = 10 * time.Millisecond
}

const waitLimit = 10 * time.Second

// ---- the upstream: a go-sdk server behind a recording handler ----

// tools are the go-sdk server's tools and what the tests observe of them.
type tools struct {
	blocked   chan struct{} // "block" started
	cancelled chan struct{} // "block" saw its context end
}

func newMCPServer(tl *tools) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= 2; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 2,
			}); err != nil {
				return nil, nil, err
			}
		}
		return text("done"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello?"}}},
			MaxTokens: 16,
		})
		if err != nil {
			return nil, nil, err
		}
		return text("sampled: " + res.Content.(*mcp.TextContent).Text), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", 64<<10)), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "drop"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		// Ends the response stream early: a server with an event store
		// expects the client to resume it; one without has lost the answer.
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
		return text("resumed"), nil, nil
	})
	if tl != nil {
		mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			close(tl.blocked)
			<-ctx.Done()
			close(tl.cancelled)
			return nil, nil, ctx.Err()
		})
	}
	return srv
}

// record is one request the upstream received.
type record struct {
	method string // HTTP method
	rpc    string // JSON-RPC method of a POST; "response" for a response
	status int    // set when the handler writes it
	header http.Header
}

// upstreamServer is an httptest server on 127.0.0.1 whose handler can be
// swapped (a fresh go-sdk handler forgets every session), and which records
// what it receives, as it arrives.
type upstreamServer struct {
	*httptest.Server
	h       atomic.Pointer[http.Handler]
	mu      sync.Mutex
	records []*record
	streams chan struct{} // a GET listen stream was opened (its first bytes written)
	gets    chan int      // the status of each GET
}

func newUpstream(t *testing.T, h http.Handler) *upstreamServer {
	return newUpstreamOn(t, nil, h)
}

// newUpstreamOn serves h on ln (nil: a new port on 127.0.0.1).
func newUpstreamOn(t *testing.T, ln net.Listener, h http.Handler) *upstreamServer {
	u := &upstreamServer{streams: make(chan struct{}, 16), gets: make(chan int, 64)}
	u.h.Store(&h)
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	if ln != nil {
		u.Listener.Close()
		u.Listener = ln
	}
	u.Start()
	t.Cleanup(u.stop)
	return u
}

// stop ends the server, cutting listen streams that would hold Close up;
// the listener goes first, so that no stream reconnects in between.
func (u *upstreamServer) stop() {
	u.Listener.Close()
	u.CloseClientConnections()
	u.Close()
}

func goSDKHandler(srv *mcp.Server, opts *mcp.StreamableHTTPOptions) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
}

func (u *upstreamServer) swap(h http.Handler) { u.h.Store(&h) }

func (u *upstreamServer) serve(w http.ResponseWriter, r *http.Request) {
	rec := &record{method: r.Method, header: r.Header.Clone()}
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if m, err := jsonrpc.Decode(body); err == nil {
			rec.rpc = m.Method
			if m.IsResponse() {
				rec.rpc = "response"
			}
		}
	}
	u.mu.Lock()
	u.records = append(u.records, rec)
	u.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, onStatus: func(code int) {
		u.mu.Lock()
		rec.status = code
		u.mu.Unlock()
		if r.Method == http.MethodGet {
			u.gets <- code
		}
	}}
	if r.Method == http.MethodGet {
		sw.opened = u.streams
	}
	(*u.h.Load()).ServeHTTP(sw, r)
}

// seen returns the records matching method and rpc ("" matches any).
func (u *upstreamServer) seen(method, rpc string) []record {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []record
	for _, r := range u.records {
		if (method == "" || r.method == method) && (rpc == "" || r.rpc == rpc) {
			out = append(out, *r)
		}
	}
	return out
}

// awaitStream waits until a GET listen stream is open.
func (u *upstreamServer) awaitStream(t *testing.T) {
	t.Helper()
	select {
	case <-u.streams:
	case <-time.After(waitLimit):
		t.Fatal("no listen stream was opened")
	}
}

type statusWriter struct {
	http.ResponseWriter
	onStatus func(int)
	status   int
	opened   chan struct{}
	once     sync.Once
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.onStatus(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.opened != nil && w.status == http.StatusOK {
		w.once.Do(func() { w.opened <- struct{}{} })
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ---- the client side: a conn and what it delivers ----

type peer struct {
	t        *testing.T
	conn     *ClientConn
	msgs     chan *jsonrpc.Message
	oversize chan []byte
	pending  []*jsonrpc.Message // delivered, not yet awaited
	history  []*jsonrpc.Message // everything delivered so far
}

func dial(t *testing.T, opts ClientOptions) *peer {
	t.Helper()
	p := &peer{t: t, msgs: make(chan *jsonrpc.Message, 256), oversize: make(chan []byte, 16)}
	deliver := func(b []byte) {
		m, err := jsonrpc.Decode(bytes.Clone(b))
		if err != nil {
			m = &jsonrpc.Message{Method: "undecodable", Params: jsonrpc.Marshal(map[string]string{"err": err.Error(), "raw": string(b)})}
		}
		p.msgs <- m
	}
	over := func(prefix []byte) { p.oversize <- bytes.Clone(prefix) }
	c, err := Dial(context.Background(), opts, deliver, over)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	p.conn = c
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func (p *peer) write(format string, args ...any) {
	p.t.Helper()
	if err := p.conn.Write([]byte(fmt.Sprintf(format, args...))); err != nil {
		p.t.Fatalf("Write: %v", err)
	}
}

// await returns the first delivered message that matches and has not been
// awaited yet. Messages of different streams may come in any order.
func (p *peer) await(what string, match func(*jsonrpc.Message) bool) *jsonrpc.Message {
	p.t.Helper()
	for i, m := range p.pending {
		if match(m) {
			p.pending = append(p.pending[:i], p.pending[i+1:]...)
			return m
		}
	}
	timeout := time.After(waitLimit)
	for {
		select {
		case m := <-p.msgs:
			p.history = append(p.history, m)
			if m.Method == "undecodable" {
				p.t.Fatalf("delivered a message that is not JSON-RPC: %s", m.Params)
			}
			if match(m) {
				return m
			}
			p.pending = append(p.pending, m)
		case <-timeout:
			p.t.Fatalf("timed out waiting for %s; got %v", what, p.history)
			return nil
		}
	}
}

func (p *peer) response(id int) *jsonrpc.Message {
	p.t.Helper()
	return p.await(fmt.Sprintf("the response to %d", id), func(m *jsonrpc.Message) bool {
		n, ok := jsonrpc.ParseIntID(m.ID)
		return m.IsResponse() && ok && n == int64(id)
	})
}

// result awaits the response to id and fails on an error response.
func (p *peer) result(id int) json.RawMessage {
	p.t.Helper()
	m := p.response(id)
	if e := m.ErrorOf(); e != nil {
		p.t.Fatalf("response %d: error %d %q", id, e.Code, e.Message)
	}
	return m.Result
}

// failure awaits the response to id and returns its error.
func (p *peer) failure(id int) *jsonrpc.Error {
	p.t.Helper()
	m := p.response(id)
	e := m.ErrorOf()
	if e == nil {
		p.t.Fatalf("response %d: want an error, got result %s", id, m.Result)
	}
	return e
}

func (p *peer) handshake() json.RawMessage {
	p.t.Helper()
	p.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"switchboard-test","version":"1"}}}`)
	res := p.result(1)
	p.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return res
}

func toolText(t *testing.T, result json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result: %s", result)
	}
	if r.IsError {
		t.Fatalf("tool failed: %s", result)
	}
	return r.Content[0].Text
}

func awaitDone(t *testing.T, c *ClientConn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(waitLimit):
		t.Fatal("connection did not end")
	}
}

// ---- tests ----

// TestClientLegacySession runs a whole legacy session against the go-sdk,
// with SSE and with JSON responses: handshake, a list, progress, a sampling
// request answered by the client, and the session's end.
func TestClientLegacySession(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			up := newUpstream(t, goSDKHandler(newMCPServer(nil), &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
			p := dial(t, ClientOptions{URL: up.URL, Header: http.Header{"X-Api-Key": {"secret"}}})

			init := p.handshake()
			if v, _ := jsonrpc.StringMember(init, "protocolVersion"); v != "2025-11-25" {
				t.Fatalf("protocolVersion = %q", v)
			}
			up.awaitStream(t) // with JSON responses, progress and sampling travel on it

			p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			if res := p.result(2); !bytes.Contains(res, []byte(`"sample"`)) {
				t.Fatalf("tools/list = %s", res)
			}

			p.write(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"progress","arguments":{},"_meta":{"progressToken":"tok"}}}`)
			for range 2 {
				p.await("progress", func(m *jsonrpc.Message) bool {
					tok, _ := jsonrpc.StringMember(m.Params, "progressToken")
					return m.Method == "notifications/progress" && tok == "tok"
				})
			}
			if got := toolText(t, p.result(3)); got != "done" {
				t.Fatalf("progress tool = %q", got)
			}

			p.write(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sample","arguments":{}}}`)
			req := p.await("sampling request", func(m *jsonrpc.Message) bool { return m.Method == "sampling/createMessage" })
			if !req.IsRequest() {
				t.Fatalf("sampling/createMessage without id: %v", req)
			}
			p.write(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"hi there"},"model":"test"}}`, req.ID)
			if got := toolText(t, p.result(4)); got != "sampled: hi there" {
				t.Fatalf("sample tool = %q", got)
			}

			inits := up.seen(http.MethodPost, "initialize")
			if len(inits) != 1 || inits[0].header.Get(sbmcp.HeaderSessionID) != "" {
				t.Fatalf("initialize POSTs: %+v", inits)
			}
			var sid string
			for _, r := range up.seen("", "") {
				if r.header.Get("X-Api-Key") != "secret" {
					t.Errorf("%s %s without the configured header", r.method, r.rpc)
				}
				if r.rpc == "initialize" {
					continue
				}
				if sid == "" {
					sid = r.header.Get(sbmcp.HeaderSessionID)
				}
				if got := r.header.Get(sbmcp.HeaderSessionID); got == "" || got != sid {
					t.Errorf("%s %s: Mcp-Session-Id %q, want %q", r.method, r.rpc, got, sid)
				}
				if got := r.header.Get(sbmcp.HeaderProtocolVersion); got != "2025-11-25" {
					t.Errorf("%s %s: MCP-Protocol-Version %q", r.method, r.rpc, got)
				}
			}
			if len(up.seen(http.MethodPost, "response")) != 1 {
				t.Errorf("the sampling response was not POSTed once")
			}

			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := p.conn.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			dels := up.seen(http.MethodDelete, "")
			if len(dels) != 1 || dels[0].header.Get(sbmcp.HeaderSessionID) != sid || dels[0].status != http.StatusNoContent {
				t.Fatalf("DELETE: %+v", dels)
			}
			if !errors.Is(p.conn.Err(), ErrConnClosed) {
				t.Fatalf("Err = %v", p.conn.Err())
			}
			if err := p.conn.Write([]byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)); err == nil {
				t.Fatal("Write after Close succeeded")
			}
		})
	}
}

// TestClientStateless: a stateless server mints no session and has no
// listen stream (405), which the client stops asking for.
func TestClientStateless(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), &mcp.StreamableHTTPOptions{Stateless: true}))
	var logged lockedBuffer
	p := dial(t, ClientOptions{URL: up.URL, Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	p.handshake()
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{},"_meta":{"progressToken":7}}}`)
	p.await("progress", func(m *jsonrpc.Message) bool { return m.Method == "notifications/progress" })
	if got := toolText(t, p.result(2)); got != "done" {
		t.Fatalf("progress tool = %q", got)
	}
	select {
	case status := <-up.gets:
		if status != http.StatusMethodNotAllowed {
			t.Fatalf("GET answered %d", status)
		}
	case <-time.After(waitLimit):
		t.Fatal("no GET")
	}
	// The listen loop ends on its own after the 405: Close finds it gone.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if gets := up.seen(http.MethodGet, ""); len(gets) != 1 {
		t.Fatalf("GETs: %+v", gets)
	}
	for _, r := range up.seen(http.MethodPost, "") {
		if r.header.Get(sbmcp.HeaderSessionID) != "" {
			t.Errorf("%s carried a session id", r.rpc)
		}
	}
	// A server without sessions is normal: nothing to warn about.
	if w := logged.String(); w != "" {
		t.Errorf("warnings for a server without a session id:\n%s", w)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes (a log).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestClientModern sends 2026-07-28 requests: no handshake, the version
// from _meta, and the Mcp-Method and Mcp-Name headers.
func TestClientModern(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), &mcp.StreamableHTTPOptions{Stateless: true}))
	p := dial(t, ClientOptions{URL: up.URL})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	p.write(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{%s}}`, meta)
	if res := p.result(1); !bytes.Contains(res, []byte(`"echo"`)) {
		t.Fatalf("tools/list = %s", res)
	}
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hé"},%s}}`, meta)
	if got := toolText(t, p.result(2)); got != "hé" {
		t.Fatalf("echo = %q", got)
	}
	calls := up.seen(http.MethodPost, "tools/call")
	if len(calls) != 1 {
		t.Fatalf("tools/call POSTs: %+v", calls)
	}
	h := calls[0].header
	if h.Get(sbmcp.HeaderProtocolVersion) != "2026-07-28" || h.Get(sbmcp.HeaderMethod) != "tools/call" || h.Get(sbmcp.HeaderName) != "echo" || h.Get(sbmcp.HeaderSessionID) != "" {
		t.Fatalf("headers: %v", h)
	}
	if len(up.seen(http.MethodGet, "")) != 0 {
		t.Fatal("a modern connection opened a listen stream")
	}
}

// TestClientFailures: a request that cannot be answered gets a -32000
// error response naming why, and the connection goes on.
func TestClientFailures(t *testing.T) {
	sdk := goSDKHandler(newMCPServer(nil), nil)
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		sdk.ServeHTTP(w, r)
	})
	html := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>login</body></html>")
	})
	broken := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()

	tests := []struct {
		name   string
		h      http.Handler // nil: the refused address
		header http.Header
		want   []string
	}{
		{"unauthorized", auth, http.Header{"Authorization": {"Bearer bad"}}, []string{"upstream returned 401 Unauthorized"}},
		{"html", html, nil, []string{"upstream response is not MCP (Content-Type text/html)"}},
		{"server error", broken, nil, []string{"upstream returned 500 Internal Server Error: boom"}},
		{"refused", nil, nil, []string{"upstream unreachable: dial tcp", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := refused
			var up *upstreamServer
			if tt.h != nil {
				up = newUpstream(t, tt.h)
				url = up.URL
			}
			p := dial(t, ClientOptions{URL: url, Header: tt.header})
			p.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			e := p.failure(1)
			if e.Code != sbmcp.CodeUpstreamUnavailable {
				t.Errorf("code = %d", e.Code)
			}
			for _, w := range tt.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q does not contain %q", e.Message, w)
				}
			}
			if strings.Contains(e.Message, refused) {
				t.Errorf("message %q names the URL", e.Message)
			}
			if up != nil && len(up.seen(http.MethodPost, "")) != 1 {
				t.Errorf("the request was retried: %+v", up.seen("", ""))
			}
			select {
			case <-p.conn.Done():
				t.Fatal("a failed request ended the connection")
			default:
			}
		})
	}

	t.Run("authorized", func(t *testing.T) {
		up := newUpstream(t, auth)
		p := dial(t, ClientOptions{URL: up.URL, Header: http.Header{"Authorization": {"Bearer good"}}})
		p.handshake()
	})
}

// TestClientOversize: a message over MaxMessage is reported with its
// first bytes and skipped; the connection goes on.
func TestClientOversize(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			up := newUpstream(t, goSDKHandler(newMCPServer(nil), &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
			p := dial(t, ClientOptions{URL: up.URL, MaxMessage: 4096})
			p.handshake()
			p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}`)
			select {
			case prefix := <-p.oversize:
				if id, ok := jsonrpc.PeekID(prefix); !ok || string(id) != "2" {
					t.Fatalf("oversize prefix %.80q has no id 2", prefix)
				}
				if len(prefix) > prefixLen {
					t.Fatalf("prefix of %d bytes", len(prefix))
				}
			case <-time.After(waitLimit):
				t.Fatal("oversize not called")
			}
			p.write(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
			if got := toolText(t, p.result(3)); got != "still here" {
				t.Fatalf("echo = %q", got)
			}
			for _, m := range p.history {
				if n, _ := jsonrpc.ParseIntID(m.ID); n == 2 {
					t.Fatalf("the oversized response was delivered: %.100s", m)
				}
			}
		})
	}
}

// TestClientSessionLost: the server forgets the session (a fresh go-sdk
// handler); the client re-initializes with the cached handshake, swallows
// the replayed initialize response and retries the request.
func TestClientSessionLost(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), nil))
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	up.awaitStream(t)
	oldSID := up.seen(http.MethodPost, "notifications/initialized")[0].header.Get(sbmcp.HeaderSessionID)

	up.swap(goSDKHandler(newMCPServer(nil), nil))
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`)
	if got := toolText(t, p.result(2)); got != "again" {
		t.Fatalf("echo = %q", got)
	}
	inits := 0
	for _, m := range p.history {
		if n, _ := jsonrpc.ParseIntID(m.ID); n == 1 {
			inits++
		}
	}
	if inits != 1 {
		t.Fatalf("%d initialize responses delivered; the replayed one must be swallowed", inits)
	}
	calls := up.seen(http.MethodPost, "tools/call")
	if len(calls) != 2 || calls[0].status != http.StatusNotFound || calls[0].header.Get(sbmcp.HeaderSessionID) != oldSID {
		t.Fatalf("tools/call POSTs: %+v", calls)
	}
	newSID := calls[1].header.Get(sbmcp.HeaderSessionID)
	if newSID == "" || newSID == oldSID {
		t.Fatalf("retry carried session %q (old %q)", newSID, oldSID)
	}
	initPosts := up.seen(http.MethodPost, "initialize")
	inited := up.seen(http.MethodPost, "notifications/initialized")
	if len(initPosts) != 2 || initPosts[1].header.Get(sbmcp.HeaderSessionID) != "" || len(inited) != 2 || inited[1].header.Get(sbmcp.HeaderSessionID) != newSID {
		t.Fatalf("handshake not replayed: initialize %+v, initialized %+v", initPosts, inited)
	}
}

// TestClientServerRestart: the server process is replaced on the same
// address. The listen stream drops, finds the session gone, and the client
// re-initializes; the new server's notifications reach it.
func TestClientServerRestart(t *testing.T) {
	srv := newMCPServer(nil)
	up := newUpstream(t, goSDKHandler(srv, nil))
	addr := up.Listener.Addr().String()
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	up.awaitStream(t)

	up.stop()
	srv2 := newMCPServer(nil)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on the same address: %v", err)
	}
	up2 := newUpstreamOn(t, ln, goSDKHandler(srv2, nil))
	t.Cleanup(func() { p.conn.Close(context.Background()) }) // before up2 stops

	up2.awaitStream(t) // reopened after the re-initialization
	srv2.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	p.await("tools/list_changed", func(m *jsonrpc.Message) bool { return m.Method == "notifications/tools/list_changed" })
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if res := p.result(2); !bytes.Contains(res, []byte(`"late"`)) {
		t.Fatalf("tools/list = %s", res)
	}
}

// TestClientGet404: a server that answers GET with 404 while the session
// lives (instead of 405) is not mistaken for a lost session.
func TestClientGet404(t *testing.T) {
	sdk := goSDKHandler(newMCPServer(nil), nil)
	up := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.NotFound(w, r)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	select {
	case status := <-up.gets:
		if status != http.StatusNotFound {
			t.Fatalf("GET answered %d", status)
		}
	case <-time.After(waitLimit):
		t.Fatal("no GET")
	}
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	p.result(2)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(up.seen(http.MethodPost, "initialize")); n != 1 {
		t.Fatalf("%d initialize POSTs: the session was re-initialized", n)
	}
	if n := len(up.seen(http.MethodGet, "")); n != 1 {
		t.Fatalf("%d GETs: the listen loop went on", n)
	}
	for _, m := range p.history {
		if m.IsResponse() && !bytes.Equal(m.ID, []byte("1")) && !bytes.Equal(m.ID, []byte("2")) {
			t.Fatalf("the probe's answer was delivered: %v", m)
		}
	}
}

// TestClientReinitFails: when the handshake cannot be replayed the request
// fails and the connection ends, for the upstream package to restart it.
func TestClientReinitFails(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), nil))
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	p.write(`{"jsonrpc":"2.0","id":9,"method":"ping"}`) // sent after initialized was taken
	p.result(9)
	up.swap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(sbmcp.HeaderSessionID) != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	e := p.failure(2)
	if e.Code != sbmcp.CodeUpstreamUnavailable || !strings.Contains(e.Message, "503 Service Unavailable") {
		t.Fatalf("error = %d %q", e.Code, e.Message)
	}
	awaitDone(t, p.conn)
	if err := p.conn.Err(); err == nil || !strings.Contains(err.Error(), "re-initialization failed") {
		t.Fatalf("Err = %v", err)
	}
}

// TestClientResume: the server closes a response stream early and the
// client resumes it with GET and Last-Event-ID.
func TestClientResume(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"drop","arguments":{}}}`)
	if got := toolText(t, p.result(2)); got != "resumed" {
		t.Fatalf("drop = %q", got)
	}
	resumed := false
	for _, r := range up.seen(http.MethodGet, "") {
		if r.header.Get("Last-Event-ID") != "" {
			resumed = true
		}
	}
	if !resumed {
		t.Fatalf("no GET with Last-Event-ID: %+v", up.seen(http.MethodGet, ""))
	}
}

// TestClientStreamEndsEarly: without event ids the stream cannot be
// resumed; the request fails instead of hanging.
func TestClientStreamEndsEarly(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), nil))
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"drop","arguments":{}}}`)
	e := p.failure(2)
	if e.Code != sbmcp.CodeUpstreamUnavailable || !strings.Contains(e.Message, "closed the response stream before answering") {
		t.Fatalf("error = %d %q", e.Code, e.Message)
	}
}

// TestClientCancel: a legacy request is cancelled with
// notifications/cancelled; a modern one by closing its stream, without
// sending the notification.
func TestClientCancel(t *testing.T) {
	t.Run("legacy", func(t *testing.T) {
		tl := &tools{blocked: make(chan struct{}), cancelled: make(chan struct{})}
		up := newUpstream(t, goSDKHandler(newMCPServer(tl), nil))
		p := dial(t, ClientOptions{URL: up.URL})
		p.handshake()
		p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
		wait(t, tl.blocked, "the tool to start")
		p.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		wait(t, tl.cancelled, "the tool to be cancelled")
		if len(up.seen(http.MethodPost, "notifications/cancelled")) != 1 {
			t.Fatal("notifications/cancelled not sent")
		}
	})
	t.Run("modern", func(t *testing.T) {
		tl := &tools{blocked: make(chan struct{}), cancelled: make(chan struct{})}
		up := newUpstream(t, goSDKHandler(newMCPServer(tl), &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))
		p := dial(t, ClientOptions{URL: up.URL})
		p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		wait(t, tl.blocked, "the tool to start")
		p.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		wait(t, tl.cancelled, "the tool to be cancelled")
		if n := len(up.seen(http.MethodPost, "notifications/cancelled")); n != 0 {
			t.Fatalf("notifications/cancelled POSTed %d times", n)
		}
	})
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestClientOrder: messages written back to back reach the server in
// order, each notification acknowledged before the next message.
func TestClientOrder(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), nil))
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	const n = 20
	for i := range n {
		p.write(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":%d}}`, i)
	}
	p.write(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	p.result(2)
	var got []string
	for _, r := range up.seen(http.MethodPost, "") {
		got = append(got, r.rpc)
	}
	want := append([]string{"initialize", "notifications/initialized"}, slicesRepeat("notifications/progress", n)...)
	want = append(want, "ping")
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("server saw %v", got)
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestClientCloseIdle(t *testing.T) {
	p := dial(t, ClientOptions{URL: "http://127.0.0.1:1/mcp"})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, p.conn)
	if !errors.Is(p.conn.Err(), ErrConnClosed) {
		t.Fatalf("Err = %v", p.conn.Err())
	}
}

func TestDialInvalidURL(t *testing.T) {
	for _, u := range []string{"", "ftp://example.com/mcp", "http://", "://x"} {
		if _, err := Dial(context.Background(), ClientOptions{URL: u}, func([]byte) {}, nil); err == nil {
			t.Errorf("Dial(%q) succeeded", u)
		}
	}
}

// downstream is the client side of an upstream.Member, for the test below.
type downstream struct{ ended chan error }

func (d *downstream) Deliver(*jsonrpc.Message) {}
func (d *downstream) End(err error)            { d.ended <- err }

// TestClientBehindUpstream puts the connection under the upstream package,
// as the gateway does: the Upstream's own handshake, a call with progress,
// a session lost and recovered in between, and the session's end.
func TestClientBehindUpstream(t *testing.T) {
	up := newUpstream(t, goSDKHandler(newMCPServer(nil), nil))
	u := upstream.New(upstream.Options{
		Name:   "test",
		Shared: true,
		Dial: func(ctx context.Context, deliver, oversize func([]byte)) (upstream.Conn, error) {
			c, err := Dial(ctx, ClientOptions{URL: up.URL}, deliver, oversize)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return c, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	d := &downstream{ended: make(chan error, 1)}
	init, _ := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
	m, res, err := u.Join(ctx, d, init)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	if v, _ := jsonrpc.StringMember(res.Result, "protocolVersion"); v != "2025-11-25" {
		t.Fatalf("initialize result %s", res)
	}
	call := func(id, params string) string {
		t.Helper()
		req, _ := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`))
		c, err := m.Call(ctx, req)
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		var progress int
		for {
			msg, err := c.Next(ctx)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if msg.Method == "notifications/progress" {
				progress++
				continue
			}
			if msg.Method == "notifications/message" {
				continue // the re-initialization's notice to the client
			}
			if !msg.IsResponse() || string(msg.ID) != id {
				t.Fatalf("unexpected %v", msg)
			}
			if e := msg.ErrorOf(); e != nil {
				t.Fatalf("call %s: %d %s", id, e.Code, e.Message)
			}
			return fmt.Sprintf("%s/%d", toolText(t, msg.Result), progress)
		}
	}
	if got := call(`"a"`, `{"name":"progress","arguments":{},"_meta":{"progressToken":"p"}}`); got != "done/2" {
		t.Fatalf("progress call = %q", got)
	}
	up.swap(goSDKHandler(newMCPServer(nil), nil)) // the server forgets the session
	if got := call(`"b"`, `{"name":"echo","arguments":{"text":"hi"}}`); got != "hi/0" {
		t.Fatalf("echo call = %q", got)
	}
	if err := u.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := len(up.seen(http.MethodDelete, "")); n != 1 {
		t.Fatalf("%d DELETEs", n)
	}
}
