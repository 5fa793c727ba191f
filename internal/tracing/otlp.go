package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The OTLP exporter's environment, as the OpenTelemetry specification
// names it (the signal's own variable wins over the general one).
const (
	envTracesEndpoint    = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envEndpoint          = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesHeaders     = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envHeaders           = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesTimeout     = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
	envTimeout           = "OTEL_EXPORTER_OTLP_TIMEOUT"
	envTracesCompression = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
	envCompression       = "OTEL_EXPORTER_OTLP_COMPRESSION"

	defaultEndpoint = "http://localhost:4318/v1/traces"
	tracesPath      = "/v1/traces"
	// defaultTimeout bounds one export (both tries), as the specification's
	// OTEL_EXPORTER_OTLP_TIMEOUT default has it.
	defaultTimeout = 10 * time.Second
	// defaultRetryDelay is the wait before the one retry when the answer
	// has no Retry-After.
	defaultRetryDelay = time.Second
	// maxErrorBody is how much of a failed export's answer an error quotes.
	maxErrorBody = 256
	// maxDrain is how much of an answer is read so the connection is reused.
	maxDrain = 64 << 10

	contentTypeProto = "application/x-protobuf"
	userAgent        = "switchboard-otlp-exporter"
)

// exporterConfig is where and how spans are sent: the endpoint's full URL,
// the headers (whose values may be credentials: never logged), the bound
// of one export and whether bodies are gzipped.
type exporterConfig struct {
	url     string
	headers http.Header
	timeout time.Duration
	gzip    bool
}

// exporterConfigFrom resolves the exporter's config from the endpoint
// option (a base URL, "" for the environment's) and getenv.
func exporterConfigFrom(endpoint string, getenv func(string) string) (exporterConfig, error) {
	cfg := exporterConfig{url: defaultEndpoint, timeout: defaultTimeout, headers: http.Header{}}
	switch {
	case endpoint != "":
		cfg.url = strings.TrimSuffix(endpoint, "/") + tracesPath
	case getenv(envTracesEndpoint) != "":
		cfg.url = getenv(envTracesEndpoint)
	case getenv(envEndpoint) != "":
		cfg.url = strings.TrimSuffix(getenv(envEndpoint), "/") + tracesPath
	}
	if u, err := url.Parse(cfg.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL's user info could hold a password: name the variable, not its value.
		return cfg, fmt.Errorf("OTLP endpoint: %s is not an http(s) URL", endpointSource(endpoint, getenv))
	}
	for _, name := range []string{envTracesHeaders, envHeaders} {
		if v := getenv(name); v != "" {
			h, err := parseHeaders(v)
			if err != nil {
				return cfg, fmt.Errorf("%s: %w", name, err)
			}
			cfg.headers = h
			break
		}
	}
	for _, name := range []string{envTracesTimeout, envTimeout} {
		if v := getenv(name); v != "" {
			ms, err := strconv.ParseUint(v, 10, 31)
			if err != nil {
				return cfg, fmt.Errorf("%s: %q is not a number of milliseconds", name, v)
			}
			if ms > 0 { // 0 leaves the bound to the caller's context
				cfg.timeout = time.Duration(ms) * time.Millisecond
			} else {
				cfg.timeout = 0
			}
			break
		}
	}
	for _, name := range []string{envTracesCompression, envCompression} {
		if v := getenv(name); v != "" {
			switch v {
			case "gzip":
				cfg.gzip = true
			case "none":
			default:
				return cfg, fmt.Errorf("%s: %q is neither gzip nor none", name, v)
			}
			break
		}
	}
	return cfg, nil
}

// endpointSource names where the endpoint came from.
func endpointSource(endpoint string, getenv func(string) string) string {
	switch {
	case endpoint != "":
		return "the configured endpoint"
	case getenv(envTracesEndpoint) != "":
		return envTracesEndpoint
	default:
		return envEndpoint
	}
}

// parseHeaders reads the OTLP headers format: comma-separated key=value
// pairs, keys and values URL-encoded, blanks around each trimmed. Errors
// name the entry by position and never quote a value.
func parseHeaders(s string) (http.Header, error) {
	h := http.Header{}
	for i, entry := range strings.Split(s, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		key, kerr := url.PathUnescape(strings.TrimSpace(k))
		if !ok || kerr != nil || key == "" || !validHeaderName(key) {
			return nil, fmt.Errorf("entry %d is not key=value with a valid header name", i+1)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil || strings.ContainsAny(val, "\r\n\x00") {
			return nil, fmt.Errorf("entry %d (%s): the value is not a valid URL-encoded header value", i+1, key)
		}
		h.Add(key, val)
	}
	return h, nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// exporter is an [sdktrace.SpanExporter] posting OTLP/HTTP protobuf
// exports. Its methods are safe for concurrent use (the batch processor
// exports one batch at a time); Shutdown may be called any number of
// times.
type exporter struct {
	cfg     exporterConfig
	client  *http.Client
	stopped context.Context // done once Shutdown is called
	stop    context.CancelFunc
}

func newExporter(cfg exporterConfig) *exporter {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2
	stopped, stop := context.WithCancel(context.Background())
	return &exporter{cfg: cfg, client: &http.Client{Transport: t}, stopped: stopped, stop: stop}
}

func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errExporterShutdown = errors.New("tracing: OTLP exporter is shut down")

// ExportSpans sends spans as one OTLP export, within ctx and the
// configured timeout, retrying once when the collector answers 429, 502,
// 503 or 504 (after its Retry-After, if that fits in ctx).
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Err() != nil {
		return errExporterShutdown
	}
	rss := resourceSpans(spans)
	if len(rss) == 0 {
		return nil
	}
	body, err := encodeExport(nil, rss)
	if err != nil {
		return fmt.Errorf("tracing: OTLP export: %w", err)
	}
	if e.cfg.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	if e.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.timeout)
		defer cancel()
	}
	// Shutdown cancels an export in flight.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stopped, cancel)()

	delay, err := e.post(ctx, body)
	if delay < 0 {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
		return fmt.Errorf("%w (Retry-After %v is past the export's deadline)", err, delay)
	}
	if werr := waitCtx(ctx, delay); werr != nil {
		return fmt.Errorf("%w (retry abandoned: %v)", err, werr)
	}
	_, err = e.post(ctx, body)
	return err
}

// post sends one export. A retryable failure returns its error and the
// delay before the retry; any other outcome a negative delay.
func (e *exporter) post(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("tracing: OTLP export: %w", err)
	}
	for k, v := range e.cfg.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentTypeProto)
	req.Header.Set("User-Agent", userAgent)
	if e.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// Quote the URL without its user info or query (the client's
		// *url.Error keeps the query).
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return -1, fmt.Errorf("tracing: OTLP export to %s: %w", redactURL(e.cfg.url), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		// The answer's partial_success is not read: nothing here acts on it.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return -1, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	err = fmt.Errorf("tracing: OTLP export to %s: %s: %s", redactURL(e.cfg.url), resp.Status, clip(msg))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After"), time.Now()), err
	}
	return -1, err
}

// retryAfter is the wait a Retry-After value asks for (seconds or an
// HTTP date), defaultRetryDelay when it says nothing usable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return defaultRetryDelay
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		if s > int64(math.MaxInt64/time.Second) {
			return math.MaxInt64
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return defaultRetryDelay
}

// clip renders an answer's body for an error: at most maxErrorBody
// bytes, invalid UTF-8 replaced, blanks trimmed, "(empty)" when there is
// none.
func clip(b []byte) string {
	cut := len(b) > maxErrorBody
	if cut {
		b = b[:maxErrorBody]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if s == "" {
		return "(empty)"
	}
	if cut {
		s += "…"
	}
	return s
}

// redactURL is u without its user info or query, for errors.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(endpoint)"
	}
	p.User, p.RawQuery, p.ForceQuery = nil, "", false
	return p.String()
}

// Shutdown stops the exporter: later exports fail and one in flight is
// cancelled. Safe to call any number of times, from any goroutine.
func (e *exporter) Shutdown(ctx context.Context) error {
	e.stop()
	e.client.CloseIdleConnections()
	return ctx.Err()
}

// encodeExport appends to b the ExportTraceServiceRequest holding rss:
// field 1, ResourceSpans, repeated and length-delimited. (The collector
// package that declares the message also declares its gRPC service and
// would bring in all of gRPC; its one field is written here instead.)
func encodeExport(b []byte, rss []*tracepb.ResourceSpans) ([]byte, error) {
	opts := proto.MarshalOptions{UseCachedSize: true}
	for _, rs := range rss {
		n := opts.Size(rs)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		var err error
		if b, err = opts.MarshalAppend(b, rs); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// resourceSpans converts spans to OTLP, grouped by resource and then by
// instrumentation scope, each group in the order its first span came.
func resourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	c := newConverter(spans)
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		res := sd.Resource()
		rk := res.Equivalent()
		rs, ok := byRes[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: c.resource(res), SchemaUrl: res.SchemaURL()}
			byRes[rk] = rs
			out = append(out, rs)
		}
		scope := sd.InstrumentationScope()
		sk := scopeKey{rk, scope}
		ss, ok := byScope[sk]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: c.scope(scope), SchemaUrl: scope.SchemaURL}
			byScope[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, c.span(sd))
	}
	return out
}

// converter converts one batch, taking the many small messages of its
// spans and their attributes from chunks: a few allocations per batch
// rather than about twenty per span.
type converter struct {
	spans    chunk[tracepb.Span]
	statuses chunk[tracepb.Status]
	kvs      chunk[commonpb.KeyValue]
	anys     chunk[commonpb.AnyValue]
	strs     chunk[commonpb.AnyValue_StringValue]
	ints     chunk[commonpb.AnyValue_IntValue]
	bools    chunk[commonpb.AnyValue_BoolValue]
	doubles  chunk[commonpb.AnyValue_DoubleValue]
	kvPtrs   slices[*commonpb.KeyValue]
	ids      slices[byte]
}

// newConverter sizes the chunks of spans, statuses, ids and attributes for
// spans, so that the batch takes one allocation of each.
func newConverter(spans []sdktrace.ReadOnlySpan) *converter {
	var n, attrs int
	for _, sd := range spans {
		if sd != nil {
			n++
			attrs += len(sd.Attributes())
		}
	}
	c := &converter{}
	c.spans.free = make([]tracepb.Span, n)
	c.statuses.free = make([]tracepb.Status, n)
	c.ids.free = make([]byte, n*(16+8+8))
	c.kvs.free = make([]commonpb.KeyValue, attrs)
	c.anys.free = make([]commonpb.AnyValue, attrs)
	c.kvPtrs.free = make([]*commonpb.KeyValue, attrs)
	return c
}

// chunkLen is how many values a chunk allocates at once when it has none
// left.
const chunkLen = 128

// chunk hands out pointers to zero values of T, allocated chunkLen at a
// time. A chunk's values live as long as any of them is referenced.
type chunk[T any] struct{ free []T }

func (c *chunk[T]) new() *T {
	if len(c.free) == 0 {
		c.free = make([]T, chunkLen)
	}
	p := &c.free[0]
	c.free = c.free[1:]
	return p
}

// slices hands out slices of T (capacity capped at their length) cut from
// larger allocations.
type slices[T any] struct{ free []T }

func (c *slices[T]) take(n int) []T {
	if len(c.free) < n {
		c.free = make([]T, max(n, 8*chunkLen))
	}
	s := c.free[:n:n]
	c.free = c.free[n:]
	return s
}

// id copies an id into the batch's id bytes.
func (c *converter) id(b []byte) []byte {
	out := c.ids.take(len(b))
	copy(out, b)
	return out
}

func (c *converter) resource(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	return &resourcepb.Resource{Attributes: c.iterKV(r.Iter())}
}

func (c *converter) scope(s instrumentation.Scope) *commonpb.InstrumentationScope {
	if s == (instrumentation.Scope{}) {
		return nil
	}
	return &commonpb.InstrumentationScope{Name: s.Name, Version: s.Version, Attributes: c.iterKV(s.Attributes.Iter())}
}

func (c *converter) span(sd sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := sd.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	st := c.statuses.new()
	st.Code, st.Message = statusCode(sd.Status().Code), sd.Status().Description
	s := c.spans.new()
	s.TraceId = c.id(tid[:])
	s.SpanId = c.id(sid[:])
	s.TraceState = sc.TraceState().String()
	s.Flags = spanFlags(sc.TraceFlags(), sd.Parent().IsRemote())
	s.Name = sd.Name()
	s.Kind = spanKind(sd.SpanKind())
	s.StartTimeUnixNano = unixNano(sd.StartTime())
	s.EndTimeUnixNano = unixNano(sd.EndTime())
	s.Attributes = c.keyValues(sd.Attributes())
	s.DroppedAttributesCount = clampUint32(sd.DroppedAttributes())
	s.DroppedEventsCount = clampUint32(sd.DroppedEvents())
	s.DroppedLinksCount = clampUint32(sd.DroppedLinks())
	s.Status = st
	if psid := sd.Parent().SpanID(); psid.IsValid() {
		s.ParentSpanId = c.id(psid[:])
	}
	if evs := sd.Events(); len(evs) > 0 {
		s.Events = make([]*tracepb.Span_Event, len(evs))
		for i, ev := range evs {
			s.Events[i] = &tracepb.Span_Event{Name: ev.Name, TimeUnixNano: unixNano(ev.Time),
				Attributes: c.keyValues(ev.Attributes), DroppedAttributesCount: clampUint32(ev.DroppedAttributeCount)}
		}
	}
	if ls := sd.Links(); len(ls) > 0 {
		s.Links = make([]*tracepb.Span_Link, len(ls))
		for i, l := range ls {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			s.Links[i] = &tracepb.Span_Link{TraceId: c.id(ltid[:]), SpanId: c.id(lsid[:]), TraceState: l.SpanContext.TraceState().String(),
				Attributes: c.keyValues(l.Attributes), DroppedAttributesCount: clampUint32(l.DroppedAttributeCount),
				Flags: spanFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote())}
		}
	}
	return s
}

// spanFlags are the W3C trace flags in the low byte, with the bit saying
// whether the parent (or linked span) is remote, and the bit saying that
// is known.
func spanFlags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if remote {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func statusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }

func clampUint32(n int) uint32 {
	return uint32(min(max(int64(n), 0), math.MaxUint32)) // int64: int is 32 bits on arm
}

func (c *converter) iterKV(it attribute.Iterator) []*commonpb.KeyValue {
	if it.Len() == 0 {
		return nil
	}
	out := c.kvPtrs.take(it.Len())
	for i := 0; it.Next(); i++ {
		out[i] = c.keyValue(it.Attribute())
	}
	return out
}

func (c *converter) keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := c.kvPtrs.take(len(kvs))
	for i, kv := range kvs {
		out[i] = c.keyValue(kv)
	}
	return out
}

func (c *converter) keyValue(kv attribute.KeyValue) *commonpb.KeyValue {
	p := c.kvs.new()
	p.Key, p.Value = string(kv.Key), c.anyValue(kv.Value)
	return p
}

// anyValue converts v, every attribute.Type: slices become ArrayValues,
// maps KeyValueLists, EMPTY an AnyValue with nothing set.
func (c *converter) anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return c.boolAny(v.AsBool())
	case attribute.INT64:
		return c.intAny(v.AsInt64())
	case attribute.FLOAT64:
		return c.doubleAny(v.AsFloat64())
	case attribute.STRING:
		return c.stringAny(v.AsString())
	case attribute.BOOLSLICE:
		return c.array(convertAll(v.AsBoolSlice(), c.boolAny))
	case attribute.INT64SLICE:
		return c.array(convertAll(v.AsInt64Slice(), c.intAny))
	case attribute.FLOAT64SLICE:
		return c.array(convertAll(v.AsFloat64Slice(), c.doubleAny))
	case attribute.STRINGSLICE:
		return c.array(convertAll(v.AsStringSlice(), c.stringAny))
	case attribute.SLICE:
		return c.array(convertAll(v.AsSlice(), c.anyValue))
	}
	a := c.anys.new()
	switch v.Type() {
	case attribute.BYTESLICE:
		a.Value = &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}
	case attribute.MAP:
		a.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: c.keyValues(v.AsMap())}}
	case attribute.EMPTY:
	default:
		return c.stringAny("INVALID")
	}
	return a
}

func (c *converter) boolAny(b bool) *commonpb.AnyValue {
	a, w := c.anys.new(), c.bools.new()
	w.BoolValue, a.Value = b, w
	return a
}

func (c *converter) intAny(n int64) *commonpb.AnyValue {
	a, w := c.anys.new(), c.ints.new()
	w.IntValue, a.Value = n, w
	return a
}

func (c *converter) doubleAny(f float64) *commonpb.AnyValue {
	a, w := c.anys.new(), c.doubles.new()
	w.DoubleValue, a.Value = f, w
	return a
}

func (c *converter) stringAny(s string) *commonpb.AnyValue {
	a, w := c.anys.new(), c.strs.new()
	w.StringValue, a.Value = s, w
	return a
}

func (c *converter) array(vs []*commonpb.AnyValue) *commonpb.AnyValue {
	a := c.anys.new()
	a.Value = &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}
	return a
}

func convertAll[T any](vs []T, conv func(T) *commonpb.AnyValue) []*commonpb.AnyValue {
	out := make([]*commonpb.AnyValue, len(vs))
	for i, v := range vs {
		out[i] = conv(v)
	}
	return out
}

// newExporterFromEnv is the exporter New builds: opts' endpoint, else the
// process environment's.
func newExporterFromEnv(endpoint string) (*exporter, error) {
	cfg, err := exporterConfigFrom(endpoint, os.Getenv)
	if err != nil {
		return nil, err
	}
	return newExporter(cfg), nil
}
