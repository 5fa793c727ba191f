// Package tracing provides Switchboard's OpenTelemetry traces: a server
// span per MCP request and a client span per upstream call, sampled by
// the official Go SDK's sampler (ParentBased(TraceIDRatioBased)), with
// the W3C trace context read by its propagator and the resource built by
// its resource package; the spans themselves are recorded by this package
// (see "Why spans of its own"), batched by its span processor and
// exported over OTLP/HTTP (protobuf) by its own exporter.
//
// The W3C trace context comes from the request's traceparent header or,
// when that is absent, from params._meta.traceparent (as MCP's tracing
// proposal has it). Each upstream call carries its client span's context
// on in params._meta.traceparent (see [SetMeta]); HTTP connections copy
// that into their traceparent header.
//
// A nil *Tracer is tracing off: [Tracer.Start] returns a nil *Request and
// every method of a nil *Request or *Call does nothing, so the callers'
// hot path is one nil check.
//
// # Why an exporter of its own
//
// The SDK's otlptracehttp exporter imports, through its config package and
// the collector's generated service (go.opentelemetry.io/proto/otlp/
// collector/trace/v1), all of google.golang.org/grpc and grpc-gateway.
// Every Switchboard process paid for that, tracing on or off (it is off by
// default). Measured on 2026-11-25 (linux/amd64, go1.26.8, plain go build
// of ./cmd/switchboard; VmRSS of switchboard serve with one stdio
// destination, idle 3 s after one tools/call, median of 5 runs):
//
//	                      otlptracehttp   this exporter
//	binary                30.1 MB         21.6 MB   (-8.5 MB, -28%)
//	VmRSS, tracing off    20.4 MiB        17.0 MiB  (-3.5 MiB)
//	VmRSS, tracing on     20.6 MiB        17.0 MiB  (-3.5 MiB)
//
// The exporter writes OTLP's protobuf with protowire (encode.go): no
// generated message is built and no reflection runs; the generated types
// serve only the tests, which decode every field with the collector's
// types and compare the bytes with what their Marshal writes. It and the
// span processor (processor.go) are also an [sdktrace.SpanExporter] and
// an [sdktrace.SpanProcessor] for the SDK's own spans, whose encoding
// (appendSpan) is the reference the package's spans are tested against.
//
// # Why spans of its own
//
// With the SDK's tracer making the spans, tracing every call cost +45% of
// the gateway's instructions per call (cachegrind, GOMAXPROCS=1, 64 B echo
// over one stdio destination, one call in flight, difference of an 11000-
// and a 1000-call run, export to a loopback sink; 161.8k against 111.3k
// off), against the +10% the issue aims at. Per call, by function
// (cg_diff of the traced and the untraced run, at 993fd4b): the SDK's
// span work (Start, SetAttributes and their normalisation, the
// ReadOnlySpan snapshot at End, the context of each span) was 10.7k
// instructions in the SDK's and the API's functions and 2.7k more in the
// runtime's map code (the attributes' de-duplication when the span is
// read), and 2.4 KB of the 5.2 KB tracing added to a call's allocations
// (two recordingSpans, two snapshots, two attribute slices; memory
// profile of BenchmarkEcho/c1), whose garbage collection was about as
// much again: more than the whole budget before a byte was encoded. None
// of that is needed to export two spans whose attributes are known when
// they end, so the package records them itself: a [Request] (one
// allocation, with the first upstream call's [Call] and its request copy
// in it) holds the server span's context, decided by the SDK's sampler
// from the parent the SDK's propagator extracted, and ids drawn as the
// SDK's default IDGenerator draws them (math/rand/v2); each span is built
// on the stack as it ends (spanRecord) and encoded straight into the
// batch (appendRecord), byte for byte as appendSpan encodes an SDK span
// with the same data (TestRecordEncoding). Client spans follow their
// server span's sampled flag, as ParentBased does for a local parent; the
// sampler's result attributes (ParentBased and TraceIDRatioBased return
// none) are not recorded.
//
// # Cost per traced call
//
// Instructions per call as above, each step measured the same way (±1k
// between runs) on top of 27afa3d (the hashes are the steps' commits as
// rebased onto 2783032 later), and BenchmarkEcho/c1 allocations (obs=on:
// 40 and 5.0 KB):
//
//	tracing off                                    111.3k
//	SDK spans (27afa3d)                            161.8k   60 allocs, 10.2 KB
//	+ the traced copy's _meta position kept (no
//	  second walk of its params), export buffer
//	  reused (993fd4b)                             159.0k
//	+ spans of its own (26dae63)                   126.4k
//	+ _meta found through the message's cached
//	  position, traceparent hex by table, the
//	  trace in the gateway's request context
//	  (RequestKey) (3a6b0cb)                       126.1k
//	+ Request in a smaller size class, short
//	  attributes in three appends (2d57aed)        125.1k
//	+ batches exported in place (bcb95e6)          123.0k   45 allocs, 6.1 KB
//
// So +10% where it was +45%. Rebased on 2783032 (whose other changes took
// about 1.5k off every call): 109.8k off, 121.9k traced (+11%). What is left: about 2k encoding the two spans,
// 2k starting and ending them (ids, sampler, times, the span records), 1k
// splicing the traceparent into the params copy, and the garbage
// collection of the Request (480 bytes) and the params copy, with the
// batches' buffers (two of about 150 KB live) bringing the collections
// closer together at the runtime's 4 MB minimum heap.
//
// # Batching
//
// Sampled spans are exported in batches of 512, or every 5 s whatever
// there is; at most three full batches wait for the exporter besides the
// one filling (2048 spans, the SDK batcher's defaults; the OTEL_BSP_*
// variables are not read). A batch that fills while three wait is dropped,
// its count reported through otel.Handle. Flush exports everything ended
// so far; Shutdown exports what is left, then ends the processor's
// goroutine and the exporter. A batch is its spans' bytes: the export's
// envelope is written around them in place, and the batch takes spans
// again once the HTTP transport has closed the body it read from it.
//
// # Exporter contract
//
// Spans are POSTed as application/x-protobuf to [Options].Endpoint +
// "/v1/traces", or, when that is "", to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// (a full URL, used as it is), else OTEL_EXPORTER_OTLP_ENDPOINT +
// "/v1/traces", else http://localhost:4318/v1/traces. Also read, the
// traces variable winning over the general one:
// OTEL_EXPORTER_OTLP_{TRACES_,}HEADERS (comma-separated key=value,
// URL-decoded; values are credentials and appear in no log or error),
// OTEL_EXPORTER_OTLP_{TRACES_,}TIMEOUT (milliseconds, default 10000, 0 for
// none) and OTEL_EXPORTER_OTLP_{TRACES_,}COMPRESSION (gzip or none). A
// malformed value fails [New], naming the variable. TLS uses the system's
// roots (the CERTIFICATE variables are not read); the protocol is always
// http/protobuf.
//
// One export is bounded by the caller's context and the timeout. A non-2xx
// answer is an error naming the status and quoting the body, clipped to
// 256 bytes; 429, 502, 503 and 504 are retried once, after the answer's
// Retry-After (seconds or a date; 1 s without one) when that fits within
// the deadline. A 2xx answer's partial_success is not read. Shutdown stops
// the exporter (an export in flight is cancelled, later ones fail) and may
// be called any number of times.
package tracing

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
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
)

// MetaKey is the params._meta member that carries the trace context.
const MetaKey = "traceparent"

// Options configures a [Tracer]. The zero value exports to the
// environment's endpoint (see the package doc; else
// http://localhost:4318/v1/traces) and samples nothing it starts itself.
type Options struct {
	// Endpoint is the OTLP/HTTP base URL; spans go to its /v1/traces. ""
	// leaves it to the environment: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
	// else OTEL_EXPORTER_OTLP_ENDPOINT (see the package doc).
	Endpoint string
	// SampleRatio is the share of root traces recorded, 0 to 1; a parent's
	// sampled flag is followed whatever it is.
	SampleRatio float64
	// ServiceName and ServiceVersion are the resource's service.name and
	// service.version ("" omits them).
	ServiceName, ServiceVersion string
}

// Tracer makes the spans of one gateway. It owns the span processor's
// goroutine and the exporter, which Shutdown ends.
type Tracer struct {
	sampler sdktrace.Sampler
	proc    *processor
	prop    propagation.TraceContext
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
	return newTracer(newProcessor(exp), resource.NewSchemaless(attrs...), opts.SampleRatio), nil
}

// newTracer is a Tracer whose spans, of resource res, go to p.
func newTracer(p *processor, res *resource.Resource, ratio float64) *Tracer {
	p.res, p.scope = res, instrumentation.Scope{Name: scopeName}
	return &Tracer{sampler: sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), proc: p}
}

// Flush exports every span ended so far, within ctx.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.proc.ForceFlush(ctx)
}

// Shutdown exports what is left and stops the exporter, within ctx. Spans
// ended afterwards are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.proc.Shutdown(ctx)
}

// Request is the trace of one HTTP request: its server span, whose
// context (ids, sampling) is decided when its parent is known (at the
// first upstream call, whose params may carry one, or when the request
// ends), with the request's arrival as its start. Safe for concurrent use
// (an aggregated list calls several servers at once).
type Request struct {
	t      *Tracer
	start  int64 // the request's arrival, Unix nanoseconds
	header http.Header

	mu   sync.Mutex
	tool string // guarded by mu: the tool of a tools/call
	// sc is the server span's context, parent its parent's span id
	// (invalid for a root) and remote whether that parent is remote; set
	// once under mu by server, before any Call exists, and read-only
	// afterwards (Calls read sc without mu).
	sc     trace.SpanContext
	parent trace.SpanID
	first  upstreamCall // the first upstream call's, made with the Request

	// The flags, together (the Request fits a smaller size class).
	remote    bool
	decided   bool // guarded by mu: sc, parent and remote are set
	ended     bool // guarded by mu
	firstUsed bool // guarded by mu
}

// Start begins the trace of r, arrived at start. A nil Tracer returns nil.
func (t *Tracer) Start(r *http.Request, start time.Time) *Request {
	if t == nil {
		return nil
	}
	return &Request{t: t, start: start.UnixNano(), header: r.Header}
}

// RequestKey is the context key under which a request's *Request is
// found. [NewContext] is the plain way to attach one; a caller that builds
// its own context type per request (the gateway's, which carries the audit
// record) answers Value(RequestKey{}) with the *Request, saving the
// allocation.
type RequestKey struct{}

// NewContext returns ctx carrying q.
func NewContext(ctx context.Context, q *Request) context.Context {
	return context.WithValue(ctx, RequestKey{}, q)
}

// FromContext returns the Request of ctx, or nil.
func FromContext(ctx context.Context) *Request {
	q, _ := ctx.Value(RequestKey{}).(*Request)
	return q
}

// serverSpanName is the name the sampler is asked about: the server
// span's own is known when it ends.
const serverSpanName = "mcp"

// server decides the server span's context if it is not decided: its
// parent taken from the traceparent header or else from meta (a
// traceparent value, or ""), a new span id, the trace id of the parent or
// a new one, and the sampled flag as the SDK's sampler decides it.
// Callers hold q.mu.
func (q *Request) server(meta string) {
	if q.decided {
		return
	}
	q.decided = true
	ctx := context.Background()
	// The canonical key, as net/http stores received headers: looked up
	// without canonicalising it again.
	if v := q.header["Traceparent"]; len(v) > 0 && v[0] != "" {
		ctx = q.t.prop.Extract(ctx, propagation.HeaderCarrier(q.header))
	} else if meta != "" {
		ctx = q.t.prop.Extract(ctx, metaCarrier(meta))
	}
	psc := trace.SpanContextFromContext(ctx)
	q.parent, q.remote = psc.SpanID(), psc.IsRemote()
	tid := psc.TraceID()
	if !tid.IsValid() {
		tid = newTraceID()
	}
	res := q.t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid,
		Name: serverSpanName, Kind: trace.SpanKindServer})
	flags := psc.TraceFlags() &^ trace.FlagsSampled
	if res.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	q.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceFlags: flags,
		TraceState: res.Tracestate})
}

// newTraceID and newSpanID are random non-zero ids, drawn as the SDK's
// default IDGenerator draws them (math/rand/v2).
func newTraceID() trace.TraceID {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid
}

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
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

// traceparent renders sc as a W3C traceparent value.
func traceparent(sc trace.SpanContext) string {
	var b [55]byte
	putTraceparent(&b, sc)
	return string(b[:])
}

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

// Call is one upstream call's client span: a child of q's server span,
// whose trace id, flags and trace state it shares.
type Call struct {
	q     *Request
	sid   trace.SpanID
	start time.Time
	// The span's name ("{method} {tool}") and attributes.
	method, tool, dest, session string
	ended                       atomic.Bool
}

// Upstream starts the client span of req, sent to destination dest for
// session, as a child of the request's server span, and returns req with
// the span's context in params._meta.traceparent (a copy; req is not
// changed). The client span is sampled when the server span is (the
// sampler is ParentBased: a local parent's decision is followed); an
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
	c.q, c.sid, c.start = q, newSpanID(), time.Now()
	c.method, c.tool, c.dest, c.session = req.Method, tool, dest, session
	var tp [57]byte // the traceparent as a JSON string
	tp[0], tp[56] = '"', '"'
	putTraceparent((*[55]byte)(tp[1:56]), q.sc.WithSpanID(c.sid))
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

// mayHaveMeta reports whether params may have a _meta member: false only
// when its quoted key appears nowhere and no backslash does (an escaped
// key is the same key). Both searches are vectorised, so params without
// _meta (most of them) are not walked.
func mayHaveMeta(params []byte) bool {
	return bytes.Contains(params, []byte(`"_meta"`)) || bytes.IndexByte(params, '\\') >= 0
}

// End ends the client span; answer is the upstream's response, nil when
// none came (abandoned, the connection lost). Only the first End counts.
func (c *Call) End(answer *jsonrpc.Message) {
	if c == nil || !c.q.sc.IsSampled() || !c.ended.CompareAndSwap(false, true) {
		return
	}
	s := spanRecord{sc: c.q.sc.WithSpanID(c.sid), parent: c.q.sc.SpanID(), method: c.method, tool: c.tool,
		kind: trace.SpanKindClient, start: c.start, end: c.start.Add(time.Since(c.start))}
	s.addString(keyMethod, c.method)
	s.addString(keyDestination, c.dest)
	if c.tool != "" {
		s.addString(keyTool, c.tool)
	}
	if c.session != "" {
		s.addString(keySession, c.session)
	}
	switch {
	case answer == nil:
		s.status, s.statusMsg = codes.Error, "no response"
	case answer.Error != nil:
		if e := answer.ErrorOf(); e != nil {
			s.addString(keyRPCStatus, strconv.Itoa(e.Code))
			s.status, s.statusMsg = codes.Error, e.Message
		} else {
			s.status, s.statusMsg = codes.Error, "error response"
		}
	}
	c.q.t.proc.addRecord(&s)
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
	if !q.sc.IsSampled() {
		q.mu.Unlock()
		return
	}
	s := spanRecord{sc: q.sc, parent: q.parent, remote: q.remote, kind: trace.SpanKindServer,
		start: time.Unix(0, q.start), end: rec.Time.Add(rec.Latency)}
	tool := q.tool
	q.mu.Unlock()
	// The HTTP method and path are left out (the destination and the MCP
	// method say more).
	s.addInt(keyHTTPStatus, int64(rec.Status))
	if rec.MCPMethod != "" {
		s.addString(keyMethod, rec.MCPMethod)
		s.method, s.tool = rec.MCPMethod, tool
	} else {
		s.method = rec.HTTPMethod
	}
	if tool != "" {
		s.addString(keyTool, tool)
	}
	if rec.Destination != "" {
		s.addString(keyDestination, rec.Destination)
	}
	if rec.Session != "" {
		s.addString(keySession, rec.Session)
	}
	if rec.RPCID != nil {
		// Not kept past this call: encoded into the batch by addRecord.
		s.addString(keyRequestID, unsafe.String(unsafe.SliceData(rec.RPCID), len(rec.RPCID)))
	}
	if rec.Error != "" || rec.Status >= 500 {
		s.status, s.statusMsg = codes.Error, rec.Error
	}
	q.t.proc.addRecord(&s)
}

// SetMeta returns params with params._meta[key] set to the string value,
// every other byte as it was: the member's value is replaced if present,
// else the member is inserted first in _meta, else a _meta object is
// inserted first in params; empty params become {"_meta":{...}}. ok is
// false, and params returned as they are, when params or its _meta is not
// an object. params is not modified.
func SetMeta(params json.RawMessage, key, value string) (json.RawMessage, bool) {
	out, _, _, ok := setMeta(params, appendQuoted(nil, key), appendQuoted(nil, value))
	return out, ok
}

// quotedMetaKey is MetaKey as a JSON string.
var quotedMetaKey = appendQuoted(nil, MetaKey)

// setMeta is SetMeta with the key and value already JSON strings. It
// also returns where _meta's value (an object) is in the result, for
// [jsonrpc.Message.SetMetaAt].
func setMeta(params json.RawMessage, key, value []byte) (out json.RawMessage, metaStart, metaEnd int, ok bool) {
	ms, me, hasMeta := 0, 0, false
	if mayHaveMeta(params) {
		_, ms, me, hasMeta = jsonrpc.Lookup(params, "_meta")
	}
	return spliceMeta(params, ms, me, hasMeta, key, value)
}

// spliceMeta is setMeta with params._meta's value known to be
// params[ms:me] when hasMeta, and known to be absent when not.
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

// appendQuoted appends s as a JSON string: as it is between quotes when it
// needs no escape (a traceparent never does), else as jsonrpc.Quote
// writes it.
func appendQuoted(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return append(dst, jsonrpc.Quote(s)...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
