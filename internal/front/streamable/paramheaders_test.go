package streamable_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/mcpheader"
	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// okDest answers every stateless request with an empty result.
type okDest struct{}

func (okDest) Open(context.Context, *session.Session, *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return nil, nil, errors.New("no sessions here")
}

func (okDest) Stateless(_ context.Context, req *jsonrpc.Message) (session.Call, error) {
	q := jsonrpc.NewQueue(1)
	q.Push(jsonrpc.NewResult(req.ID, json.RawMessage(`{"resultType":"complete","content":[]}`)), true)
	q.Close()
	return queueCall{q}, nil
}

type queueCall struct{ q *jsonrpc.Queue }

func (c queueCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c queueCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c queueCall) Abandon(bool)                   {}
func (c queueCall) LongLived() bool                { return false }

func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

// modernCall returns a 2026-07-28 request body for method with params
// (which gets the required _meta) and its standard headers.
func modernCall(t *testing.T, version, method string, params map[string]any) ([]byte, http.Header) {
	t.Helper()
	body, h, err := modernBody(version, method, params)
	if err != nil {
		t.Fatal(err)
	}
	return body, h
}

func modernBody(version, method string, params map[string]any) ([]byte, http.Header, error) {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    version,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "paramheaders-test", "version": "1"},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", version)
	h.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		h.Set("Mcp-Name", name)
	}
	return body, h, nil
}

// rpcAnswer is the part of a response the tests look at.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

func TestCheckParamHeaders(t *testing.T) {
	bindings := []mcpheader.ParamBinding{
		{Path: []string{"region"}, Header: "Region"},
		{Path: []string{"count"}, Header: "Count"},
		{Path: []string{"dry"}, Header: "Dry-Run"},
		{Path: []string{"cfg", "tenant"}, Header: "Tenant"},
	}
	type hdrs map[string]string
	type args map[string]any
	tests := []struct {
		name    string
		args    any // params.arguments; nil leaves it out
		headers hdrs
		version string // default 2026-07-28
		reject  bool
	}{
		{name: "nothing bound, nothing sent", args: args{"other": 1}},
		{name: "no arguments, no headers"},
		{name: "string matches", args: args{"region": "us-west1"}, headers: hdrs{"Mcp-Param-Region": "us-west1"}},
		{name: "string mismatch", args: args{"region": "us-west1"}, headers: hdrs{"Mcp-Param-Region": "eu-west1"}, reject: true},
		{name: "string values are case-sensitive", args: args{"region": "us-west1"}, headers: hdrs{"Mcp-Param-Region": "US-WEST1"}, reject: true},
		{name: "header missing, value in body", args: args{"region": "us-west1"}, reject: true},
		{name: "header present, value absent", args: args{}, headers: hdrs{"Mcp-Param-Region": "us-west1"}, reject: true},
		{name: "header present, no arguments", headers: hdrs{"Mcp-Param-Region": "us-west1"}, reject: true},
		{name: "header present, value null", args: args{"region": nil}, headers: hdrs{"Mcp-Param-Region": "null"}, reject: true},
		{name: "value null, no header", args: args{"region": nil}},
		{name: "valid base64", args: args{"region": "Hello"}, headers: hdrs{"Mcp-Param-Region": "=?base64?SGVsbG8=?="}},
		{name: "base64 of non-ASCII", args: args{"region": "東京 "}, headers: hdrs{"Mcp-Param-Region": b64("東京 ")}},
		{name: "base64 decoding to another value", args: args{"region": "Hello"}, headers: hdrs{"Mcp-Param-Region": b64("Hellp")}, reject: true},
		{name: "base64 without padding", args: args{"region": "Hello"}, headers: hdrs{"Mcp-Param-Region": "=?base64?SGVsbG8?="}, reject: true},
		{name: "base64 with non-alphabet characters", args: args{"region": "Hello"}, headers: hdrs{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}, reject: true},
		{name: "base64url alphabet is not base64", args: args{"region": "??>"}, headers: hdrs{"Mcp-Param-Region": "=?base64?Pz8-?="}, reject: true},
		{name: "no prefix: literal", args: args{"region": "SGVsbG8="}, headers: hdrs{"Mcp-Param-Region": "SGVsbG8="}},
		{name: "no prefix: literal, not decoded", args: args{"region": "Hello"}, headers: hdrs{"Mcp-Param-Region": "SGVsbG8="}, reject: true},
		{name: "no suffix: literal", args: args{"region": "=?base64?SGVsbG8="}, headers: hdrs{"Mcp-Param-Region": "=?base64?SGVsbG8="}},
		{name: "no suffix: literal, not decoded", args: args{"region": "Hello"}, headers: hdrs{"Mcp-Param-Region": "=?base64?SGVsbG8="}, reject: true},
		{name: "sentinel-shaped value travels encoded", args: args{"region": "=?base64?SGVsbG8=?="}, headers: hdrs{"Mcp-Param-Region": b64("=?base64?SGVsbG8=?=")}},
		{name: "integer matches", args: args{"count": 42}, headers: hdrs{"Mcp-Param-Count": "42"}},
		{name: "integer compared numerically", args: args{"count": 42}, headers: hdrs{"Mcp-Param-Count": "42.0"}},
		{name: "integer compared numerically (exponent)", args: args{"count": 42}, headers: hdrs{"Mcp-Param-Count": "4.2e1"}},
		{name: "integer in base64", args: args{"count": -3}, headers: hdrs{"Mcp-Param-Count": b64("-3")}},
		{name: "integer mismatch", args: args{"count": 42}, headers: hdrs{"Mcp-Param-Count": "43"}, reject: true},
		{name: "integer header not a number", args: args{"count": 42}, headers: hdrs{"Mcp-Param-Count": "forty-two"}, reject: true},
		{name: "integer header a fraction", args: args{"count": 42}, headers: hdrs{"Mcp-Param-Count": "42.5"}, reject: true},
		{name: "body number with a fraction", args: args{"count": 1.5}, headers: hdrs{"Mcp-Param-Count": "1.5"}, reject: true},
		{name: "body integer beyond 2^53", args: args{"count": json.Number("9007199254740993")}, headers: hdrs{"Mcp-Param-Count": "9007199254740993"}, reject: true},
		{name: "string body is not compared numerically", args: args{"count": "42"}, headers: hdrs{"Mcp-Param-Count": "42.0"}, reject: true},
		{name: "boolean true", args: args{"dry": true}, headers: hdrs{"Mcp-Param-Dry-Run": "true"}},
		{name: "boolean false", args: args{"dry": false}, headers: hdrs{"Mcp-Param-Dry-Run": "false"}},
		{name: "boolean is lowercase", args: args{"dry": true}, headers: hdrs{"Mcp-Param-Dry-Run": "True"}, reject: true},
		{name: "boolean is not 1", args: args{"dry": true}, headers: hdrs{"Mcp-Param-Dry-Run": "1"}, reject: true},
		{name: "object body value", args: args{"region": map[string]any{"a": 1}}, headers: hdrs{"Mcp-Param-Region": `{"a":1}`}, reject: true},
		{name: "array body value", args: args{"region": []any{"a"}}, headers: hdrs{"Mcp-Param-Region": "a"}, reject: true},
		{name: "nested matches", args: args{"cfg": args{"tenant": "acme"}}, headers: hdrs{"Mcp-Param-Tenant": "acme"}},
		{name: "nested mismatch", args: args{"cfg": args{"tenant": "acme"}}, headers: hdrs{"Mcp-Param-Tenant": "evil"}, reject: true},
		{name: "nested header missing", args: args{"cfg": args{"tenant": "acme"}}, reject: true},
		{name: "nested parent not an object", args: args{"cfg": "acme"}, headers: hdrs{"Mcp-Param-Tenant": "acme"}, reject: true},
		{name: "nested parent absent, no header", args: args{"region": "x"}, headers: hdrs{"Mcp-Param-Region": "x"}},
		{name: "several at once", args: args{"region": "r", "count": 0, "dry": false, "cfg": args{"tenant": "t"}},
			headers: hdrs{"Mcp-Param-Region": "r", "Mcp-Param-Count": "0", "Mcp-Param-Dry-Run": "false", "Mcp-Param-Tenant": "t"}},
		{name: "several, one wrong", args: args{"region": "r", "count": 0, "dry": false},
			headers: hdrs{"Mcp-Param-Region": "r", "Mcp-Param-Count": "0", "Mcp-Param-Dry-Run": "true"}, reject: true},
		{name: "unbound Mcp-Param headers are ignored", args: args{"region": "r"}, headers: hdrs{"Mcp-Param-Region": "r", "Mcp-Param-Other": "x"}},
		{name: "arguments not an object: not validated", args: "oops", headers: hdrs{"Mcp-Param-Region": "anything"}},
		{name: "before 2026-07-28: not validated", version: "2025-11-25", args: args{"region": "us-west1"}, headers: hdrs{"Mcp-Param-Region": "eu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotTool string
			var gotReq *jsonrpc.Message
			h := streamable.NewHandler(okDest{}, streamable.Options{Name: "d", Sessions: &session.Table{},
				ParamHeaders: func(ctx context.Context, req *jsonrpc.Message, tool string) ([]mcpheader.ParamBinding, error) {
					gotTool, gotReq = tool, req
					return bindings, nil
				}})
			params := map[string]any{"name": "deploy"}
			if tt.args != nil {
				params["arguments"] = tt.args
			}
			version := tt.version
			if version == "" {
				version = mcp.ModernVersion
			}
			body, hdr := modernCall(t, version, "tools/call", params)
			for k, v := range tt.headers {
				hdr.Set(k, v) // as the server reads them: canonical names
			}
			status, ans := serve(t, h, body, hdr)
			if tt.reject {
				if status != http.StatusBadRequest || ans.Error == nil || ans.Error.Code != jsonrpc.HeaderMismatch {
					t.Fatalf("got HTTP %d %+v, want 400 with error %d", status, ans, jsonrpc.HeaderMismatch)
				}
				if string(ans.ID) != "7" {
					t.Errorf("error id = %s, want 7", ans.ID)
				}
				return
			}
			if status != http.StatusOK || ans.Error != nil {
				t.Fatalf("got HTTP %d %+v, want 200 with a result", status, ans)
			}
			if version == mcp.ModernVersion && (gotTool != "deploy" || gotReq == nil || gotReq.Method != "tools/call") {
				t.Errorf("ParamHeaders got tool %q, request %v", gotTool, gotReq)
			}
		})
	}
}

func serve(t *testing.T, h http.Handler, body []byte, hdr http.Header) (int, rpcAnswer) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/d/mcp", bytes.NewReader(body))
	r.Header = hdr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var ans rpcAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
		t.Fatalf("HTTP %d, body %q: %v", w.Code, w.Body.String(), err)
	}
	return w.Code, ans
}

func TestCheckParamHeadersOnlyForToolsCall(t *testing.T) {
	called := false
	h := streamable.NewHandler(okDest{}, streamable.Options{Name: "d", Sessions: &session.Table{},
		ParamHeaders: func(context.Context, *jsonrpc.Message, string) ([]mcpheader.ParamBinding, error) {
			called = true
			return []mcpheader.ParamBinding{{Path: []string{"region"}, Header: "Region"}}, nil
		}})
	for _, method := range []string{"prompts/get", "resources/read", "tools/list"} {
		params := map[string]any{"name": "p", "uri": "test://x", "arguments": map[string]any{"region": "r"}}
		body, hdr := modernCall(t, mcp.ModernVersion, method, params)
		if method == "resources/read" {
			hdr.Set("Mcp-Name", "test://x")
		}
		if status, ans := serve(t, h, body, hdr); status != http.StatusOK || ans.Error != nil {
			t.Errorf("%s: HTTP %d %+v, want 200", method, status, ans)
		}
	}
	if called {
		t.Error("ParamHeaders was called for a method other than tools/call")
	}
}

func TestCheckParamHeadersWithoutBindings(t *testing.T) {
	body, hdr := modernCall(t, mcp.ModernVersion, "tools/call",
		map[string]any{"name": "deploy", "arguments": map[string]any{"region": "r"}})
	hdr.Set("Mcp-Param-Region", "mismatch")

	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	for name, fn := range map[string]func(context.Context, *jsonrpc.Message, string) ([]mcpheader.ParamBinding, error){
		"nil option": nil,
		"unknown tool": func(context.Context, *jsonrpc.Message, string) ([]mcpheader.ParamBinding, error) {
			return nil, nil
		},
		"lookup fails": func(context.Context, *jsonrpc.Message, string) ([]mcpheader.ParamBinding, error) {
			return nil, errors.New("tools/list: upstream down")
		},
	} {
		h := streamable.NewHandler(okDest{}, streamable.Options{Name: "d", Sessions: &session.Table{}, Logger: logger, ParamHeaders: fn})
		if status, ans := serve(t, h, body, hdr.Clone()); status != http.StatusOK || ans.Error != nil {
			t.Errorf("%s: HTTP %d %+v, want 200 (not validated)", name, status, ans)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if s := logs.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "upstream down") {
		t.Errorf("a failed lookup should be logged at warn; log:\n%s", s)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// startGateway serves yamlText on a fresh 127.0.0.1 port until the end of
// the test and returns its base URL.
func startGateway(t *testing.T, yamlText string) string {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, yamlText)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := gateway.New(cfg, gateway.Options{Logger: logger, AuditWriter: io.Discard})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return within 30 s")
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("switchboard log:\n%s", logs.String())
			mu.Unlock()
		}
	})
	return "http://" + ln.Addr().String()
}

func stdioYAML(argv []string, env map[string]string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\ndestinations:\n  up:\n    type: stdio\n    command: [")
	for i, a := range argv {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(a))
	}
	b.WriteString("]\n")
	if len(env) > 0 {
		b.WriteString("    env:\n")
		for k, v := range env {
			b.WriteString("      " + k + ": " + strconv.Quote(v) + "\n")
		}
	}
	return b.String()
}

// post sends a 2026-07-28 tools/call for tool with arguments and extra
// headers to url.
func post(t *testing.T, url, tool string, arguments map[string]any, extra map[string]string) (int, rpcAnswer) {
	t.Helper()
	status, ans, err := tryPost(url, tool, arguments, extra)
	if err != nil {
		t.Fatal(err)
	}
	return status, ans
}

// tryPost is post for goroutines other than the test's own.
func tryPost(url, tool string, arguments map[string]any, extra map[string]string) (int, rpcAnswer, error) {
	var ans rpcAnswer
	params := map[string]any{"name": tool, "arguments": arguments}
	body, hdr, err := modernBody(mcp.ModernVersion, "tools/call", params)
	if err != nil {
		return 0, ans, err
	}
	for k, v := range extra {
		hdr[k] = []string{v} // sent as spelled
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, ans, err
	}
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ans, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, ans, err
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		// The response is the last data line of the stream.
		var last string
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:"); ok {
				last = strings.TrimSpace(d)
			}
		}
		b = []byte(last)
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return 0, ans, fmt.Errorf("HTTP %d, body %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, ans, nil
}

// TestParamHeadersEverythingServer runs the check end to end: Switchboard
// in front of the go-sdk conformance everything-server over stdio, which
// learns test_x_mcp_header's binding (region → Mcp-Param-Region) from the
// server's own tools/list.
func TestParamHeadersEverythingServer(t *testing.T) {
	url := startGateway(t, stdioYAML([]string{peertest.EverythingServer(t)}, nil)) + "/up/mcp"
	const tool = "test_x_mcp_header"
	tests := []struct {
		name   string
		args   map[string]any
		header string // Mcp-Param-Region; "" sends none
		reject bool
	}{
		{"matching", map[string]any{"region": "us-west1", "level": 3}, "us-west1", false},
		{"matching base64", map[string]any{"region": "Hello"}, "=?base64?SGVsbG8=?=", false},
		{"lowercase header name", map[string]any{"region": "us-west1"}, "us-west1", false},
		{"literal without suffix", map[string]any{"region": "=?base64?SGVsbG8="}, "=?base64?SGVsbG8=", false},
		{"mismatching", map[string]any{"region": "us-west1"}, "eu-west1", true},
		{"missing", map[string]any{"region": "us-west1"}, "", true},
		{"unexpected", map[string]any{"level": 3}, "us-west1", true},
		{"bad base64 padding", map[string]any{"region": "Hello"}, "=?base64?SGVsbG8?=", true},
		{"bad base64 characters", map[string]any{"region": "Hello"}, "=?base64?SGVs!!!bG8=?=", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]string{}
			if tt.header != "" {
				name := "Mcp-Param-Region"
				if strings.HasPrefix(tt.name, "lowercase") {
					name = "mcp-param-region"
				}
				extra[name] = tt.header
			}
			status, ans := post(t, url, tool, tt.args, extra)
			if tt.reject {
				if status != http.StatusBadRequest || ans.Error == nil || ans.Error.Code != jsonrpc.HeaderMismatch {
					t.Fatalf("got HTTP %d %+v, want 400 with error %d", status, ans, jsonrpc.HeaderMismatch)
				}
				return
			}
			if status != http.StatusOK || ans.Error != nil || ans.Result == nil {
				t.Fatalf("got HTTP %d %+v %s, want 200 with a result", status, ans, ans.Result)
			}
		})
	}
	// A tool without annotations is not affected by Mcp-Param-* headers.
	if status, ans := post(t, url, "test_simple_text", map[string]any{}, map[string]string{"Mcp-Param-Region": "x"}); status != http.StatusOK || ans.Error != nil {
		t.Errorf("test_simple_text: HTTP %d %+v, want 200", status, ans)
	}
}

// The fake tools server below is this test binary run again as a stdio MCP
// server (the helper-process pattern): its tools/list comes in two pages,
// carries ttlMs when FAKE_TOOLS_TTL_MS is set, and every tools/call answers
// with the number of tools/list requests seen so far, so a test can count
// the gateway's fetches.
const fakeToolsEnv = "SWITCHBOARD_FAKE_TOOLS_SERVER"

func TestFakeToolsServerProcess(t *testing.T) {
	if os.Getenv(fakeToolsEnv) != "1" {
		t.Skip("helper process for TestParamHeadersCache")
	}
	lists := 0
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64<<10), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	ttl := os.Getenv("FAKE_TOOLS_TTL_MS")
	for in.Scan() {
		m, err := jsonrpc.Decode(in.Bytes())
		if err != nil || !m.IsRequest() {
			continue
		}
		var result any
		switch m.Method {
		case "server/discover":
			// A modern-only server (Switchboard probes its era with this).
			result = map[string]any{"resultType": "complete", "supportedVersions": []string{"2026-07-28"},
				"capabilities": map[string]any{"tools": map[string]any{}}, "ttlMs": 0, "cacheScope": "public"}
		case "tools/list":
			lists++
			page := map[string]any{"resultType": "complete", "cacheScope": "public"}
			if ttl != "" {
				n, _ := strconv.Atoi(ttl)
				page["ttlMs"] = n
			}
			if c, _ := jsonrpc.StringMember(m.Params, "cursor"); c != "page2" {
				page["tools"] = []any{map[string]any{"name": "first", "inputSchema": map[string]any{"type": "object",
					"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}}}}}
				page["nextCursor"] = "page2"
			} else {
				page["tools"] = []any{map[string]any{"name": "second", "inputSchema": map[string]any{"type": "object",
					"properties": map[string]any{"cfg": map[string]any{"type": "object",
						"properties": map[string]any{"n": map[string]any{"type": "integer", "x-mcp-header": "N"}}}}}}}
			}
			result = page
		case "tools/call":
			result = map[string]any{"resultType": "complete",
				"content": []any{map[string]any{"type": "text", "text": strconv.Itoa(lists)}}}
		default:
			out.Write(jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.MethodNotFound, "method not found")).Encode())
			out.WriteByte('\n')
			out.Flush()
			continue
		}
		out.Write(jsonrpc.NewResult(m.ID, jsonrpc.Marshal(result)).Encode())
		out.WriteByte('\n')
		out.Flush()
	}
	os.Exit(0)
}

// listsSeen returns the tools/list count a fake tools server reported.
func listsSeen(t *testing.T, ans rpcAnswer) int {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(ans.Result, &r); err != nil || len(r.Content) != 1 {
		t.Fatalf("unexpected result %s (%v)", ans.Result, err)
	}
	n, err := strconv.Atoi(r.Content[0].Text)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func fakeToolsURL(t *testing.T, ttlMs string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{fakeToolsEnv: "1"}
	if ttlMs != "" {
		env["FAKE_TOOLS_TTL_MS"] = ttlMs
	}
	return startGateway(t, stdioYAML([]string{exe, "-test.run=TestFakeToolsServerProcess"}, env)) + "/up/mcp"
}

func TestParamHeadersCache(t *testing.T) {
	call := func(t *testing.T, url, tool string, args map[string]any, hdr map[string]string) (int, rpcAnswer) {
		t.Helper()
		status, ans := post(t, url, tool, args, hdr)
		if status != http.StatusOK && (ans.Error == nil || ans.Error.Code != jsonrpc.HeaderMismatch) {
			t.Fatalf("%s: HTTP %d %+v", tool, status, ans)
		}
		return status, ans
	}
	t.Run("pages and default ttl", func(t *testing.T) {
		url := fakeToolsURL(t, "")
		// Both pages are read: the second page's nested binding is enforced.
		if status, _ := call(t, url, "second", map[string]any{"cfg": map[string]any{"n": 5}}, map[string]string{"Mcp-Param-N": "6"}); status != http.StatusBadRequest {
			t.Fatalf("mismatch on a page-2 tool: HTTP %d, want 400", status)
		}
		_, ans := call(t, url, "second", map[string]any{"cfg": map[string]any{"n": 5}}, map[string]string{"Mcp-Param-N": "5"})
		if n := listsSeen(t, ans); n != 2 {
			t.Fatalf("after the first call: %d tools/list requests, want 2 (one walk of two pages)", n)
		}
		// Within the default ttl the cache answers for listed tools.
		for range 3 {
			_, ans = call(t, url, "first", map[string]any{"region": "r"}, map[string]string{"Mcp-Param-Region": "r"})
		}
		if n := listsSeen(t, ans); n != 2 {
			t.Fatalf("cached: %d tools/list requests, want still 2", n)
		}
		// A tool missing from the cache costs one walk per request.
		_, _ = call(t, url, "unlisted", map[string]any{}, nil)
		_, ans = call(t, url, "first", map[string]any{"region": "r"}, map[string]string{"Mcp-Param-Region": "r"})
		if n := listsSeen(t, ans); n != 4 {
			t.Fatalf("after an unlisted tool: %d tools/list requests, want 4", n)
		}
	})
	t.Run("ttlMs 0 is not cached", func(t *testing.T) {
		url := fakeToolsURL(t, "0")
		var ans rpcAnswer
		for range 3 {
			_, ans = call(t, url, "first", map[string]any{"region": "r"}, map[string]string{"Mcp-Param-Region": "r"})
		}
		// Each call walked the list (2 pages) before being forwarded.
		if n := listsSeen(t, ans); n != 6 {
			t.Fatalf("%d tools/list requests, want 6", n)
		}
	})
	t.Run("concurrent requests share one walk", func(t *testing.T) {
		url := fakeToolsURL(t, "")
		const n = 16
		var wg sync.WaitGroup
		statuses := make([]int, n)
		for i := range n {
			wg.Go(func() {
				hv := "r"
				if i%2 == 1 {
					hv = "wrong"
				}
				status, _, err := tryPost(url, "first", map[string]any{"region": "r"}, map[string]string{"Mcp-Param-Region": hv})
				if err != nil {
					t.Error(err)
				}
				statuses[i] = status
			})
		}
		wg.Wait()
		for i, s := range statuses {
			want := http.StatusOK
			if i%2 == 1 {
				want = http.StatusBadRequest
			}
			if s != want {
				t.Errorf("request %d: HTTP %d, want %d", i, s, want)
			}
		}
		_, ans := call(t, url, "first", map[string]any{"region": "r"}, map[string]string{"Mcp-Param-Region": "r"})
		if got := listsSeen(t, ans); got != 2 {
			t.Fatalf("%d tools/list requests, want 2 (one shared walk)", got)
		}
	})
}

// TestParamHeadersRemoteUpstream: the same tool on the everything-server
// served over stateless Streamable HTTP, as a streamable_http destination.
// The upstream is an HTTP server that requires Mcp-Param-Region, so the
// call succeeds only if Switchboard's upstream connection mirrors the
// header, as a 2026-07-28 client must (from the tools/list it saw).
func TestParamHeadersRemoteUpstream(t *testing.T) {
	mcpURL, _ := peertest.StartEverythingServer(t, true)
	url := startGateway(t, "listen: 127.0.0.1:0\ndestinations:\n  up:\n    type: streamable_http\n    url: "+mcpURL+"\n") + "/up/mcp"
	const tool = "test_x_mcp_header"
	for _, tt := range []struct {
		name   string
		args   map[string]any
		header string
	}{
		{"plain", map[string]any{"region": "us-west1", "level": 3}, "us-west1"},
		{"base64", map[string]any{"region": "Hello"}, "=?base64?SGVsbG8=?="},
		{"non-ASCII", map[string]any{"region": "zürich"}, "=?base64?" + base64.StdEncoding.EncodeToString([]byte("zürich")) + "?="},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, ans := post(t, url, tool, tt.args, map[string]string{"Mcp-Param-Region": tt.header})
			if status != http.StatusOK || ans.Error != nil || ans.Result == nil {
				t.Fatalf("got HTTP %d %+v %s, want 200 with a result", status, ans, ans.Result)
			}
			if want := "region=" + tt.args["region"].(string); !strings.Contains(string(ans.Result), want) {
				t.Errorf("result %s, want it to contain %q", ans.Result, want)
			}
		})
	}
	// Switchboard still rejects a mismatch itself.
	if status, ans := post(t, url, tool, map[string]any{"region": "us-west1"}, map[string]string{"Mcp-Param-Region": "eu-west1"}); status != http.StatusBadRequest || ans.Error == nil || ans.Error.Code != jsonrpc.HeaderMismatch {
		t.Errorf("mismatch: HTTP %d %+v, want 400 with %d", status, ans, jsonrpc.HeaderMismatch)
	}
}
