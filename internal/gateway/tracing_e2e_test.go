package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a collector-compatible OTLP/HTTP endpoint on loopback: it
// decodes the protobuf ExportTraceServiceRequest posted to /v1/traces and
// keeps every span, with its resource's service.name.
type otlpReceiver struct {
	url string

	mu       sync.Mutex
	spans    []*tracepb.Span // guarded by mu
	services []string        // guarded by mu
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP traces export", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					rcv.services = append(rcv.services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				rcv.spans = append(rcv.spans, ss.Spans...)
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(ts.Close)
	rcv.url = ts.URL
	return rcv
}

// inTrace returns the spans of trace id (hex).
func (r *otlpReceiver) inTrace(id string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

func (r *otlpReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// tracedUpstream is a go-sdk Streamable HTTP server with a tool "meta"
// answering the traceparent of its params._meta, which also records the
// traceparent header of every tools/call POST.
func tracedUpstream(t *testing.T) (url string, headers func() []string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "meta", Description: "answers its _meta.traceparent"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "meta=" + tp}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"tools/call"`)) {
				mu.Lock()
				seen = append(seen, r.Header.Get("Traceparent"))
				mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// traceparent parts: version-trace-span-flags.
func tpParts(t *testing.T, tp string) (trace, span string) {
	t.Helper()
	p := strings.Split(tp, "-")
	if len(p) != 4 || len(p[1]) != 32 || len(p[2]) != 16 {
		t.Fatalf("malformed traceparent %q", tp)
	}
	return p[1], p[2]
}

// checkTrace finds the request's server span and the upstream call's client
// span in trace, and checks their links and attributes: the server span is
// the child of the client's span parent, the client span the server span's
// child, and upstreamTP (what the upstream saw) names the client span.
func checkTrace(t *testing.T, rcv *otlpReceiver, trace, parent, dest, tool, session, upstreamTP string) {
	t.Helper()
	var server, client *tracepb.Span
	for _, s := range rcv.inTrace(trace) {
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			server = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			client = s
		}
	}
	if server == nil || client == nil {
		t.Fatalf("trace %s: server span %v, client span %v; want both (spans received: %d)", trace, server, client, rcv.count())
	}
	if got := hex.EncodeToString(server.ParentSpanId); got != parent {
		t.Errorf("server span's parent = %s, want the client's span %s", got, parent)
	}
	if !bytes.Equal(client.ParentSpanId, server.SpanId) {
		t.Errorf("client span's parent = %x, want the server span %x", client.ParentSpanId, server.SpanId)
	}
	for _, s := range []*tracepb.Span{server, client} {
		for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": tool,
			"mcp.session.id": session, "switchboard.destination": dest} {
			if got := spanAttr(s, k); got != want {
				t.Errorf("%s span %q: %s = %q, want %q", s.Kind, s.Name, k, got, want)
			}
		}
	}
	if server.Name != "tools/call "+tool || client.Name != "tools/call "+tool {
		t.Errorf("span names %q, %q; want %q", server.Name, client.Name, "tools/call "+tool)
	}
	upTrace, upSpan := tpParts(t, upstreamTP)
	if upTrace != trace || upSpan != hex.EncodeToString(client.SpanId) {
		t.Errorf("upstream saw traceparent %s, want trace %s and the client span %x", upstreamTP, trace, client.SpanId)
	}
	if upSpan == parent {
		t.Errorf("upstream saw the client's own span id %s; want a new parent", parent)
	}
}

// echoTraceparent is the _meta.traceparent the stdio test server saw, from
// its echo answer ("" when none).
func echoTraceparent(t *testing.T, r *resp) string {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("tools/call: %s", r)
	}
	var res struct {
		StructuredContent struct {
			Traceparent string `json:"traceparent"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(r.last(t).Result, &res); err != nil {
		t.Fatalf("echo result: %v: %s", err, r)
	}
	return res.StructuredContent.Traceparent
}

// metaTraceparent is the _meta.traceparent the go-sdk upstream saw.
func metaTraceparent(t *testing.T, r *resp) string {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("tools/call: %s", r)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(r.last(t).Result, &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("meta result: %v: %s", err, r)
	}
	tp, ok := strings.CutPrefix(res.Content[0].Text, "meta=")
	if !ok {
		t.Fatalf("meta result %q", res.Content[0].Text)
	}
	return tp
}

const (
	tpHeader = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tpMeta   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tpRemote = "00-a1b2c3d4e5f60718293a4b5c6d7e8f90-1122334455667788-01"
)

// TestTracingSpansAndPropagation: with a tracing block, a tools/call with a
// traceparent header (stdio and streamable_http destinations) or with
// params._meta.traceparent only (stdio) produces a server span, child of
// the client's span, and a client span, its child, both with the MCP
// attributes, received by an OTLP receiver; the upstream sees the client
// span's context in _meta.traceparent, and a streamable_http upstream in
// its traceparent header too.
func TestTracingSpansAndPropagation(t *testing.T) {
	rcv := newOTLPReceiver(t)
	upURL, upHeaders := tracedUpstream(t)
	h := startAgg(t, "tracing:\n  endpoint: "+rcv.url+"\n  service_name: sb-test\n",
		remoteDest{name: "remote", typ: "streamable_http", url: upURL + "/mcp"}.yaml(),
		dest{name: "local", mode: "plain"})

	local := h.initialize("local", "")
	viaHeader := echoTraceparent(t, local.call("tools/call", toolParams("echo", map[string]any{"text": "hi"}, nil), "Traceparent", tpHeader))
	p := toolParams("echo", map[string]any{"text": "hi"}, nil)
	p["_meta"] = map[string]any{"traceparent": tpMeta}
	viaMeta := echoTraceparent(t, local.call("tools/call", p))

	remote := h.initialize("remote", "")
	remoteMeta := metaTraceparent(t, remote.call("tools/call", toolParams("meta", map[string]any{}, nil), "Traceparent", tpRemote))

	h.stop() // Run's end shuts the tracer down: every span is exported by now

	trace, parent := tpParts(t, tpHeader)
	checkTrace(t, rcv, trace, parent, "local", "echo", local.id, viaHeader)
	trace, parent = tpParts(t, tpMeta)
	checkTrace(t, rcv, trace, parent, "local", "echo", local.id, viaMeta)
	trace, parent = tpParts(t, tpRemote)
	checkTrace(t, rcv, trace, parent, "remote", "meta", remote.id, remoteMeta)
	if hs := upHeaders(); len(hs) != 1 || hs[0] != remoteMeta {
		t.Errorf("upstream traceparent headers %q, want [%q] (its _meta's)", hs, remoteMeta)
	}
	rcv.mu.Lock()
	services := rcv.services
	rcv.mu.Unlock()
	for _, s := range services {
		if s != "sb-test" {
			t.Errorf("service.name %q, want sb-test", s)
		}
	}
}

// TestTracingOff: without a tracing block nothing is added: the stdio
// upstream sees no _meta.traceparent for a call with a traceparent header,
// and exactly the client's for a call that carries one; the streamable_http
// upstream gets no traceparent header.
func TestTracingOff(t *testing.T) {
	upURL, upHeaders := tracedUpstream(t)
	h := startAgg(t, "", remoteDest{name: "remote", typ: "streamable_http", url: upURL + "/mcp"}.yaml(),
		dest{name: "local", mode: "plain"})
	local := h.initialize("local", "")
	if tp := echoTraceparent(t, local.call("tools/call", toolParams("echo", map[string]any{"text": "hi"}, nil), "Traceparent", tpHeader)); tp != "" {
		t.Errorf("tracing off: the upstream saw _meta.traceparent %q, want none", tp)
	}
	p := toolParams("echo", map[string]any{"text": "hi"}, nil)
	p["_meta"] = map[string]any{"traceparent": tpMeta}
	if tp := echoTraceparent(t, local.call("tools/call", p)); tp != tpMeta {
		t.Errorf("tracing off: the upstream saw _meta.traceparent %q, want the client's %q", tp, tpMeta)
	}
	remote := h.initialize("remote", "")
	if tp := metaTraceparent(t, remote.call("tools/call", toolParams("meta", map[string]any{}, nil), "Traceparent", tpRemote)); tp != "" {
		t.Errorf("tracing off: the remote upstream saw _meta.traceparent %q, want none", tp)
	}
	if hs := upHeaders(); len(hs) != 1 || hs[0] != "" {
		t.Errorf("tracing off: upstream traceparent headers %q, want one empty", hs)
	}
}
