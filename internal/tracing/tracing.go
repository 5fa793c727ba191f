// Package tracing provides Switchboard's OpenTelemetry traces: a server
// span per MCP request and a client span per upstream call, made by the
// official SDK's tracer (go.opentelemetry.io/otel/sdk/trace), sampled by
// ParentBased(TraceIDRatioBased(ratio)), batched by this package's span
// processor and posted over OTLP/HTTP (protobuf) by its own exporter: the
// SDK's otlptracehttp links gRPC (+8.5 MB binary; see docs/performance.md).
//
// The server span's parent is the request's traceparent header or, when
// that is absent, params._meta.traceparent; a parent's sampled flag is
// followed, and [Options].SampleRatio (the config's sample_ratio, default
// 1: tracing is opt-in, and MCP call rates are low) decides for roots.
// Each upstream call carries its client span's context on in
// params._meta.traceparent (see [Request.Upstream]).
//
// A nil *Tracer is tracing off: [Tracer.Start] returns a nil *Request and
// every method of a nil *Request or *Call does nothing.
//
// Batches: 512 spans, or every 5 s; at most three full batches wait besides
// the one filling, a batch that fills beyond is dropped and counted through
// otel.Handle. Export: to Endpoint + "/v1/traces", else the standard
// OTEL_EXPORTER_OTLP_{TRACES_,}{ENDPOINT,HEADERS,TIMEOUT,COMPRESSION}
// variables (a malformed one fails [New], header values never logged); a
// non-2xx answer is an error quoting 256 bytes of it; 429, 502, 503 and 504
// are retried once after Retry-After when that fits the deadline.
package tracing

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Attribute keys the spans carry besides the HTTP ones.
const (
	// AttrMethod is the JSON-RPC method (MCP semantic conventions).
	AttrMethod = "mcp.method.name"
	// AttrTool is the tool of a tools/call (GenAI semantic conventions).
	AttrTool = "gen_ai.tool.name"
	// AttrSession is the client's Mcp-Session-Id.
	AttrSession = "mcp.session.id"
	// AttrDestination is the configured destination the call went to.
	AttrDestination = "switchboard.destination"
	// AttrRequestID is the JSON-RPC id, as sent.
	AttrRequestID = "jsonrpc.request.id"

	attrHTTPStatus = "http.response.status_code"
	attrRPCStatus  = "rpc.response.status_code"
)

// MetaKey is the params._meta member that carries the trace context.
const MetaKey = "traceparent"

// Options configures a [Tracer]. The zero value exports to the
// environment's endpoint (see the package doc; else
// http://localhost:4318/v1/traces) and samples nothing it starts itself.
type Options struct {
	// Endpoint is the OTLP/HTTP base URL; spans go to its /v1/traces. ""
	// leaves it to the environment: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// (a full URL), else OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces".
	Endpoint string
	// SampleRatio is the share of root traces recorded, 0 to 1; a parent's
	// sampled flag is followed whatever it is.
	SampleRatio float64
	// ServiceName and ServiceVersion are the resource's service.name and
	// service.version ("" omits them).
	ServiceName, ServiceVersion string
}

// Tracer makes the spans of one gateway. It owns the SDK's tracer
// provider, whose span processor's goroutine and exporter Shutdown ends.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	tr   trace.Tracer
	prop propagation.TraceContext
}

// scopeName is the instrumentation scope of the gateway's spans.
const scopeName = "github.com/switchboard-mcp/switchboard"

// New builds a Tracer exporting over OTLP/HTTP. Nothing is sent until a
// span ends; an unreachable collector costs dropped spans, not requests.
// A malformed OTEL_EXPORTER_OTLP_* variable is an error.
func New(opts Options) (*Tracer, error) {
	exp, err := newExporterFromEnv(opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	var attrs []attribute.KeyValue
	if opts.ServiceName != "" {
		attrs = append(attrs, attribute.String("service.name", opts.ServiceName))
	}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", opts.ServiceVersion))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newProcessor(exp)),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(opts.SampleRatio))))
	return &Tracer{tp: tp, tr: tp.Tracer(scopeName)}, nil
}

// Flush exports every span ended so far, within ctx.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Shutdown exports what is left and stops the exporter, within ctx. Spans
// ended afterwards are dropped. Later calls do nothing.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Request is the trace of one HTTP request: its server span, started with
// the request's arrival as its start time once its parent is known (at the
// first upstream call, whose params may carry one, or when the request
// ends). Safe for concurrent use (an aggregated list calls several servers
// at once).
type Request struct {
	t      *Tracer
	start  time.Time // the request's arrival
	header http.Header

	mu   sync.Mutex
	tool string // guarded by mu: the tool of a tools/call
	// ctx and span are the server span's; set once under mu by server,
	// before any Call exists, and read-only afterwards.
	ctx   context.Context
	span  trace.Span
	first upstreamCall // guarded by mu until firstUsed: the first upstream call's

	started   bool // guarded by mu: ctx and span are set
	ended     bool // guarded by mu
	firstUsed bool // guarded by mu
}

// Start begins the trace of r, arrived at start. A nil Tracer returns nil.
func (t *Tracer) Start(r *http.Request, start time.Time) *Request {
	if t == nil {
		return nil
	}
	return &Request{t: t, start: start, header: r.Header}
}

// RequestKey is the context key under which a request's *Request is
// found: the edge's per-request context, which carries the audit record
// too, answers Value(RequestKey{}) with the *Request, saving an
// allocation.
type RequestKey struct{}

// FromContext returns the Request of ctx, or nil.
func FromContext(ctx context.Context) *Request {
	q, _ := ctx.Value(RequestKey{}).(*Request)
	return q
}

// The span kinds as start options, made once (each would be an allocation).
var (
	serverKind = trace.WithSpanKind(trace.SpanKindServer)
	clientKind = trace.WithSpanKind(trace.SpanKindClient)
)

// serverSpanName is the server span's name until it ends, when its own is
// known (the sampler is asked about this one).
const serverSpanName = "mcp"

// server starts the server span if it is not started, as a child of the
// traceparent header or else of meta (a traceparent value, or ""), else
// as a root. Callers hold q.mu.
func (q *Request) server(meta string) {
	if q.started {
		return
	}
	q.started = true
	ctx := context.Background()
	// The canonical key, as net/http stores received headers.
	if v := q.header["Traceparent"]; len(v) > 0 && v[0] != "" {
		ctx = q.t.prop.Extract(ctx, propagation.HeaderCarrier(q.header))
	} else if meta != "" {
		ctx = q.t.prop.Extract(ctx, metaCarrier(meta))
	}
	q.ctx, q.span = q.t.tr.Start(ctx, serverSpanName, serverKind, trace.WithTimestamp(q.start))
}

// metaCarrier is a traceparent value read as a propagation carrier.
type metaCarrier string

func (c metaCarrier) Get(key string) string {
	if key == MetaKey {
		return string(c)
	}
	return ""
}
func (c metaCarrier) Set(string, string) {}
func (c metaCarrier) Keys() []string     { return []string{MetaKey} }

// putTraceparent writes sc as a W3C traceparent value into b.
func putTraceparent(b *[55]byte, sc trace.SpanContext) {
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	putHex(b[3:35], tid[:])
	b[35] = '-'
	putHex(b[36:52], sid[:])
	b[52] = '-'
	putHex(b[53:55], []byte{byte(sc.TraceFlags())})
}

// hexPairs[c] is c in lower-case hex, first digit in the low byte.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for c := range t {
		t[c] = uint16(digits[c>>4]) | uint16(digits[c&0xf])<<8
	}
	return t
}()

// putHex writes src in lower-case hex into dst, which is twice as long: as
// hex.Encode does, a table look-up a byte.
func putHex(dst, src []byte) {
	_ = dst[2*len(src)-1]
	for i, c := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], hexPairs[c])
	}
}

// Call is one upstream call's client span, a child of its request's
// server span.
type Call struct {
	span  trace.Span
	ended atomic.Bool // only the first End counts
}

// Upstream starts the client span of req, sent to destination dest for
// session, as a child of the request's server span, and returns req with
// the span's context in params._meta.traceparent (a copy; req is not
// changed). The client span is sampled when the server span is; an
// unsampled one records nothing, but its context is propagated all the
// same. A nil q returns req and a nil Call.
func (q *Request) Upstream(dest, session string, req *jsonrpc.Message) (*jsonrpc.Message, *Call) {
	if q == nil {
		return req, nil
	}
	// Where _meta is: found once per message (the handler has usually
	// looked for its protocol version there already).
	var meta string
	ms, me, hasMeta := req.MetaAt()
	if hasMeta {
		if raw, _, _, ok := req.LookupMeta(MetaKey); ok {
			meta, _ = jsonrpc.String(raw)
		}
	}
	var tool string
	if req.Method == "tools/call" {
		tool, _ = req.ParamName()
	}
	q.mu.Lock()
	q.server(meta)
	if tool != "" {
		q.tool = tool
	}
	u := &q.first
	if q.firstUsed {
		u = &upstreamCall{}
	}
	q.firstUsed = true
	q.mu.Unlock()

	c := &u.call
	_, c.span = q.t.tr.Start(q.ctx, req.Method, clientKind)
	if c.span.IsRecording() {
		attrs := append(make([]attribute.KeyValue, 0, 5), attribute.String(AttrMethod, req.Method),
			attribute.String(AttrDestination, dest))
		if tool != "" {
			c.span.SetName(req.Method + " " + tool)
			attrs = append(attrs, attribute.String(AttrTool, tool))
		}
		if session != "" {
			attrs = append(attrs, attribute.String(AttrSession, session))
		}
		c.span.SetAttributes(attrs...)
	}
	var tp [57]byte // the traceparent as a JSON string
	tp[0], tp[56] = '"', '"'
	putTraceparent((*[55]byte)(tp[1:56]), c.span.SpanContext())
	params, ms, me, ok := spliceMeta(req.Params, ms, me, hasMeta, quotedMetaKey, tp[:])
	if !ok {
		return req, c
	}
	u.msg = *req
	u.msg.Params = params
	u.msg.SetMetaAt(ms, me)
	return &u.msg, c
}

// upstreamCall is a Call and the copy of the request it traces, made in
// one allocation (the first of a request's in the Request's).
type upstreamCall struct {
	call Call
	msg  jsonrpc.Message
}

// End ends the client span; answer is the upstream's response, nil when
// none came (abandoned, the connection lost). Only the first End counts.
func (c *Call) End(answer *jsonrpc.Message) {
	if c == nil || !c.span.IsRecording() || !c.ended.CompareAndSwap(false, true) {
		return
	}
	switch {
	case answer == nil:
		c.span.SetStatus(codes.Error, "no response")
	case answer.Error != nil:
		if e := answer.ErrorOf(); e != nil {
			c.span.SetAttributes(attribute.String(attrRPCStatus, strconv.Itoa(e.Code)))
			c.span.SetStatus(codes.Error, e.Message)
		} else {
			c.span.SetStatus(codes.Error, "error response")
		}
	}
	c.span.End()
}

// End ends the server span with the request's audit record, written
// afterwards: its method, destination, session, id, status and error
// become attributes. Only the first End counts; a nil q does nothing.
func (q *Request) End(rec *audit.Record) {
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.ended {
		q.mu.Unlock()
		return
	}
	q.ended = true
	q.server("")
	span, tool := q.span, q.tool
	q.mu.Unlock()
	if !span.IsRecording() {
		return
	}
	// The HTTP method and path are left out (the destination and the MCP
	// method say more).
	attrs := append(make([]attribute.KeyValue, 0, 6), attribute.Int(attrHTTPStatus, rec.Status))
	switch {
	case rec.MCPMethod == "":
		span.SetName(rec.HTTPMethod)
	case tool != "":
		span.SetName(rec.MCPMethod + " " + tool)
	default:
		span.SetName(rec.MCPMethod)
	}
	if rec.MCPMethod != "" {
		attrs = append(attrs, attribute.String(AttrMethod, rec.MCPMethod))
	}
	if tool != "" {
		attrs = append(attrs, attribute.String(AttrTool, tool))
	}
	if rec.Destination != "" {
		attrs = append(attrs, attribute.String(AttrDestination, rec.Destination))
	}
	if rec.Session != "" {
		attrs = append(attrs, attribute.String(AttrSession, rec.Session))
	}
	if rec.RPCID != nil {
		attrs = append(attrs, attribute.String(AttrRequestID, string(rec.RPCID)))
	}
	span.SetAttributes(attrs...)
	if rec.Error != "" || rec.Status >= 500 {
		span.SetStatus(codes.Error, rec.Error)
	}
	span.End(trace.WithTimestamp(rec.Time.Add(rec.Latency)))
}

// quotedMetaKey is MetaKey as a JSON string.
var quotedMetaKey = jsonrpc.Quote(MetaKey)

// spliceMeta returns params with params._meta[key] set to value (key and
// value already JSON strings), params._meta's value being params[ms:me]
// when hasMeta, and absent when not; every other byte is as it was: the
// member's value is replaced if present, else the member is inserted first
// in _meta, else a _meta object is inserted first in params; empty params
// become {"_meta":{...}}. ok is false, and params returned as they are,
// when params or its _meta is not an object. params is not modified. It
// also returns where _meta's value (an object) is in the result, for
// [jsonrpc.Message.SetMetaAt].
func spliceMeta(params json.RawMessage, ms, me int, hasMeta bool, key, value []byte) (out json.RawMessage, metaStart, metaEnd int, ok bool) {
	if len(bytes.TrimSpace(params)) == 0 {
		out := make([]byte, 0, len(key)+len(value)+16)
		out = appendMember(append(out, `{"_meta":{`...), key, value)
		out = append(out, "}}"...)
		return out, len(`{"_meta":`), len(out) - 1, true
	}
	if hasMeta {
		meta := params[ms:me]
		if len(meta) == 0 || meta[0] != '{' {
			return params, 0, 0, false
		}
		if _, s, e, ok := jsonrpc.Lookup(meta, unquotedKey(key)); ok {
			out := make([]byte, 0, len(params)-(e-s)+len(value))
			out = append(out, params[:ms+s]...)
			out = append(out, value...)
			out = append(out, params[ms+e:]...)
			return out, ms, me + len(value) - (e - s), true
		}
		out, n := insertFirst(params, ms, "", key, value)
		return out, ms, me + n, true
	}
	i := 0
	for i < len(params) && (params[i] == ' ' || params[i] == '\t' || params[i] == '\n' || params[i] == '\r') {
		i++
	}
	if i == len(params) || params[i] != '{' {
		return params, 0, 0, false
	}
	out, _ = insertFirst(params, i, `"_meta":{`, key, value)
	// The _meta object inserted: from its '{' to its '}'.
	start := i + 1 + len(`"_meta":`)
	return out, start, start + 1 + len(key) + 1 + len(value) + 1, true
}

// insertFirst inserts prefix, the member key: value and, when prefix is
// not empty, a closing '}', as the first member of the object whose '{' is
// at b[open], followed by a comma unless the object was empty, and
// returns the result and how many bytes were inserted. One allocation:
// the result.
func insertFirst(b []byte, open int, prefix string, key, value []byte) ([]byte, int) {
	out := make([]byte, 0, len(b)+len(prefix)+len(key)+len(value)+8)
	out = append(out, b[:open+1]...)
	out = appendMember(append(out, prefix...), key, value)
	if prefix != "" {
		out = append(out, '}')
	}
	rest := bytes.TrimLeft(b[open+1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '}' {
		out = append(out, ',')
	}
	n := len(out) - (open + 1)
	return append(out, b[open+1:]...), n
}

// appendMember appends key:value, both JSON already.
func appendMember(dst []byte, key, value []byte) []byte {
	return append(append(append(dst, key...), ':'), value...)
}

// unquotedKey is the Go string of key, a JSON string (MetaKey is the one
// the gateway uses: returned without decoding).
func unquotedKey(key []byte) string {
	if string(key) == string(quotedMetaKey) {
		return MetaKey
	}
	s, _ := jsonrpc.String(key)
	return s
}
