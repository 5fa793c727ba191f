package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// BenchmarkTracingRequest is one traced request's whole cost in this
// process: the server span, one upstream call's client span and the
// traceparent spliced into its params, and the export of the sampled ones
// to an OTLP receiver on loopback that discards them; at sample ratios 1,
// 0.1 and 0 (every request a root).
func BenchmarkTracingRequest(b *testing.B) {
	for _, ratio := range []float64{1, 0.1, 0} {
		b.Run("ratio="+strconv.FormatFloat(ratio, 'g', -1, 64), func(b *testing.B) { benchTracingRequest(b, ratio) })
	}
}

func benchTracingRequest(b *testing.B, ratio float64) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer rcv.Close()
	tr, err := New(Options{Endpoint: rcv.URL, SampleRatio: ratio, ServiceName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	hr := httptest.NewRequest("POST", "/d/mcp", nil)
	req, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"0123456789abcdef0123456789abcdef"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	resp, _ := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`))
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		q := tr.Start(hr, now)
		out, c := q.Upstream("d", "0d1e2f30-aaaa-4bbb-8ccc-000000000000", req)
		if out == req {
			b.Fatal("traceparent not spliced")
		}
		c.End(resp)
		q.End(&audit.Record{Time: now, HTTPMethod: "POST", Path: "/d/mcp", MCPMethod: "tools/call", Destination: "d",
			Session: "0d1e2f30-aaaa-4bbb-8ccc-000000000000", Status: 200, RPCID: req.ID})
	}
	b.StopTimer()
	if err := tr.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// benchSpans are n ended spans like the gateway's: a server span and a
// client span per request, with their attributes.
func benchSpans(b *testing.B, n int) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "bench"))))
	tr := tp.Tracer("github.com/switchboard-mcp/switchboard")
	for i := 0; len(rec.Ended()) < n; i++ {
		ctx, s := tr.Start(context.Background(), "tools/call echo", trace.WithSpanKind(trace.SpanKindServer))
		_, c := tr.Start(ctx, "tools/call echo", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String(AttrMethod, "tools/call"), attribute.String(AttrDestination, "d"),
			attribute.String(AttrTool, "echo"), attribute.String(AttrSession, "0d1e2f30-aaaa-4bbb-8ccc-000000000000")))
		c.End()
		s.SetAttributes(attribute.Int("http.response.status_code", 200), attribute.String(AttrMethod, "tools/call"),
			attribute.String(AttrTool, "echo"), attribute.String(AttrDestination, "d"),
			attribute.String(AttrSession, "0d1e2f30-aaaa-4bbb-8ccc-000000000000"), attribute.String(AttrRequestID, strconv.Itoa(i)))
		s.End()
	}
	return rec.Ended()[:n]
}

// BenchmarkExport is one export of a full batch (512 spans, the batch
// processor's default) to an OTLP receiver on loopback that reads and
// discards it: conversion, encoding and the POST.
func BenchmarkExport(b *testing.B) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer rcv.Close()
	spans := benchSpans(b, 512)
	exp, err := newExporterFromEnv(rcv.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		if err := exp.ExportSpans(context.Background(), spans); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendSpan is the encoding of a traced call's two spans, as
// the gateway's Request and Call end them, into a batch.
func BenchmarkAppendSpan(b *testing.B) {
	spans := benchSpans(b, 2)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = appendSpan(appendSpan(buf[:0], fSSSpans, spans[0]), fSSSpans, spans[1])
	}
}
