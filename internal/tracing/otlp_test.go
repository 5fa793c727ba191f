package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// export is one POST an OTLP receiver got.
type export struct {
	method, path string
	header       http.Header
	req          *coltracepb.ExportTraceServiceRequest
}

// receiver is an OTLP/HTTP endpoint on loopback that decodes each export
// with the collector's own protobuf types and answers 200.
func receiver(t *testing.T) (url string, got func() []export) {
	t.Helper()
	var mu sync.Mutex
	var exports []export
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("receiver: %v", err)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Errorf("receiver: %v", err)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("receiver: the export does not decode as an ExportTraceServiceRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		exports = append(exports, export{r.Method, r.URL.Path, r.Header.Clone(), &req})
		mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []export {
		mu.Lock()
		defer mu.Unlock()
		return append([]export(nil), exports...)
	}
}

var (
	tid1 = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	tid2 = trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	sidA = trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	sidB = trace.SpanID{2, 2, 2, 2, 2, 2, 2, 2}
	sidC = trace.SpanID{3, 3, 3, 3, 3, 3, 3, 3}
	sidP = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	sidL = trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}
	t0   = time.Date(2026, 11, 25, 8, 0, 0, 123456789, time.UTC)
	t0ns = uint64(t0.UnixNano())
	sec  = uint64(time.Second)
	// tRetry is a whole second, as an HTTP date is.
	tRetry = time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	flags  = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
)

func mustTraceState(t *testing.T, s string) trace.TraceState {
	t.Helper()
	ts, err := trace.ParseTraceState(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// Constructors of expected values.
func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}
func sv(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func iv(n int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
}
func bv(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func dv(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}
func av(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
func mv(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
}

// TestExportFieldMapping: what the exporter posts decodes with the
// collector's ExportTraceServiceRequest into exactly the OTLP spans
// expected, field by field: grouped by resource, then scope, in the order
// first seen; ids, parent, trace state, flags (sampled, parent remote),
// name, kind, times, attributes of every attribute.Type, events, links,
// status and dropped counts. The bytes are those the collector package's
// own Marshal writes for the expected message.
func TestExportFieldMapping(t *testing.T) {
	r1 := resource.NewSchemaless(attribute.String("service.name", "sb"), attribute.String("service.version", "1.2.3"))
	r2 := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "other"))
	s1 := instrumentation.Scope{Name: "github.com/switchboard-mcp/switchboard", Version: "v1", SchemaURL: "https://example.com/s1",
		Attributes: attribute.NewSet(attribute.Bool("scope.attr", true))}
	s2 := instrumentation.Scope{Name: "other/scope"}

	spanA := tracetest.SpanStub{
		Name: "tools/call echo",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidA,
			TraceFlags: trace.FlagsSampled, TraceState: mustTraceState(t, "vendor=a,other=b")}),
		Parent:    trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidP, TraceFlags: trace.FlagsSampled, Remote: true}),
		SpanKind:  trace.SpanKindServer,
		StartTime: t0,
		EndTime:   t0.Add(time.Second),
		Attributes: []attribute.KeyValue{
			attribute.Bool("bool", true),
			attribute.Int64("int", -42),
			attribute.Float64("float", 2.5),
			attribute.String("string", "héllo"),
			attribute.ByteSlice("bytes", []byte{0, 1, 0xff}),
			attribute.BoolSlice("bools", []bool{true, false}),
			attribute.Int64Slice("ints", []int64{1, -2}),
			attribute.Float64Slice("floats", []float64{0.5, -1}),
			attribute.StringSlice("strings", []string{"a", ""}),
			attribute.Slice("mixed", attribute.StringValue("x"), attribute.IntValue(7),
				attribute.SliceValue(attribute.BoolValue(false)), attribute.MapValue(attribute.String("k", "v"))),
			attribute.Map("map", attribute.Int("n", 1), attribute.StringSlice("s", []string{"z"})),
			{Key: "empty"},
		},
		Events: []sdktrace.Event{
			{Name: "exception", Time: t0.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("exception.message", "boom")}, DroppedAttributeCount: 2},
			{Name: "bare", Time: t0.Add(2 * time.Millisecond)},
		},
		Links: []sdktrace.Link{{
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid2, SpanID: sidL, TraceFlags: trace.FlagsSampled,
				TraceState: mustTraceState(t, "l=1"), Remote: true}),
			Attributes:            []attribute.KeyValue{attribute.String("link.kind", "follows")},
			DroppedAttributeCount: 1,
		}},
		Status:               sdktrace.Status{Code: codes.Error, Description: "upstream failed"},
		DroppedAttributes:    3,
		DroppedEvents:        4,
		DroppedLinks:         5,
		Resource:             r1,
		InstrumentationScope: s1,
	}
	spanB := tracetest.SpanStub{ // no parent, not sampled, unset status, another scope
		Name:                 "internal",
		SpanContext:          trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid2, SpanID: sidB}),
		SpanKind:             trace.SpanKindInternal,
		StartTime:            t0,
		EndTime:              t0.Add(2 * time.Second),
		Resource:             r1,
		InstrumentationScope: s2,
	}
	spanC := tracetest.SpanStub{ // another resource, a local parent, status Ok
		Name:                 "client",
		SpanContext:          trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidC, TraceFlags: trace.FlagsSampled}),
		Parent:               trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidA, TraceFlags: trace.FlagsSampled}),
		SpanKind:             trace.SpanKindClient,
		StartTime:            t0,
		EndTime:              t0.Add(3 * time.Second),
		Status:               sdktrace.Status{Code: codes.Ok},
		Resource:             r2,
		InstrumentationScope: s1,
	}
	spanD := spanB // same resource and scope as B, after C: joins B's group
	spanD.Name, spanD.SpanKind = "producer", trace.SpanKindProducer
	spanE := spanC // consumer kind, same group as C
	spanE.Name, spanE.SpanKind, spanE.Status = "consumer", trace.SpanKindConsumer, sdktrace.Status{}
	spans := tracetest.SpanStubs{spanA, spanB, spanC, spanD, spanE}.Snapshots()

	scope1 := &commonpb.InstrumentationScope{Name: s1.Name, Version: "v1", Attributes: []*commonpb.KeyValue{kv("scope.attr", bv(true))}}
	wantB := &tracepb.Span{TraceId: tid2[:], SpanId: sidB[:], Flags: flags, Name: "internal", Kind: tracepb.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: t0ns, EndTimeUnixNano: t0ns + 2*sec, Status: &tracepb.Status{}}
	wantD := proto.Clone(wantB).(*tracepb.Span)
	wantD.Name, wantD.Kind = "producer", tracepb.Span_SPAN_KIND_PRODUCER
	wantC := &tracepb.Span{TraceId: tid1[:], SpanId: sidC[:], ParentSpanId: sidA[:], Flags: flags | 1, Name: "client",
		Kind: tracepb.Span_SPAN_KIND_CLIENT, StartTimeUnixNano: t0ns, EndTimeUnixNano: t0ns + 3*sec,
		Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}}
	wantE := proto.Clone(wantC).(*tracepb.Span)
	wantE.Name, wantE.Kind, wantE.Status = "consumer", tracepb.Span_SPAN_KIND_CONSUMER, &tracepb.Status{}
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", sv("sb")), kv("service.version", sv("1.2.3"))}},
			ScopeSpans: []*tracepb.ScopeSpans{
				{Scope: scope1, SchemaUrl: "https://example.com/s1", Spans: []*tracepb.Span{{
					TraceId: tid1[:], SpanId: sidA[:], ParentSpanId: sidP[:], TraceState: "vendor=a,other=b",
					Flags: flags | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) | 1,
					Name:  "tools/call echo", Kind: tracepb.Span_SPAN_KIND_SERVER,
					StartTimeUnixNano: t0ns, EndTimeUnixNano: t0ns + sec,
					Attributes: []*commonpb.KeyValue{
						kv("bool", bv(true)),
						kv("int", iv(-42)),
						kv("float", dv(2.5)),
						kv("string", sv("héllo")),
						kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 0xff}}}),
						kv("bools", av(bv(true), bv(false))),
						kv("ints", av(iv(1), iv(-2))),
						kv("floats", av(dv(0.5), dv(-1))),
						kv("strings", av(sv("a"), sv(""))),
						kv("mixed", av(sv("x"), iv(7), av(bv(false)), mv(kv("k", sv("v"))))),
						kv("map", mv(kv("n", iv(1)), kv("s", av(sv("z"))))),
						kv("empty", &commonpb.AnyValue{}),
					},
					DroppedAttributesCount: 3,
					Events: []*tracepb.Span_Event{
						{Name: "exception", TimeUnixNano: t0ns + uint64(time.Millisecond), Attributes: []*commonpb.KeyValue{kv("exception.message", sv("boom"))}, DroppedAttributesCount: 2},
						{Name: "bare", TimeUnixNano: t0ns + 2*uint64(time.Millisecond)},
					},
					DroppedEventsCount: 4,
					Links: []*tracepb.Span_Link{{TraceId: tid2[:], SpanId: sidL[:], TraceState: "l=1",
						Attributes: []*commonpb.KeyValue{kv("link.kind", sv("follows"))}, DroppedAttributesCount: 1,
						Flags: flags | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) | 1}},
					DroppedLinksCount: 5,
					Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream failed"},
				}}},
				{Scope: &commonpb.InstrumentationScope{Name: "other/scope"}, Spans: []*tracepb.Span{wantB, wantD}},
			},
		},
		{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", sv("other"))}},
			SchemaUrl:  "https://opentelemetry.io/schemas/1.26.0",
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: scope1, SchemaUrl: "https://example.com/s1", Spans: []*tracepb.Span{wantC, wantE}}},
		},
	}}

	url, got := receiver(t)
	exp, err := newExporterFromEnv(url)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	exports := got()
	if len(exports) != 1 {
		t.Fatalf("%d exports received, want 1", len(exports))
	}
	e := exports[0]
	if e.method != http.MethodPost || e.path != "/v1/traces" || e.header.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("export: %s %s, Content-Type %q; want POST /v1/traces, application/x-protobuf", e.method, e.path, e.header.Get("Content-Type"))
	}
	if !proto.Equal(e.req, want) {
		t.Errorf("export decoded as\n%s\nwant\n%s", prototext.Format(e.req), prototext.Format(want))
	}

	// The bytes: what the collector package's own Marshal writes for the
	// expected message.
	var bt batch
	for _, sd := range spans {
		bt.add(sd)
	}
	mine := bt.appendExport(nil)
	theirs, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mine, theirs) {
		t.Errorf("encoded export (%d bytes) differs from coltracepb's Marshal (%d bytes)\nmine   %x\ntheirs %x", len(mine), len(theirs), mine, theirs)
	}
	if _, ok := bt.inPlace(); ok {
		t.Error("a batch of several groups exported in place")
	}
	// One group, with a resource and scope that have schema URLs and a
	// scope with attributes: in place, the same bytes.
	var one batch
	one.add(spans[2])
	one.add(spans[4])
	if got, ok := one.inPlace(); !ok || !bytes.Equal(got, one.appendExport(nil)) {
		t.Errorf("export in place (%v)\n%x\nwant\n%x", ok, got, one.appendExport(nil))
	}
}

// TestExportLongLengths: messages whose lengths take two and three bytes
// (a 200-byte and a 70,000-byte attribute, and the batch around them)
// decode with the collector's types, and the bytes are what its Marshal
// writes.
func TestExportLongLengths(t *testing.T) {
	long := strings.Repeat("x", 70000)
	spans := tracetest.SpanStubs{{
		Name:        "long",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidA, TraceFlags: trace.FlagsSampled}),
		StartTime:   t0, EndTime: t0,
		Attributes: []attribute.KeyValue{attribute.String("mid", long[:200]), attribute.String("long", long)},
		Resource:   resource.NewSchemaless(attribute.String("service.name", "sb")),
	}}.Snapshots()
	var bt batch
	for _, sd := range spans {
		bt.add(sd)
	}
	b := bt.appendExport(nil)
	var got coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	s := got.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]
	if a := s.GetAttributes(); len(a) != 2 || a[0].GetValue().GetStringValue() != long[:200] || a[1].GetValue().GetStringValue() != long || s.GetName() != "long" {
		t.Errorf("decoded span: %d attributes, name %q", len(a), s.GetName())
	}
	theirs, err := proto.MarshalOptions{Deterministic: true}.Marshal(&got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, theirs) {
		t.Errorf("encoded export (%d bytes) differs from coltracepb's Marshal (%d bytes)", len(b), len(theirs))
	}
	if got, ok := bt.inPlace(); !ok || !bytes.Equal(got, b) {
		t.Errorf("export in place (%v, %d bytes) differs from appendExport's (%d bytes)", ok, len(got), len(b))
	}
}

func TestExportNothing(t *testing.T) {
	url, got := receiver(t)
	exp, err := newExporterFromEnv(url)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	for _, spans := range [][]sdktrace.ReadOnlySpan{nil, {nil}} {
		if err := exp.ExportSpans(context.Background(), spans); err != nil {
			t.Errorf("ExportSpans(%v) = %v", spans, err)
		}
	}
	if n := len(got()); n != 0 {
		t.Errorf("%d exports sent for no spans", n)
	}
}

// exporterConfigTests are the endpoint and environment rules: the option
// first, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else localhost:4318; headers
// from the traces variable, else the general one (URL-decoded); the
// timeout in milliseconds; gzip or none.
var exporterConfigTests = []struct {
	name     string
	endpoint string
	env      map[string]string
	want     exporterConfig
	err      string // "" for success; else a part of the error
}{
	{name: "defaults", want: exporterConfig{url: "http://localhost:4318/v1/traces", timeout: 10 * time.Second}},
	{name: "option", endpoint: "http://127.0.0.1:4318",
		env:  map[string]string{envTracesEndpoint: "http://ignored/x", envEndpoint: "http://ignored"},
		want: exporterConfig{url: "http://127.0.0.1:4318/v1/traces", timeout: 10 * time.Second}},
	{name: "option with a slash", endpoint: "https://c.example/otlp/",
		want: exporterConfig{url: "https://c.example/otlp/v1/traces", timeout: 10 * time.Second}},
	{name: "traces endpoint as it is", env: map[string]string{envTracesEndpoint: "https://c.example:4318/custom/path", envEndpoint: "http://ignored"},
		want: exporterConfig{url: "https://c.example:4318/custom/path", timeout: 10 * time.Second}},
	{name: "base endpoint", env: map[string]string{envEndpoint: "http://collector:4318"},
		want: exporterConfig{url: "http://collector:4318/v1/traces", timeout: 10 * time.Second}},
	{name: "base endpoint with a path and slash", env: map[string]string{envEndpoint: "http://collector:4318/base/"},
		want: exporterConfig{url: "http://collector:4318/base/v1/traces", timeout: 10 * time.Second}},
	{name: "headers", env: map[string]string{envHeaders: " Authorization = Bearer%20s3cret%3D%3D , x-tenant=a%2Cb,,"},
		want: exporterConfig{url: defaultEndpoint, timeout: 10 * time.Second,
			headers: http.Header{"Authorization": {"Bearer s3cret=="}, "X-Tenant": {"a,b"}}}},
	{name: "traces headers replace the general ones", env: map[string]string{envHeaders: "a=1,b=2", envTracesHeaders: "c=3"},
		want: exporterConfig{url: defaultEndpoint, timeout: 10 * time.Second, headers: http.Header{"C": {"3"}}}},
	{name: "timeout", env: map[string]string{envTimeout: "1", envTracesTimeout: "2500"},
		want: exporterConfig{url: defaultEndpoint, timeout: 2500 * time.Millisecond}},
	{name: "timeout 0", env: map[string]string{envTimeout: "0"},
		want: exporterConfig{url: defaultEndpoint}},
	{name: "gzip", env: map[string]string{envCompression: "gzip"},
		want: exporterConfig{url: defaultEndpoint, timeout: 10 * time.Second, gzip: true}},
	{name: "traces compression wins", env: map[string]string{envCompression: "gzip", envTracesCompression: "none"},
		want: exporterConfig{url: defaultEndpoint, timeout: 10 * time.Second}},

	{name: "option not a URL", endpoint: "127.0.0.1:4318", err: "the configured endpoint is not an http(s) URL"},
	{name: "traces endpoint not http", env: map[string]string{envTracesEndpoint: "grpc://user:s3cret@c:4317"},
		err: envTracesEndpoint + " is not an http(s) URL"},
	{name: "base endpoint without host", env: map[string]string{envEndpoint: "http:///x"}, err: envEndpoint + " is not an http(s) URL"},
	{name: "header without =", env: map[string]string{envHeaders: "a=1,Bearer s3cret"},
		err: envHeaders + ": entry 2 is not key=value with a valid header name"},
	{name: "header with a bad name", env: map[string]string{envTracesHeaders: "bad name=s3cret"},
		err: envTracesHeaders + ": entry 1 is not key=value"},
	{name: "header with a bad escape", env: map[string]string{envHeaders: "Authorization=s3cret%zz"},
		err: envHeaders + ": entry 1 (Authorization): the value is not a valid URL-encoded header value"},
	{name: "header with a line break", env: map[string]string{envHeaders: "k=s3cret%0D%0AX: y"},
		err: "entry 1 (k): the value is not a valid"},
	{name: "bad timeout", env: map[string]string{envTracesTimeout: "10s"}, err: envTracesTimeout + `: "10s" is not a number of milliseconds`},
	{name: "bad compression", env: map[string]string{envCompression: "zstd"}, err: envCompression + `: "zstd" is neither gzip nor none`},
}

func TestExportConfig(t *testing.T) {
	for _, c := range exporterConfigTests {
		t.Run(c.name, func(t *testing.T) {
			got, err := exporterConfigFrom(c.endpoint, func(k string) string { return c.env[k] })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error %q quotes the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.want.headers == nil {
				c.want.headers = http.Header{}
			}
			if got.url != c.want.url || got.timeout != c.want.timeout || got.gzip != c.want.gzip || !equalHeaders(got.headers, c.want.headers) {
				t.Errorf("config %+v, want %+v", got, c.want)
			}
		})
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

// TestExportEnvironment: with no endpoint configured, a Tracer exports to
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT with the OTEL_EXPORTER_OTLP_HEADERS,
// gzipped when OTEL_EXPORTER_OTLP_COMPRESSION says so.
func TestExportEnvironment(t *testing.T) {
	url, got := receiver(t)
	t.Setenv(envEndpoint, "http://127.0.0.1:1") // the traces variable wins
	t.Setenv(envTracesEndpoint, url+"/custom/traces")
	t.Setenv(envHeaders, "Authorization=Bearer%20tok,X-Scope-OrgID=tenant-1")
	t.Setenv(envCompression, "gzip")
	tr, err := New(Options{SampleRatio: 1, ServiceName: "env-test"})
	if err != nil {
		t.Fatal(err)
	}
	tr.Start(httptest.NewRequest("GET", "/", nil), time.Now()).End(&audit.Record{HTTPMethod: "GET", Status: 200})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exports := got()
	if len(exports) != 1 {
		t.Fatalf("%d exports, want 1", len(exports))
	}
	e := exports[0]
	if e.path != "/custom/traces" || e.header.Get("Authorization") != "Bearer tok" || e.header.Get("X-Scope-OrgID") != "tenant-1" ||
		e.header.Get("Content-Encoding") != "gzip" {
		t.Errorf("export to %s with headers %v; want /custom/traces, the configured headers, gzip", e.path, e.header)
	}
	if n := len(e.req.GetResourceSpans()); n != 1 || len(e.req.ResourceSpans[0].ScopeSpans[0].Spans) != 1 {
		t.Fatalf("export: %s", prototext.Format(e.req))
	}
	if a := e.req.ResourceSpans[0].Resource.Attributes; len(a) != 1 || a[0].Key != "service.name" || a[0].Value.GetStringValue() != "env-test" {
		t.Errorf("resource attributes %v", a)
	}

	t.Setenv(envTracesEndpoint, "localhost:4318")
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), envTracesEndpoint) {
		t.Errorf("New with a bad %s: %v", envTracesEndpoint, err)
	}
}

// handlerTransport serves each request with h in the caller's goroutine,
// so that a synctest bubble holds the whole exchange.
type handlerTransport struct{ h http.HandlerFunc }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// collector answers the exporter's tries in turn from answers (status,
// Retry-After, body), counting them and noting when each came.
type collector struct {
	answers []answer
	tries   []time.Time
	bodies  [][]byte
}

type answer struct {
	status     int
	retryAfter string
	body       string
	hang       bool // wait for the request's context to end
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.bodies = append(c.bodies, b)
	c.tries = append(c.tries, time.Now())
	a := c.answers[min(len(c.tries), len(c.answers))-1]
	if a.hang {
		<-r.Context().Done()
		return
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

var oneSpan = tracetest.SpanStubs{{Name: "s", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidA}),
	StartTime: t0, EndTime: t0}}.Snapshots()

// retryTests: 429, 502, 503 and 504 are retried once, after the answer's
// Retry-After (seconds or a date) or a second without one, unless that
// wait ends past the export's deadline; other failures are not retried.
// Errors name the status and quote the body, clipped.
var retryTests = []struct {
	name    string
	answers []answer
	tries   int
	wait    time.Duration // between the tries
	err     string        // "" for success
}{
	{name: "503 then 200, Retry-After seconds", answers: []answer{{status: 503, retryAfter: "7"}, {status: 200}}, tries: 2, wait: 7 * time.Second},
	{name: "429 without Retry-After", answers: []answer{{status: 429}, {status: 200}}, tries: 2, wait: time.Second},
	{name: "502, Retry-After a date", answers: []answer{{status: 502, retryAfter: tRetry.Add(3 * time.Second).Format(http.TimeFormat)}, {status: 200}},
		tries: 2, wait: 3 * time.Second},
	{name: "504 twice", answers: []answer{{status: 504, body: "first"}, {status: 504, retryAfter: "0", body: "still down"}}, tries: 2, wait: time.Second,
		err: "504 Gateway Timeout: still down"},
	{name: "Retry-After past the deadline", answers: []answer{{status: 503, retryAfter: "60", body: "busy"}}, tries: 1,
		err: "503 Service Unavailable: busy (Retry-After 1m0s is past the export's deadline)"},
	{name: "400 not retried", answers: []answer{{status: 400, body: "bad " + strings.Repeat("x", 1000)}}, tries: 1,
		err: "400 Bad Request: bad " + strings.Repeat("x", maxErrorBody-4) + "…"},
	{name: "500 not retried, empty body", answers: []answer{{status: 500}}, tries: 1, err: "500 Internal Server Error: (empty)"},
	{name: "hang past the timeout", answers: []answer{{hang: true}}, tries: 1, err: "context deadline exceeded"},
}

func TestExportRetry(t *testing.T) {
	for _, c := range retryTests {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The bubble's clock starts at 2000-01-01; move it to tRetry.
				time.Sleep(tRetry.Sub(time.Now()))
				col := &collector{answers: c.answers}
				exp := newExporter(exporterConfig{url: "http://collector.test/v1/traces", timeout: 10 * time.Second, headers: http.Header{}})
				exp.client.Transport = handlerTransport{col.serve}
				start := time.Now()
				err := exp.ExportSpans(context.Background(), oneSpan)
				switch {
				case c.err == "" && err != nil:
					t.Errorf("ExportSpans: %v", err)
				case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
					t.Errorf("ExportSpans: %v; want an error containing %q", err, c.err)
				}
				if len(col.tries) != c.tries {
					t.Fatalf("%d tries, want %d", len(col.tries), c.tries)
				}
				if c.tries == 2 {
					if got := col.tries[1].Sub(col.tries[0]); got != c.wait {
						t.Errorf("retried after %v, want %v", got, c.wait)
					}
					if !bytes.Equal(col.bodies[0], col.bodies[1]) || len(col.bodies[0]) == 0 {
						t.Errorf("the retry sent %d bytes, the first try %d; want the same export", len(col.bodies[1]), len(col.bodies[0]))
					}
				}
				if c.tries == 1 && c.answers[0].hang {
					if got := time.Since(start); got != 10*time.Second {
						t.Errorf("gave up after %v, want the 10s timeout", got)
					}
				}
			})
		})
	}
}

// TestExportContext: the caller's deadline bounds the export and its
// retry wait.
func TestExportContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col := &collector{answers: []answer{{status: 503, retryAfter: "5"}, {status: 200}}}
		exp := newExporter(exporterConfig{url: "http://collector.test/v1/traces", headers: http.Header{}})
		exp.client.Transport = handlerTransport{col.serve}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := exp.ExportSpans(ctx, oneSpan)
		if err == nil || !strings.Contains(err.Error(), "past the export's deadline") || len(col.tries) != 1 {
			t.Errorf("ExportSpans with 2s left and Retry-After 5: %v after %d tries; want no retry", err, len(col.tries))
		}

		col = &collector{answers: []answer{{status: 503, retryAfter: "5"}, {status: 200}}}
		exp.client.Transport = handlerTransport{col.serve}
		ctx, cancel = context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- exp.ExportSpans(ctx, oneSpan) }()
		synctest.Wait() // the exporter waits for the retry
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) && (err == nil || !strings.Contains(err.Error(), "context canceled")) {
			t.Errorf("ExportSpans cancelled in its retry wait: %v", err)
		}
		if len(col.tries) != 1 {
			t.Errorf("%d tries, want 1", len(col.tries))
		}
	})
}

// TestExportShutdown: Shutdown cancels an export in flight, makes later
// exports fail without sending, and can be called again, concurrently.
func TestExportShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col := &collector{answers: []answer{{hang: true}}}
		exp := newExporter(exporterConfig{url: "http://collector.test/v1/traces", timeout: time.Hour, headers: http.Header{}})
		exp.client.Transport = handlerTransport{col.serve}
		done := make(chan error)
		go func() { done <- exp.ExportSpans(context.Background(), oneSpan) }()
		synctest.Wait() // the export is in flight
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := exp.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			})
		}
		wg.Wait()
		if err := <-done; err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("export in flight at Shutdown: %v, want it cancelled", err)
		}
		if err := exp.ExportSpans(context.Background(), oneSpan); !errors.Is(err, errExporterShutdown) {
			t.Errorf("export after Shutdown: %v", err)
		}
		if len(col.tries) != 1 {
			t.Errorf("%d tries, want 1", len(col.tries))
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := exp.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown with a done context: %v", err)
		}
	})
}

// TestExportErrors: failures on a real loopback connection: a refused
// connection, a non-2xx answer naming the status with the body clipped and
// without the endpoint's credentials, and the headers never in an error.
func TestExportErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	exp, err := newExporterFromEnv("")
	if err != nil {
		t.Fatal(err)
	}
	exp.cfg.url = "http://user:pw@" + l.Addr().String() + "/v1/traces?token=q"
	err = exp.ExportSpans(context.Background(), oneSpan)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), closed+"/v1/traces:") {
		t.Errorf("export to a closed port: %v; want connection refused, naming the URL", err)
	} else if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "token") {
		t.Errorf("export to a closed port: %v: the URL's credentials or query", err)
	}

	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.URL.RawQuery != "k=q" {
			t.Errorf("request %s with Authorization %q", r.URL, r.Header.Get("Authorization"))
		}
		http.Error(w, "unauthorized \xff"+strings.Repeat("é", 300), http.StatusUnauthorized)
	}))
	defer ts.Close()
	exp, err = newExporterFromEnv("")
	if err != nil {
		t.Fatal(err)
	}
	exp.cfg.url = strings.Replace(ts.URL, "http://", "http://user:pw@", 1) + "/v1/traces?k=q"
	exp.cfg.headers, _ = parseHeaders("Authorization=Bearer%20s3cret")
	err = exp.ExportSpans(context.Background(), oneSpan)
	if err == nil {
		t.Fatal("export answered 401: no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "401 Unauthorized: unauthorized \uFFFDé") || !strings.Contains(msg, ts.URL+"/v1/traces:") {
		t.Errorf("error %q; want the status, the URL and the body", msg)
	}
	if strings.Contains(msg, "s3cret") || strings.Contains(msg, "pw") || strings.Contains(msg, "k=q") || len(msg) > 400 {
		t.Errorf("error %q: credentials, query or the whole body", msg)
	}
}
