package tracing

import (
	"encoding/binary"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP protobuf encoding, written with protowire straight from the
// SDK's spans: no generated messages are built, no reflection runs, and a
// span costs no allocation once the batch's buffer has grown. Field
// numbers are those of opentelemetry-proto's trace/v1, common/v1,
// resource/v1 and collector/trace/v1 (the tests decode the output with the
// generated types of go.opentelemetry.io/proto/otlp and compare every
// field, and the bytes with what their Marshal writes). Fields are written
// in field-number order and proto3 defaults (0, "", empty) are left out,
// as the generated Marshal does.

// Field numbers.
const (
	fExportResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fRSResource   = 1 // ResourceSpans
	fRSScopeSpans = 2
	fRSSchemaURL  = 3

	fResourceAttributes = 1 // Resource

	fSSScope     = 1 // ScopeSpans
	fSSSpans     = 2
	fSSSchemaURL = 3

	fScopeName       = 1 // InstrumentationScope
	fScopeVersion    = 2
	fScopeAttributes = 3

	fSpanTraceID           = 1 // Span
	fSpanSpanID            = 2
	fSpanTraceState        = 3
	fSpanParentSpanID      = 4
	fSpanName              = 5
	fSpanKind              = 6
	fSpanStart             = 7
	fSpanEnd               = 8
	fSpanAttributes        = 9
	fSpanDroppedAttributes = 10
	fSpanEvents            = 11
	fSpanDroppedEvents     = 12
	fSpanLinks             = 13
	fSpanDroppedLinks      = 14
	fSpanStatus            = 15
	fSpanFlags             = 16

	fEventTime              = 1 // Span.Event
	fEventName              = 2
	fEventAttributes        = 3
	fEventDroppedAttributes = 4

	fLinkTraceID           = 1 // Span.Link
	fLinkSpanID            = 2
	fLinkTraceState        = 3
	fLinkAttributes        = 4
	fLinkDroppedAttributes = 5
	fLinkFlags             = 6

	fStatusMessage = 2 // Status
	fStatusCode    = 3

	fKVKey   = 1 // KeyValue
	fKVValue = 2

	fAnyString = 1 // AnyValue (a oneof)
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fListValues = 1 // ArrayValue.values and KeyValueList.values
)

// Enum values and flag bits (trace.proto).
const (
	statusUnset = 0
	statusOk    = 1
	statusError = 2

	flagContextHasIsRemote = 0x100
	flagContextIsRemote    = 0x200
)

// beginMessage appends the tag of the length-delimited field num and one
// byte for its length, and returns where the message's bytes start; the
// message is appended next and endMessage sets its length.
func beginMessage(b []byte, num protowire.Number) ([]byte, int) {
	b = appendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

// endMessage writes the length of the message that started at start (see
// beginMessage), moving its bytes on when the length takes more than the
// one byte kept for it (a message of 128 bytes or more: a span, a batch).
func endMessage(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	extra := protowire.SizeVarint(uint64(n)) - 1
	for range extra {
		b = append(b, 0)
	}
	copy(b[start+extra:], b[start:start+n])
	protowire.AppendVarint(b[:start-1], uint64(n))
	return b
}

// appendTag appends the tag of field num, a number under 16 (every field
// here but Span.flags, whose tag is flagsTag): one byte.
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return append(b, byte(uint64(num)<<3|uint64(typ)))
}

// flagsTag is the tag of Span.flags, field 16, fixed32: two bytes.
var flagsTag = protowire.AppendTag(nil, fSpanFlags, protowire.Fixed32Type)

// appendVarint appends v, a byte when it is under 128.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// appendString appends s, length-prefixed.
func appendString[T ~string | ~[]byte](b []byte, s T) []byte {
	return append(appendVarint(b, uint64(len(s))), s...)
}

// appendBytesField appends v as field num, unless it is empty.
func appendBytesField[T ~string | ~[]byte](b []byte, num protowire.Number, v T) []byte {
	if len(v) == 0 {
		return b
	}
	return appendString(appendTag(b, num, protowire.BytesType), v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendVarint(appendTag(b, num, protowire.VarintType), v)
}

func appendFixed64Field(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(appendTag(b, num, protowire.Fixed64Type), v)
}

func appendFixed32Field(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(appendTag(b, num, protowire.Fixed32Type), v)
}

// appendSpan appends sd as a Span, field num of the enclosing message.
func appendSpan(b []byte, num protowire.Number, sd sdktrace.ReadOnlySpan) []byte {
	b, start := beginMessage(b, num)
	sc := sd.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytesField(b, fSpanTraceID, tid[:])
	b = appendBytesField(b, fSpanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendBytesField(b, fSpanTraceState, ts.String())
	}
	parent := sd.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytesField(b, fSpanParentSpanID, psid[:])
	}
	b = appendBytesField(b, fSpanName, sd.Name())
	b = appendVarintField(b, fSpanKind, spanKind(sd.SpanKind()))
	b = appendFixed64Field(b, fSpanStart, unixNano(sd.StartTime()))
	b = appendFixed64Field(b, fSpanEnd, unixNano(sd.EndTime()))
	b = appendKeyValues(b, fSpanAttributes, sd.Attributes())
	b = appendVarintField(b, fSpanDroppedAttributes, uint64(clampUint32(sd.DroppedAttributes())))
	for _, ev := range sd.Events() {
		var es int
		b, es = beginMessage(b, fSpanEvents)
		b = appendFixed64Field(b, fEventTime, unixNano(ev.Time))
		b = appendBytesField(b, fEventName, ev.Name)
		b = appendKeyValues(b, fEventAttributes, ev.Attributes)
		b = appendVarintField(b, fEventDroppedAttributes, uint64(clampUint32(ev.DroppedAttributeCount)))
		b = endMessage(b, es)
	}
	b = appendVarintField(b, fSpanDroppedEvents, uint64(clampUint32(sd.DroppedEvents())))
	for _, l := range sd.Links() {
		var ls int
		b, ls = beginMessage(b, fSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytesField(b, fLinkTraceID, ltid[:])
		b = appendBytesField(b, fLinkSpanID, lsid[:])
		if ts := l.SpanContext.TraceState(); ts.Len() > 0 {
			b = appendBytesField(b, fLinkTraceState, ts.String())
		}
		b = appendKeyValues(b, fLinkAttributes, l.Attributes)
		b = appendVarintField(b, fLinkDroppedAttributes, uint64(clampUint32(l.DroppedAttributeCount)))
		b = appendFixed32Field(b, fLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
		b = endMessage(b, ls)
	}
	b = appendVarintField(b, fSpanDroppedLinks, uint64(clampUint32(sd.DroppedLinks())))
	// The status is always present (the generated exporters write it even
	// when unset).
	st := sd.Status()
	var ss int
	b, ss = beginMessage(b, fSpanStatus)
	b = appendBytesField(b, fStatusMessage, st.Description)
	b = appendVarintField(b, fStatusCode, statusCode(st.Code))
	b = endMessage(b, ss)
	// Never 0: the "has is_remote" bit is always set.
	b = protowire.AppendFixed32(append(b, flagsTag...), spanFlags(sc.TraceFlags(), parent.IsRemote()))
	return endMessage(b, start)
}

// spanFlags are the W3C trace flags in the low byte, with the bit saying
// whether the parent (or linked span) is remote, and the bit saying that
// is known.
func spanFlags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | flagContextHasIsRemote
	if remote {
		f |= flagContextIsRemote
	}
	return f
}

// spanKind is k as trace.proto numbers it: as the trace package does,
// from unspecified (0) to consumer (5).
func spanKind(k trace.SpanKind) uint64 {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return 0
	}
	return uint64(k)
}

func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return statusOk
	case codes.Error:
		return statusError
	}
	return statusUnset
}

func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }

func clampUint32(n int) uint32 {
	return uint32(min(max(int64(n), 0), math.MaxUint32)) // int64: int is 32 bits on arm
}

// appendKeyValues appends each of kvs as a KeyValue, field num.
func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendKeyValue(b, num, kv.Key, kv.Value)
	}
	return b
}

// appendKeyValue appends key and v as a KeyValue, field num.
func appendKeyValue(b []byte, num protowire.Number, key attribute.Key, v attribute.Value) []byte {
	b, start := beginMessage(b, num)
	b = appendBytesField(b, fKVKey, string(key))
	b = appendAnyValue(b, fKVValue, v)
	return endMessage(b, start)
}

// appendAnyValue appends v as an AnyValue, field num, every
// attribute.Type: slices become ArrayValues, maps KeyValueLists, EMPTY an
// AnyValue with nothing set. A oneof member is written even when it holds
// its type's zero value (false, 0, "").
func appendAnyValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, start := beginMessage(b, num)
	switch v.Type() {
	case attribute.BOOL:
		b = appendAnyBool(b, v.AsBool())
	case attribute.INT64:
		b = appendAnyInt(b, v.AsInt64())
	case attribute.FLOAT64:
		b = appendAnyDouble(b, v.AsFloat64())
	case attribute.STRING:
		b = appendAnyString(b, v.AsString())
	case attribute.BOOLSLICE:
		b = appendArray(b, v.AsBoolSlice(), appendAnyBool)
	case attribute.INT64SLICE:
		b = appendArray(b, v.AsInt64Slice(), appendAnyInt)
	case attribute.FLOAT64SLICE:
		b = appendArray(b, v.AsFloat64Slice(), appendAnyDouble)
	case attribute.STRINGSLICE:
		b = appendArray(b, v.AsStringSlice(), appendAnyString)
	case attribute.SLICE:
		var as int
		b, as = beginMessage(b, fAnyArray)
		for _, e := range v.AsSlice() {
			b = appendAnyValue(b, fListValues, e)
		}
		b = endMessage(b, as)
	case attribute.BYTESLICE:
		b = appendString(appendTag(b, fAnyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.MAP:
		var ms int
		b, ms = beginMessage(b, fAnyKVList)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, fListValues, kv.Key, kv.Value)
		}
		b = endMessage(b, ms)
	case attribute.EMPTY:
	default:
		b = appendAnyString(b, "INVALID")
	}
	return endMessage(b, start)
}

// The oneof members of AnyValue.

func appendAnyBool(b []byte, v bool) []byte {
	return appendVarint(appendTag(b, fAnyBool, protowire.VarintType), protowire.EncodeBool(v))
}

func appendAnyInt(b []byte, v int64) []byte {
	return appendVarint(appendTag(b, fAnyInt, protowire.VarintType), uint64(v))
}

func appendAnyDouble(b []byte, v float64) []byte {
	return protowire.AppendFixed64(appendTag(b, fAnyDouble, protowire.Fixed64Type), math.Float64bits(v))
}

func appendAnyString(b []byte, v string) []byte {
	return appendString(appendTag(b, fAnyString, protowire.BytesType), v)
}

// appendArray appends vs as the ArrayValue member of an AnyValue, each
// element an AnyValue written by member.
func appendArray[T any](b []byte, vs []T, member func([]byte, T) []byte) []byte {
	b, start := beginMessage(b, fAnyArray)
	for _, v := range vs {
		var es int
		b, es = beginMessage(b, fListValues)
		b = member(b, v)
		b = endMessage(b, es)
	}
	return endMessage(b, start)
}

// batch is spans encoded for one export, grouped by resource and then by
// instrumentation scope, each group in the order its first span came.
// Each span is encoded when added; the export's envelope around the groups
// when the batch is sent: in place, around the spans of a batch of one
// group (see inPlace), else into a new buffer (appendExport).
type batch struct {
	groups []spanGroup
	n      int // spans added
	// refs counts the readers the HTTP transport holds of the export made
	// in place in this batch's buffer: the batch is not written to again
	// until they are closed. nil when there are none.
	refs *bodyRefs
}

// spanGroup is the spans of one resource and scope, each encoded as a
// ScopeSpans.spans field, in buf after room bytes kept for the export's
// envelope.
type spanGroup struct {
	res   *resource.Resource
	resID attribute.Distinct
	scope instrumentation.Scope
	// resMsg and scopeMsg are the envelope's Resource (ResourceSpans.
	// resource; none when res is nil) and InstrumentationScope
	// (ScopeSpans.scope; none when the scope is the zero one), encoded
	// once.
	resMsg, scopeMsg []byte
	room             int
	buf              []byte
}

// spans is g's encoded spans.
func (g *spanGroup) spans() []byte { return g.buf[g.room:] }

// add encodes sd into its group.
func (bt *batch) add(sd sdktrace.ReadOnlySpan) {
	res, scope := sd.Resource(), sd.InstrumentationScope()
	g := bt.group(res, scope)
	g.buf = appendSpan(g.buf, fSSSpans, sd)
	bt.n++
}

// group finds, or adds, the group of res and scope. A gateway's spans all
// share one resource and scope: the first group is compared by pointer.
func (bt *batch) group(res *resource.Resource, scope instrumentation.Scope) *spanGroup {
	for i := range bt.groups {
		g := &bt.groups[i]
		if (g.res == res || g.resID == res.Equivalent()) && g.scope == scope {
			return g
		}
	}
	g := spanGroup{res: res, resID: res.Equivalent(), scope: scope}
	if res != nil {
		var rm int
		g.resMsg, rm = beginMessage(nil, fRSResource)
		g.resMsg = appendKeyValues(g.resMsg, fResourceAttributes, res.Attributes())
		g.resMsg = endMessage(g.resMsg, rm)
	}
	if scope != (instrumentation.Scope{}) {
		var sm int
		g.scopeMsg, sm = beginMessage(nil, fSSScope)
		g.scopeMsg = appendBytesField(g.scopeMsg, fScopeName, scope.Name)
		g.scopeMsg = appendBytesField(g.scopeMsg, fScopeVersion, scope.Version)
		g.scopeMsg = appendKeyValues(g.scopeMsg, fScopeAttributes, scope.Attributes.ToSlice())
		g.scopeMsg = endMessage(g.scopeMsg, sm)
	}
	// Two tags and two lengths besides the messages.
	g.room = len(g.resMsg) + len(g.scopeMsg) + 2*(1+binary.MaxVarintLen64)
	g.buf = make([]byte, g.room)
	bt.groups = append(bt.groups, g)
	return &bt.groups[len(bt.groups)-1]
}

// size is about how many bytes the encoded spans take.
func (bt *batch) size() int {
	n := 0
	for i := range bt.groups {
		n += len(bt.groups[i].spans())
	}
	return n
}

// reset empties bt, keeping its buffers.
func (bt *batch) reset() {
	for i := range bt.groups {
		g := &bt.groups[i]
		g.buf = g.buf[:g.room]
	}
	bt.n = 0
}

// appendExport appends the ExportTraceServiceRequest holding bt's spans.
// Groups with no span are left out.
func (bt *batch) appendExport(b []byte) []byte {
	done := make([]bool, len(bt.groups))
	for i := range bt.groups {
		if done[i] || len(bt.groups[i].spans()) == 0 {
			continue
		}
		res := bt.groups[i].res
		var rs int
		b, rs = beginMessage(b, fExportResourceSpans)
		b = append(b, bt.groups[i].resMsg...)
		for j := i; j < len(bt.groups); j++ {
			g := &bt.groups[j]
			if done[j] || len(g.spans()) == 0 || g.resID != bt.groups[i].resID {
				continue
			}
			done[j] = true
			var ss int
			b, ss = beginMessage(b, fRSScopeSpans)
			b = append(b, g.scopeMsg...)
			b = append(b, g.spans()...)
			b = appendBytesField(b, fSSSchemaURL, g.scope.SchemaURL)
			b = endMessage(b, ss)
		}
		if res != nil {
			b = appendBytesField(b, fRSSchemaURL, res.SchemaURL())
		}
		b = endMessage(b, rs)
	}
	return b
}

// inPlace returns the ExportTraceServiceRequest holding bt's spans when
// they are all in one group (a gateway's are), written around them in
// that group's buffer: the bytes appendExport writes, without a copy of
// the spans or a buffer for them. false, and nothing written, for any
// other batch. The export is valid until a span is added to the batch.
func (bt *batch) inPlace() ([]byte, bool) {
	var g *spanGroup
	for i := range bt.groups {
		if len(bt.groups[i].spans()) == 0 {
			continue
		}
		if g != nil {
			return nil, false
		}
		g = &bt.groups[i]
	}
	if g == nil {
		return nil, false
	}
	// After the spans: ScopeSpans' schema URL, then ResourceSpans'.
	spansEnd := len(g.buf)
	g.buf = appendBytesField(g.buf, fSSSchemaURL, g.scope.SchemaURL)
	ssEnd := len(g.buf)
	if g.res != nil {
		g.buf = appendBytesField(g.buf, fRSSchemaURL, g.res.SchemaURL())
	}
	ss := len(g.scopeMsg) + ssEnd - g.room
	rs := len(g.resMsg) + 1 + protowire.SizeVarint(uint64(ss)) + ss + len(g.buf) - ssEnd
	// Before them, in the room kept: the ResourceSpans' tag and length,
	// the resource, the ScopeSpans' tag and length, the scope.
	start := g.room - (1 + protowire.SizeVarint(uint64(rs)) + len(g.resMsg) + 1 + protowire.SizeVarint(uint64(ss)) + len(g.scopeMsg))
	p := appendTag(g.buf[start:start], fExportResourceSpans, protowire.BytesType)
	p = protowire.AppendVarint(p, uint64(rs))
	p = append(p, g.resMsg...)
	p = appendTag(p, fRSScopeSpans, protowire.BytesType)
	p = protowire.AppendVarint(p, uint64(ss))
	_ = append(p, g.scopeMsg...) // fills the room up to the spans
	body := g.buf[start:]
	g.buf = g.buf[:spansEnd] // the spans, as they were
	return body, true
}
