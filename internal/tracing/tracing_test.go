package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

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
		_, ms, me, _ := setMeta(params, mayHaveMeta(params), quotedMetaKey, appendQuoted(nil, tp))
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

// TestTracingSpanNames: the server span is named for the request's method
// and tool, whatever the upstream calls were named; a request that is no
// MCP call takes the HTTP method.
func TestTracingSpanNames(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := &Tracer{tp: tp, tr: tp.Tracer("test")}
	call := func(method, params string) *jsonrpc.Message {
		m, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	hr := httptest.NewRequest("POST", "/d/mcp", nil)
	now := time.Now()
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
		rec.Reset()
		q := tr.Start(hr, now)
		for _, m := range c.calls {
			_, cl := q.Upstream("d", "", m)
			cl.End(nil)
		}
		q.End(&audit.Record{Time: now, HTTPMethod: "GET", MCPMethod: c.method, Status: 200})
		ended := rec.Ended()
		var clients []string
		for _, s := range ended[:len(ended)-1] {
			clients = append(clients, s.Name())
		}
		if got := ended[len(ended)-1].Name(); got != c.want || !reflect.DeepEqual(clients, c.wantClients) {
			t.Errorf("%s: server span %q, client spans %q; want %q, %q", c.want, got, clients, c.want, c.wantClients)
		}
	}
}
