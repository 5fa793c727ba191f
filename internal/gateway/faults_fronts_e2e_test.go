package gateway_test

// The same fault of a server gets the same answer on every front (issue
// 22): a call that times out, a child that exits under a call, and a server
// whose address refuses connections are answered with one JSON-RPC code
// (and, where the front has one, one HTTP status) on /{d}/mcp, /{d}/sse,
// the aggregated /mcp and /mcp/{ns}, the stdio front and the relay, because
// every front answers through mcp.Classify (an aggregated endpoint's call
// to a member that does not serve through mcp.FaultCode).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/relay"
)

// frontFault is one fault: the destination that has it (and the namespace
// "n"+dest of that destination alone), and the tool call that meets it;
// tool "" when the session cannot even be opened.
type frontFault struct {
	name, dest, tool string
	args             map[string]any
	status, code     int // the answer
}

// frontAnswer is a front's answer to the call that met the fault (or to
// the initialize that did). Status is 0 on the fronts without HTTP
// statuses: the legacy SSE stream, stdio and the relay answer with the
// JSON-RPC error alone.
type frontAnswer struct {
	status, code int
	message      string
	data         json.RawMessage // the error's data, over HTTP
}

// answerOfResp is the answer an HTTP front gave: its status and the code
// of its last JSON-RPC message.
func answerOfResp(t *testing.T, r *resp) frontAnswer {
	t.Helper()
	m := r.last(t)
	if m.Error == nil {
		t.Fatalf("got %s, want a JSON-RPC error", r)
	}
	return frontAnswer{status: r.status, code: m.Error.Code, message: m.Error.Message, data: m.Error.Data}
}

// answerOfErr is the answer a go-sdk client got as an error.
func answerOfErr(t *testing.T, err error) frontAnswer {
	t.Helper()
	var we *sdkjsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("got %v, want a JSON-RPC error", err)
	}
	return frontAnswer{code: int(we.Code), message: we.Message}
}

// sdkCall opens a legacy go-sdk session over tr and makes the fault's call;
// it returns the error the fault caused.
func sdkCall(t *testing.T, tr mcp.Transport, tool string, args map[string]any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*waitFor)
	defer cancel()
	cs, err := newInteropClient().Client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		if tool != "" {
			t.Fatalf("connect: %v", err)
		}
		return err
	}
	defer cs.Close()
	if tool == "" {
		t.Fatal("connected, want the fault to fail the initialize")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err == nil {
		t.Fatalf("%s answered %+v, want a JSON-RPC error", tool, res)
	}
	return err
}

// pipeTransport runs serve on a pair of pipes (stdin, stdout as serve sees
// them) until the test ends and returns the client's side of them.
func pipeTransport(t *testing.T, serve func(in io.Reader, out io.Writer) error) mcp.Transport {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- serve(inR, outW); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(3 * waitFor):
			t.Error("the front did not end within 30s of its stdin closing")
		}
	})
	return &mcp.IOTransport{Reader: outR, Writer: inW}
}

// startFaults serves the destinations of the fault tests: hang (a child
// whose wait tool answers only when released), crash (a child per session
// whose crash tool exits it) and refused (an address nothing listens on),
// with a timeout of 3 s; namespace n<d> serves destination d alone. parse
// returns the config again (for a stdio front's own gateway).
func startFaults(t *testing.T) (h *harness, parse func() *config.Config, refused string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused = "http://" + ln.Addr().String() + "/mcp" // nothing listens there once closed
	ln.Close()

	tag := newTag(t)
	top := "timeout: 3s\nrestart: {delays: [10ms], max_attempts: 1}\nnamespaces:\n" +
		"  nhang: {servers: [hang]}\n  ncrash: {servers: [crash]}\n  nrefused: {servers: [refused]}\n"
	yml := configYAML(t, tag, top, dest{name: "hang", mode: "plain"}, dest{name: "crash", mode: "plain", isolation: "session"}) +
		remoteDest{name: "refused", typ: "streamable_http", url: refused}.yaml()
	parse = func() *config.Config {
		cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
		if err != nil {
			t.Fatalf("config:\n%s\n%v", yml, err)
		}
		return cfg
	}
	h, _ = serveConfig(t, tag, parse(), gateway.Options{}, nil)
	return h, parse, refused
}

// TestFaultsSameOnEveryFront: a call that times out (-32001, HTTP 504), a
// child that exits during a call (-32000, 503) and a server that refuses
// connections (-32000, 503, at initialize) get the same answer on every
// front. The go-sdk is the client where only the JSON-RPC error is seen
// (the SSE stream, stdio, the relay; it hides the body of a 503 or 504 from
// its caller), raw HTTP where the status is. On /mcp, which merges all
// three, the session opens with the servers that serve, and a call to the
// refusing one gets the answer its own endpoint gives, naming it in
// data.server.
func TestFaultsSameOnEveryFront(t *testing.T) {
	t.Parallel()
	h, parse, refused := startFaults(t)

	faults := []frontFault{
		{"timeout", "hang", "wait", map[string]any{"key": "never"}, 504, -32001},
		{"child gone", "crash", "crash", nil, 503, -32000},
		{"refused", "refused", "", nil, 503, -32000},
	}
	// tool is the fault's tool as namespace n<d> exposes it.
	tool := func(f frontFault) string {
		if f.tool == "" {
			return ""
		}
		return f.dest + "__" + f.tool
	}
	fronts := []struct {
		name string
		call func(t *testing.T, f frontFault) frontAnswer
	}{
		{"/{d}/mcp", func(t *testing.T, f frontFault) frontAnswer {
			s, r := h.initAt("/" + f.dest + "/mcp")
			if s == nil {
				return answerOfResp(t, r)
			}
			return answerOfResp(t, h.do("POST", s.path, rpc(2, "tools/call", toolParams(f.tool, f.args, nil)), "Mcp-Session-Id", s.id))
		}},
		{"/mcp", func(t *testing.T, f frontFault) frontAnswer {
			s, r := h.initAt("/mcp")
			if s == nil {
				t.Fatalf("initialize /mcp (one server down is not the endpoint down): %s", r)
			}
			name := tool(f)
			if name == "" {
				name = f.dest + "__anything" // the server never listed a tool
			}
			a := answerOfResp(t, h.do("POST", s.path, rpc(2, "tools/call", toolParams(name, f.args, nil)), "Mcp-Session-Id", s.id))
			if server, _ := jsonrpc.StringMember(a.data, "server"); f.tool == "" && server != f.dest {
				t.Errorf("data %s, want data.server %q", a.data, f.dest)
			}
			return a
		}},
		{"/mcp/{ns}", func(t *testing.T, f frontFault) frontAnswer {
			s, r := h.initAt("/mcp/n" + f.dest)
			if s == nil {
				return answerOfResp(t, r)
			}
			return answerOfResp(t, h.do("POST", s.path, rpc(2, "tools/call", toolParams(tool(f), f.args, nil)), "Mcp-Session-Id", s.id))
		}},
		{"/{d}/sse", func(t *testing.T, f frontFault) frontAnswer {
			return answerOfErr(t, sdkCall(t, &mcp.SSEClientTransport{Endpoint: h.url("/" + f.dest + "/sse")}, f.tool, f.args))
		}},
		{"stdio", func(t *testing.T, f frontFault) frontAnswer {
			g, err := gateway.New(parse(), gateway.Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			tr := pipeTransport(t, func(in io.Reader, out io.Writer) error {
				return g.ServeStdio(context.Background(), "n"+f.dest, in, out)
			})
			return answerOfErr(t, sdkCall(t, tr, tool(f), f.args))
		}},
		{"relay", func(t *testing.T, f frontFault) frontAnswer {
			// The relay's remote: the refusing address itself, or the
			// gateway's endpoint of the destination whose child fails.
			url := refused
			if f.dest != "refused" {
				url = h.url("/" + f.dest + "/mcp")
			}
			tr := pipeTransport(t, func(in io.Reader, out io.Writer) error {
				return relay.Run(context.Background(), relay.Options{URL: url, ReconnectDelay: 10 * time.Millisecond}, in, out)
			})
			return answerOfErr(t, sdkCall(t, tr, f.tool, f.args))
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for _, fr := range fronts {
				t.Run(fr.name, func(t *testing.T) {
					t.Parallel()
					got := fr.call(t, f)
					t.Logf("HTTP %d, %d %s", got.status, got.code, got.message)
					if got.code != f.code || (got.status != 0 && got.status != f.status) {
						t.Errorf("%s on %s: HTTP %d, code %d (%s); want HTTP %d, code %d", f.name, fr.name, got.status, got.code, got.message, f.status, f.code)
					}
				})
			}
		})
	}
}

// lineClient speaks newline-delimited JSON-RPC to a front served on pipes
// (stdio, the relay) until the test ends.
type lineClient struct {
	t    *testing.T
	in   io.Writer
	msgs chan wireMsg
}

func newLineClient(t *testing.T, serve func(in io.Reader, out io.Writer) error) *lineClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- serve(inR, outW); outW.Close() }()
	c := &lineClient{t: t, in: inW, msgs: make(chan wireMsg, 64)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(c.msgs)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m wireMsg
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				c.msgs <- m
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		go func() {
			for range c.msgs { // the front's last words, unread
			}
		}()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(3 * waitFor):
			t.Error("the front did not end within 30s of its stdin closing")
		}
		<-read
	})
	return c
}

func (c *lineClient) send(b []byte) {
	c.t.Helper()
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next message the front wrote.
func (c *lineClient) next() wireMsg {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("the front's output ended while a message was expected")
		}
		return m
	case <-time.After(waitFor):
		c.t.Fatalf("no message from the front within %s", waitFor)
	}
	return wireMsg{}
}

// TestDuplicateIDSameOnEveryFront: a request that reuses the id of a call
// still in flight is the client's mistake, and every front says so alike:
// -32600 (HTTP 409 where there are statuses). The legacy SSE stream, stdio
// and the relay used to call it "upstream unavailable" (-32000).
func TestDuplicateIDSameOnEveryFront(t *testing.T) {
	t.Parallel()
	h, parse, _ := startFaults(t)
	const id = 9
	echo := func(tool string) []byte {
		return rpc(id, "tools/call", toolParams(tool, map[string]any{"text": "again"}, nil))
	}
	wait := func(tool, key string) []byte {
		return rpc(id, "tools/call", toolParams(tool, map[string]any{"key": key}, "w-"+key))
	}
	release := func(tool, key string) []byte {
		return rpc(id+1, "tools/call", toolParams(tool, map[string]any{"key": key}, nil))
	}
	// lines runs the exchange on a stdio-like front: initialize, a wait
	// call seen started (its progress), the same id again, whose answer
	// it returns, then the release of the wait.
	lines := func(t *testing.T, c *lineClient, prefix string) frontAnswer {
		c.send(rpc(0, "initialize", initParams("")))
		if m := c.next(); m.Result == nil {
			t.Fatalf("initialize: %s", describe(m))
		}
		c.send(rpc(nil, "notifications/initialized", nil))
		c.send(wait(prefix+"wait", t.Name()))
		expectMethod(t, c.next(), "notifications/progress")
		c.send(echo(prefix + "echo"))
		m := c.next()
		c.send(release(prefix+"release", t.Name()))
		if m.Error == nil || string(m.ID) != fmt.Sprint(id) {
			t.Fatalf("the second request %d: %s, want a JSON-RPC error", id, describe(m))
		}
		return frontAnswer{code: m.Error.Code, message: m.Error.Message}
	}
	fronts := []struct {
		name string
		call func(t *testing.T) frontAnswer
	}{
		{"/{d}/mcp", func(t *testing.T) frontAnswer {
			s := h.initialize("hang", "")
			s.waitStarted(id, t.Name())
			r := h.do("POST", "/hang/mcp", echo("echo"), "Mcp-Session-Id", s.id)
			h.do("POST", "/hang/mcp", release("release", t.Name()), "Mcp-Session-Id", s.id)
			return answerOfResp(t, r)
		}},
		{"/mcp/{ns}", func(t *testing.T) frontAnswer {
			s, r := h.initAt("/mcp/nhang")
			if s == nil {
				t.Fatalf("initialize: %s", r)
			}
			st := h.open("POST", s.path, wait("hang__wait", t.Name()), "Mcp-Session-Id", s.id)
			expectMethod(t, st.next(), "notifications/progress")
			r = h.do("POST", s.path, echo("hang__echo"), "Mcp-Session-Id", s.id)
			h.do("POST", s.path, release("hang__release", t.Name()), "Mcp-Session-Id", s.id)
			return answerOfResp(t, r)
		}},
		{"/{d}/sse", func(t *testing.T) frontAnswer {
			st := h.open("GET", "/hang/sse", nil)
			ev := st.nextEvent()
			if ev.name != "endpoint" {
				t.Fatalf("first event %s %q, want the endpoint", ev.name, ev.data)
			}
			post := func(body []byte) {
				t.Helper()
				if r := h.do("POST", string(ev.data), body); r.status != 202 {
					t.Fatalf("POST %s: %s", ev.data, r)
				}
			}
			post(rpc(0, "initialize", initParams("")))
			if m := st.next(); m.Result == nil {
				t.Fatalf("initialize: %s", describe(m))
			}
			post(rpc(nil, "notifications/initialized", nil))
			post(wait("wait", t.Name()))
			expectMethod(t, st.next(), "notifications/progress")
			post(echo("echo"))
			m := st.next()
			post(release("release", t.Name()))
			if m.Error == nil {
				t.Fatalf("the second request: %s, want a JSON-RPC error", describe(m))
			}
			return frontAnswer{code: m.Error.Code, message: m.Error.Message}
		}},
		{"stdio", func(t *testing.T) frontAnswer {
			g, err := gateway.New(parse(), gateway.Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			return lines(t, newLineClient(t, func(in io.Reader, out io.Writer) error {
				return g.ServeStdio(context.Background(), "nhang", in, out)
			}), "hang__")
		}},
		{"relay", func(t *testing.T) frontAnswer {
			return lines(t, newLineClient(t, func(in io.Reader, out io.Writer) error {
				return relay.Run(context.Background(), relay.Options{URL: h.url("/hang/mcp"), ReconnectDelay: 10 * time.Millisecond}, in, out)
			}), "")
		}},
	}
	for _, fr := range fronts {
		t.Run(fr.name, func(t *testing.T) {
			t.Parallel()
			got := fr.call(t)
			t.Logf("HTTP %d, %d %s", got.status, got.code, got.message)
			if got.code != -32600 || (got.status != 0 && got.status != 409) {
				t.Errorf("a reused id on %s: HTTP %d, code %d (%s); want HTTP 409, code -32600", fr.name, got.status, got.code, got.message)
			}
		})
	}
}
