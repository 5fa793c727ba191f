package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

func TestTracingSetMeta(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, c := range []struct{ in, want string }{
		{``, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`{}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{` { } `, ` {"_meta":{"traceparent":"` + tp + `"} } `},
		{`{"name":"echo","arguments":{"a":1}}`, `{"_meta":{"traceparent":"` + tp + `"},"name":"echo","arguments":{"a":1}}`},
		{`{"name":"x", "_meta" : { }}`, `{"name":"x", "_meta" : {"traceparent":"` + tp + `" }}`},
		{`{"_meta":{"progressToken":7},"name":"x"}`, `{"_meta":{"traceparent":"` + tp + `","progressToken":7},"name":"x"}`},
		{`{"_meta":{"traceparent":"00-old-old-00", "k":[1, 2]},"z":  3}`, `{"_meta":{"traceparent":"` + tp + `", "k":[1, 2]},"z":  3}`},
	} {
		got, ok := SetMeta([]byte(c.in), MetaKey, tp)
		if !ok || string(got) != c.want {
			t.Errorf("SetMeta(%s) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	if got, _ := SetMeta([]byte(`{}`), MetaKey, `a"b`); string(got) != `{"_meta":{"traceparent":"a\"b"}}` {
		t.Errorf("a value with a quote: %s", got)
	}
	for _, in := range []string{`[1,2]`, `{"_meta":[]}`, `{"_meta":"x"}`, `7`} {
		got, ok := SetMeta([]byte(in), MetaKey, tp)
		if ok || string(got) != in {
			t.Errorf("SetMeta(%s) = %s, %v; want it unchanged and false", in, got, ok)
		}
	}
	// The input is never written to.
	in := []byte(`{"_meta":{"traceparent":"x"}}`)
	orig := string(in)
	SetMeta(in[:len(in):len(in)], MetaKey, tp)
	if string(in) != orig {
		t.Errorf("input modified: %s", in)
	}
}

// TestTracingTraceparent: the traceparent written upstream is the one the
// SDK's W3C propagator writes, sampled or not.
func TestTracingTraceparent(t *testing.T) {
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			TraceFlags: flags,
		})
		c := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
		if got, want := traceparent(sc), c.Get("traceparent"); got != want {
			t.Errorf("traceparent = %q, want %q", got, want)
		}
	}
}

// FuzzSetMeta: whatever the params, SetMeta never fails to terminate or
// panics; when it reports success on a JSON object, the result is JSON
// whose params._meta.traceparent is the value and whose other members are
// as they were; otherwise params come back unchanged.
func FuzzSetMeta(f *testing.F) {
	for _, s := range []string{``, `{}`, ` { } `, `{"name":"echo","arguments":{"a":1}}`, `{"_meta":{}}`,
		`{"_meta":{"traceparent":"x","k":1},"z":2}`, `{"\u005fmeta":{"a":1}}`, `{"a":"\"_meta\""}`, `[1]`, `{"_meta":[]}`, `{`, `{"_meta":{"traceparent":`} {
		f.Add([]byte(s))
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	f.Fuzz(func(t *testing.T, params []byte) {
		in := append([]byte(nil), params...)
		got, ok := SetMeta(params, MetaKey, tp)
		if !bytes.Equal(params, in) {
			t.Fatalf("input modified")
		}
		// As Upstream splices it: _meta found through the message.
		_, ms, me, _ := setMeta(params, quotedMetaKey, jsonrpc.Quote(tp))
		m := &jsonrpc.Message{Params: params}
		s0, e0, has := m.MetaAt()
		if got2, ms2, me2, ok2 := spliceMeta(params, s0, e0, has, quotedMetaKey, jsonrpc.Quote(tp)); ok2 != ok ||
			!bytes.Equal(got2, got) || ms2 != ms || me2 != me {
			t.Fatalf("params %s: through the message %s, %v, [%d:%d]; SetMeta %s, %v, [%d:%d]", params, got2, ok2, ms2, me2, got, ok, ms, me)
		}
		if !ok {
			if !bytes.Equal(got, params) {
				t.Fatalf("not ok, yet params changed: %s", got)
			}
			return
		}
		var before, after map[string]any
		if len(bytes.TrimSpace(params)) > 0 && json.Unmarshal(params, &before) != nil {
			return // invalid JSON in: nothing promised about the bytes out
		}
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("SetMeta(%s) = %s: not JSON: %v", params, got, err)
		}
		// Where setMeta says _meta is, a copy's LookupMeta trusts.
		if _, s, e, found := jsonrpc.Lookup(got, "_meta"); !found || s != ms || e != me {
			t.Fatalf("SetMeta(%s) = %s: _meta at [%d:%d], setMeta said [%d:%d]", params, got, s, e, ms, me)
		}
		meta, _ := after["_meta"].(map[string]any)
		if meta["traceparent"] != tp {
			t.Fatalf("SetMeta(%s) = %s: _meta.traceparent not set", params, got)
		}
		for k, v := range before {
			if k == "_meta" {
				continue
			}
			if !reflect.DeepEqual(after[k], v) {
				t.Fatalf("SetMeta(%s) = %s: member %q changed", params, got, k)
			}
		}
	})
}

// testTracer is a Tracer sampling ratio of the root traces, exporting to
// an OTLP receiver on loopback; spans flushes it and returns the spans
// received so far, decoded with the collector's types, in the order they
// ended.
func testTracer(t *testing.T, ratio float64) (tr *Tracer, spans func() []*tracepb.Span, exports func() []export) {
	t.Helper()
	url, got := receiver(t)
	tr, err := New(Options{Endpoint: url, SampleRatio: ratio, ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, func() []*tracepb.Span {
		t.Helper()
		if err := tr.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var out []*tracepb.Span
		for _, e := range got() {
			for _, rs := range e.req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					out = append(out, ss.Spans...)
				}
			}
		}
		return out
	}, got
}

// TestTracingSpanNames: the server span is named for the request's method
// and tool, whatever the upstream calls were named; a request that is no
// MCP call takes the HTTP method.
func TestTracingSpanNames(t *testing.T) {
	tr, spans, _ := testTracer(t, 1)
	call := func(method, params string) *jsonrpc.Message {
		m, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	hr := httptest.NewRequest("POST", "/d/mcp", nil)
	now := time.Now()
	seen := 0
	for _, c := range []struct {
		calls       []*jsonrpc.Message
		method      string
		want        string
		wantClients []string
	}{
		{[]*jsonrpc.Message{call("tools/call", `{"name":"echo"}`)}, "tools/call", "tools/call echo", []string{"tools/call echo"}},
		{[]*jsonrpc.Message{call("tools/call", `{"name":"a"}`), call("ping", `{}`)}, "tools/call", "tools/call a", []string{"tools/call a", "ping"}},
		{[]*jsonrpc.Message{call("ping", `{}`), call("tools/call", `{"name":"b"}`)}, "ping", "ping b", []string{"ping", "tools/call b"}},
		{[]*jsonrpc.Message{call("tools/call", `{"name":"a"}`), call("tools/call", `{}`)}, "tools/call", "tools/call a", []string{"tools/call a", "tools/call"}},
		{nil, "", "GET", nil},
	} {
		q := tr.Start(hr, now)
		for _, m := range c.calls {
			_, cl := q.Upstream("d", "", m)
			cl.End(nil)
		}
		q.End(&audit.Record{Time: now, HTTPMethod: "GET", MCPMethod: c.method, Status: 200})
		all := spans()
		ended := all[seen:]
		seen = len(all)
		if len(ended) != len(c.calls)+1 {
			t.Fatalf("%s: %d spans, want %d", c.want, len(ended), len(c.calls)+1)
		}
		var clients []string
		for _, s := range ended[:len(ended)-1] {
			clients = append(clients, s.Name)
		}
		if got := ended[len(ended)-1].Name; got != c.want || !reflect.DeepEqual(clients, c.wantClients) {
			t.Errorf("%s: server span %q, client spans %q; want %q, %q", c.want, got, clients, c.want, c.wantClients)
		}
	}
}

// upstreamTP is the traceparent in params._meta of what Upstream returned,
// found through the copy's LookupMeta (which trusts where setMeta said
// _meta is) and checked against a fresh decoding of the copy's params.
func upstreamTP(t *testing.T, out *jsonrpc.Message) string {
	t.Helper()
	tp, ok := out.MetaString(MetaKey)
	raw, _, _, found := jsonrpc.Lookup(out.Params, "_meta", MetaKey)
	if s, _ := jsonrpc.String(raw); !ok || !found || s != tp {
		t.Fatalf("upstream params %s: LookupMeta found %q (%v), a fresh walk %q (%v)", out.Params, tp, ok, s, found)
	}
	return tp
}

// TestTracingSpans: the spans the gateway's requests make, as a collector
// decodes them. A request with a traceparent and tracestate header and
// one upstream call answered with an error: a server span, child of the
// remote parent in its trace, and a client span, its child, whose context
// the upstream's params carry; their ids, flags, trace state, names,
// kinds, times, attributes and status; each ended once however often End
// is called. A parent in params._meta that is not sampled, and a root
// with sample_ratio 0, record nothing but are propagated, unsampled. A
// request with no upstream call that failed: a root server span named for
// its HTTP method with the error status. Resource and scope are the
// Tracer's.
func TestTracingSpans(t *testing.T) {
	tr, spans, exports := testTracer(t, 1)
	const (
		parentTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		session  = "0d1e2f30-aaaa-4bbb-8ccc-000000000000"
	)
	hr := httptest.NewRequest("POST", "/d/mcp", nil)
	hr.Header.Set("Traceparent", parentTP)
	hr.Header.Set("Tracestate", "vendor=a")
	req, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"boom"}}`))
	now := time.Now()
	q := tr.Start(hr, now)
	out, c := q.Upstream("d", session, req)
	if out == req {
		t.Fatal("Upstream returned the request itself: no traceparent")
	}
	upTrace, upSpan := tpSplit(t, upstreamTP(t, out))
	if _, ok := out.MetaString("progressToken"); ok {
		t.Error("a progressToken found in the copy's _meta")
	}
	c.End(answer)
	c.End(nil)
	rec := &audit.Record{Time: now, HTTPMethod: "POST", MCPMethod: "tools/call", Destination: "d", Session: session,
		Status: 200, RPCID: req.ID, Latency: 5 * time.Millisecond}
	q.End(rec)
	q.End(rec)

	got := spans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want the client and the server span", len(got))
	}
	client, server := got[0], got[1]
	sampledRemote := uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK|tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) | 1
	wantServer := &tracepb.Span{
		TraceId: mustHex(t, "4bf92f3577b34da6a3ce929d0e0e4736"), SpanId: server.SpanId, ParentSpanId: mustHex(t, "00f067aa0ba902b7"),
		TraceState: "vendor=a", Flags: sampledRemote, Name: "tools/call echo", Kind: tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(now.UnixNano()), EndTimeUnixNano: uint64(now.Add(5 * time.Millisecond).UnixNano()),
		Attributes: []*commonpb.KeyValue{kv("http.response.status_code", iv(200)), kv(AttrMethod, sv("tools/call")),
			kv(AttrTool, sv("echo")), kv(AttrDestination, sv("d")), kv(AttrSession, sv(session)), kv(AttrRequestID, sv("7"))},
		Status: &tracepb.Status{},
	}
	if !proto.Equal(server, wantServer) {
		t.Errorf("server span\n%s\nwant\n%s", prototext.Format(server), prototext.Format(wantServer))
	}
	wantClient := &tracepb.Span{
		TraceId: wantServer.TraceId, SpanId: mustHex(t, upSpan), ParentSpanId: server.SpanId, TraceState: "vendor=a",
		Flags: flags | 1, Name: "tools/call echo", Kind: tracepb.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: client.StartTimeUnixNano, EndTimeUnixNano: client.EndTimeUnixNano,
		Attributes: []*commonpb.KeyValue{kv(AttrMethod, sv("tools/call")), kv(AttrDestination, sv("d")), kv(AttrTool, sv("echo")),
			kv(AttrSession, sv(session)), kv("rpc.response.status_code", sv("-32000"))},
		Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
	}
	if !proto.Equal(client, wantClient) {
		t.Errorf("client span\n%s\nwant\n%s", prototext.Format(client), prototext.Format(wantClient))
	}
	if upTrace != "4bf92f3577b34da6a3ce929d0e0e4736" || client.StartTimeUnixNano < uint64(now.UnixNano()) ||
		client.EndTimeUnixNano < client.StartTimeUnixNano || bytes.Equal(server.SpanId, wantServer.ParentSpanId) {
		t.Errorf("upstream trace %s; client span from %d to %d, request at %d; server span %x",
			upTrace, client.StartTimeUnixNano, client.EndTimeUnixNano, now.UnixNano(), server.SpanId)
	}
	e := exports()[0].req.ResourceSpans[0]
	if a := e.Resource.Attributes; len(a) != 1 || a[0].Key != "service.name" || a[0].Value.GetStringValue() != "test" ||
		e.ScopeSpans[0].Scope.GetName() != scopeName {
		t.Errorf("resource %v, scope %v", e.Resource, e.ScopeSpans[0].Scope)
	}

	// Not sampled: a parent in params._meta saying so, and a root at ratio 0.
	unsampled, _ := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":8,"method":"ping","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}}}`))
	q = tr.Start(httptest.NewRequest("POST", "/d/mcp", nil), now)
	out, c = q.Upstream("d", "", unsampled)
	tp := upstreamTP(t, out)
	if tr, sp := tpSplit(t, tp); tr != "0af7651916cd43dd8448eb211c80319c" || sp == "b7ad6b7169203331" || !strings.HasSuffix(tp, "-00") {
		t.Errorf("unsampled parent: upstream got %s, want the parent's trace, a new span, not sampled", tp)
	}
	c.End(nil)
	q.End(&audit.Record{Time: now, HTTPMethod: "POST", MCPMethod: "ping", Status: 200})
	tr0, spans0, _ := testTracer(t, 0)
	q = tr0.Start(httptest.NewRequest("POST", "/d/mcp", nil), now)
	out, c = q.Upstream("d", "", req)
	if tp := upstreamTP(t, out); !strings.HasSuffix(tp, "-00") {
		t.Errorf("ratio 0: upstream got %s, want it not sampled", tp)
	}
	c.End(nil)
	q.End(&audit.Record{Time: now, HTTPMethod: "POST", MCPMethod: "tools/call", Status: 200})
	if n, n0 := len(spans()), len(spans0()); n != 2 || n0 != 0 {
		t.Errorf("unsampled requests exported %d and %d spans, want none", n-2, n0)
	}

	// No upstream call, failed: a root.
	q = tr.Start(httptest.NewRequest("GET", "/d/mcp", nil), now)
	q.End(&audit.Record{Time: now, HTTPMethod: "GET", Status: 503, Error: "upstream down"})
	got = spans()
	if len(got) != 3 {
		t.Fatalf("%d spans, want 3", len(got))
	}
	s := got[2]
	if s.Name != "GET" || s.ParentSpanId != nil || s.Flags != flags|1 || s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		s.Status.GetMessage() != "upstream down" || len(s.Attributes) != 1 || s.Attributes[0].Value.GetIntValue() != 503 {
		t.Errorf("failed request's span:\n%s", prototext.Format(s))
	}
}

// TestProcessorEncoding: spans made by the SDK's tracer, as the gateway's
// Request and Call make them (a remote parent with a trace state, int
// attributes, lengths of two bytes, an error status; a description without
// an error, which is not kept; long and empty names), are encoded by the
// processor as they end into exactly the export appendExport writes for
// the same spans, in place as well, and those bytes are what the
// collector's types decode and their Marshal writes.
func TestProcessorEncoding(t *testing.T) {
	ts := mustTraceState(t, "vendor=a,other=b")
	res := resource.NewSchemaless(attribute.String("service.name", "sb"))
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid1, SpanID: sidP, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true}))
	type spanCase struct {
		ctx    context.Context
		name   string
		kind   trace.SpanKind
		attrs  []attribute.KeyValue
		status codes.Code
		msg    string
	}
	for _, c := range []spanCase{
		{parent, "tools/call echo", trace.SpanKindServer, []attribute.KeyValue{attribute.Int(attrHTTPStatus, 502),
			attribute.Int64("negative", -1<<40), attribute.String(AttrMethod, "tools/call"),
			attribute.String(AttrSession, strings.Repeat("s", 300)), attribute.String(AttrRequestID, strings.Repeat("i", 120))},
			codes.Error, "boom"},
		{context.Background(), "ping", trace.SpanKindClient, []attribute.KeyValue{attribute.String(AttrDestination, "")},
			codes.Unset, "kept only with an error"},
		{context.Background(), strings.Repeat("m", 100) + " " + strings.Repeat("t", 100), trace.SpanKindServer, nil, codes.Unset, ""},
		{context.Background(), "", trace.SpanKindClient, nil, codes.Unset, ""},
	} {
		p := &processor{cur: &batch{}} // no goroutine: the test reads its batch
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p), sdktrace.WithSpanProcessor(rec),
			sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		_, sp := tp.Tracer(scopeName).Start(c.ctx, c.name, trace.WithSpanKind(c.kind), trace.WithTimestamp(t0))
		sp.SetAttributes(c.attrs...)
		sp.SetStatus(c.status, c.msg)
		sp.End(trace.WithTimestamp(t0.Add(time.Second)))
		var ref batch
		ref.add(rec.Ended()[0])
		want := ref.appendExport(nil)
		if got := p.cur.appendExport(nil); !bytes.Equal(got, want) {
			t.Errorf("%q: export\n%x\nwant\n%x", c.name, got, want)
		}
		if got, ok := p.cur.inPlace(); !ok || !bytes.Equal(got, want) {
			t.Errorf("%q: export in place (%v)\n%x\nwant\n%x", c.name, ok, got, want)
		}
		var dec coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(want, &dec); err != nil {
			t.Fatalf("%q: %v", c.name, err)
		}
		if theirs, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(&dec); !bytes.Equal(theirs, want) {
			t.Errorf("%q: export differs from the collector's Marshal\nmine   %x\ntheirs %x", c.name, want, theirs)
		}
		s := dec.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]
		wantMsg := ""
		if c.status == codes.Error {
			wantMsg = c.msg
		}
		remote := c.ctx != context.Background()
		if s.GetName() != c.name || len(s.GetAttributes()) != len(c.attrs) || s.GetStatus().GetMessage() != wantMsg ||
			(s.GetFlags()&uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) != 0) != remote ||
			(remote && (s.GetTraceState() != ts.String() || !bytes.Equal(s.GetParentSpanId(), sidP[:]))) {
			t.Errorf("%q: decoded\n%s", c.name, prototext.Format(s))
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tpSplit returns a traceparent's trace and span ids.
func tpSplit(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	p := strings.Split(tp, "-")
	if len(p) != 4 || len(p[1]) != 32 || len(p[2]) != 16 {
		t.Fatalf("malformed traceparent %q", tp)
	}
	return p[1], p[2]
}

// traceparent renders sc as a W3C traceparent value.
func traceparent(sc trace.SpanContext) string {
	var b [55]byte
	putTraceparent(&b, sc)
	return string(b[:])
}

// SetMeta is spliceMeta with _meta looked up, and a plain key and value.
func SetMeta(params json.RawMessage, key, value string) (json.RawMessage, bool) {
	out, _, _, ok := setMeta(params, jsonrpc.Quote(key), jsonrpc.Quote(value))
	return out, ok
}

// setMeta is spliceMeta with _meta looked up.
func setMeta(params json.RawMessage, key, value []byte) (out json.RawMessage, metaStart, metaEnd int, ok bool) {
	ms, me, hasMeta := 0, 0, false
	if mayHaveMeta(params) {
		_, ms, me, hasMeta = jsonrpc.Lookup(params, "_meta")
	}
	return spliceMeta(params, ms, me, hasMeta, key, value)
}

// mayHaveMeta reports whether params may have a _meta member: false only
// when its quoted key appears nowhere and no backslash does (an escaped
// key is the same key). Both searches are vectorised, so params without
// _meta (most of them) are not walked.
func mayHaveMeta(params []byte) bool {
	return bytes.Contains(params, []byte(`"_meta"`)) || bytes.IndexByte(params, '\\') >= 0
}
