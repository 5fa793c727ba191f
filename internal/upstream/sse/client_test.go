package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	sbmcp "github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/sse"
)

const waitLimit = 10 * time.Second

// ---- a legacy go-sdk server ----

func newMCPServer() *mcp.Server {
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
	return srv
}

// legacyServer serves the go-sdk's HTTP+SSE handler on 127.0.0.1; POSTs
// can be made to fail with a chosen status.
type legacyServer struct {
	*httptest.Server
	failPosts atomic.Int32 // non-zero: answer POSTs with this status
	header    atomic.Value // http.Header of the last request
}

func newLegacyServer(t *testing.T) *legacyServer {
	srv := newMCPServer()
	sdk := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	l := &legacyServer{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.header.Store(r.Header.Clone())
		if code := l.failPosts.Load(); code != 0 && r.Method == http.MethodPost {
			http.Error(w, "no", int(code))
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		l.CloseClientConnections()
		l.Close()
	})
	return l
}

type peer struct {
	t        *testing.T
	conn     *ClientConn
	msgs     chan *jsonrpc.Message
	oversize chan []byte
	pending  []*jsonrpc.Message
	history  []*jsonrpc.Message
}

func newPeer() *peer {
	return &peer{msgs: make(chan *jsonrpc.Message, 256), oversize: make(chan []byte, 16)}
}

func (p *peer) deliver(b []byte) {
	m, err := jsonrpc.Decode(bytes.Clone(b))
	if err != nil {
		m = &jsonrpc.Message{Method: "undecodable", Params: jsonrpc.Marshal(map[string]string{"err": err.Error(), "raw": string(b)})}
	}
	p.msgs <- m
}

func (p *peer) over(prefix []byte) { p.oversize <- bytes.Clone(prefix) }

func dial(t *testing.T, opts ClientOptions) *peer {
	t.Helper()
	p := newPeer()
	p.t = t
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := Dial(ctx, opts, p.deliver, p.over)
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

func (p *peer) result(id int) json.RawMessage {
	p.t.Helper()
	m := p.response(id)
	if e := m.ErrorOf(); e != nil {
		p.t.Fatalf("response %d: error %d %q", id, e.Code, e.Message)
	}
	return m.Result
}

func (p *peer) handshake() {
	p.t.Helper()
	p.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{"sampling":{}},"clientInfo":{"name":"switchboard-test","version":"1"}}}`)
	p.result(1)
	p.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func toolText(t *testing.T, result json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(result, &r); err != nil || len(r.Content) == 0 || r.IsError {
		t.Fatalf("not a successful tool result: %s", result)
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

// ---- ClientConn ----

// TestClientSession runs a legacy session against the go-sdk's SSE
// handler: handshake, list, progress, and a sampling request answered by
// the client.
func TestClientSession(t *testing.T) {
	up := newLegacyServer(t)
	p := dial(t, ClientOptions{URL: up.URL + "/sse", Header: http.Header{"X-Api-Key": {"secret"}}})
	p.handshake()

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
		t.Fatalf("progress = %q", got)
	}

	p.write(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sample","arguments":{}}}`)
	req := p.await("sampling request", func(m *jsonrpc.Message) bool { return m.Method == "sampling/createMessage" && m.IsRequest() })
	p.write(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"hi there"},"model":"test"}}`, req.ID)
	if got := toolText(t, p.result(4)); got != "sampled: hi there" {
		t.Fatalf("sample = %q", got)
	}
	if h, _ := up.header.Load().(http.Header); h.Get("X-Api-Key") != "secret" {
		t.Fatalf("configured header not sent: %v", h)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(p.conn.Err(), ErrConnClosed) {
		t.Fatalf("Err = %v", p.conn.Err())
	}
	if err := p.conn.Write([]byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// TestClientStreamDrop: when the event stream drops the connection ends,
// for the upstream package to restart it.
func TestClientStreamDrop(t *testing.T) {
	up := newLegacyServer(t)
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()
	up.CloseClientConnections()
	awaitDone(t, p.conn)
	if err := p.conn.Err(); err == nil || errors.Is(err, ErrConnClosed) {
		t.Fatalf("Err = %v", err)
	}
	if err := p.conn.Write([]byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)); err == nil {
		t.Fatal("Write after the end succeeded")
	}
}

// TestClientPostFailure: a request whose POST fails gets a -32000 error;
// a 404 (the server forgot the session) also ends the connection.
func TestClientPostFailure(t *testing.T) {
	up := newLegacyServer(t)
	p := dial(t, ClientOptions{URL: up.URL})
	p.handshake()

	up.failPosts.Store(http.StatusServiceUnavailable)
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	e := p.response(2).ErrorOf()
	if e == nil || e.Code != sbmcp.CodeUpstreamUnavailable || !strings.Contains(e.Message, "upstream returned 503 Service Unavailable") {
		t.Fatalf("error = %+v", e)
	}
	up.failPosts.Store(0)
	p.write(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	p.result(3)

	up.failPosts.Store(http.StatusNotFound)
	p.write(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	if e := p.response(4).ErrorOf(); e == nil || !strings.Contains(e.Message, "404") {
		t.Fatalf("error = %+v", e)
	}
	awaitDone(t, p.conn)
	if err := p.conn.Err(); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("Err = %v", err)
	}
}

// TestClientOversize: a message over MaxMessage is reported and skipped;
// the stream goes on.
func TestClientOversize(t *testing.T) {
	up := newLegacyServer(t)
	p := dial(t, ClientOptions{URL: up.URL, MaxMessage: 4096})
	p.handshake()
	p.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}`)
	select {
	case prefix := <-p.oversize:
		if id, ok := jsonrpc.PeekID(prefix); !ok || string(id) != "2" {
			t.Fatalf("prefix %.80q has no id 2", prefix)
		}
	case <-time.After(waitLimit):
		t.Fatal("oversize not called")
	}
	p.write(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
	if got := toolText(t, p.result(3)); got != "still here" {
		t.Fatalf("echo = %q", got)
	}
}

func TestDialFailures(t *testing.T) {
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer unauthorized.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html></html>")
	}))
	defer html.Close()
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse.NewWriter(w).Event("endpoint", "", []byte("http://elsewhere.example/message?session=1"))
		<-r.Context().Done()
	}))
	defer func() { foreign.CloseClientConnections(); foreign.Close() }()
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse.NewWriter(w).Comment("no endpoint for you")
		<-r.Context().Done()
	}))
	defer func() { silent.CloseClientConnections(); silent.Close() }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/sse"
	ln.Close()

	for _, tt := range []struct {
		name, url string
		want      []string
	}{
		{"unauthorized", unauthorized.URL, []string{"upstream returned 401 Unauthorized"}},
		{"html", html.URL, []string{"upstream response is not MCP (Content-Type text/html)"}},
		{"foreign endpoint", foreign.URL, []string{"endpoint on another origin (http://elsewhere.example"}},
		{"no endpoint", silent.URL, []string{"no endpoint event", "deadline exceeded"}},
		{"refused", refused, []string{"upstream unreachable", "connection refused"}},
		{"bad scheme", "ftp://example.com/sse", []string{"want an http or https URL"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			p := newPeer()
			c, err := Dial(ctx, ClientOptions{URL: tt.url}, p.deliver, p.over)
			if err == nil {
				c.Close(context.Background())
				t.Fatal("Dial succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
