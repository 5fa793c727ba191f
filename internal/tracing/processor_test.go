package tracing

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// spanCounter is an in-memory collector that decodes each export with the
// collector's types and notes how many spans it held; while gate is not
// nil, an export waits for it to close.
type spanCounter struct {
	t    *testing.T
	gate chan struct{}

	mu     sync.Mutex
	counts []int // guarded by mu: spans per export
}

func (c *spanCounter) serve(w http.ResponseWriter, r *http.Request) {
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-r.Context().Done():
			return
		}
	}
	b, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		c.t.Errorf("export does not decode: %v", err)
	}
	n := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	c.mu.Lock()
	c.counts = append(c.counts, n)
	c.mu.Unlock()
}

func (c *spanCounter) got() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.counts...)
}

func newTestProcessor(c *spanCounter) *processor {
	exp := newExporter(exporterConfig{url: "http://collector.test/v1/traces", timeout: time.Hour, headers: http.Header{}})
	exp.client.Transport = handlerTransport{c.serve}
	return newProcessor(exp)
}

var (
	sampledSpan = tracetest.SpanStubs{{Name: "s", StartTime: t0, EndTime: t0,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidA, TraceFlags: trace.FlagsSampled})}}.Snapshots()[0]
	unsampledSpan = tracetest.SpanStubs{{Name: "u", StartTime: t0, EndTime: t0,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidB})}}.Snapshots()[0]
)

// TestProcessorBatches: sampled spans only, a full batch exported at once,
// the rest after scheduleDelay, nothing when there is nothing; Shutdown
// exports what is left, later spans are dropped, and it may be called
// again.
func TestProcessorBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &spanCounter{t: t}
		p := newTestProcessor(c)
		var _ sdktrace.SpanProcessor = p
		for i := range 2*maxBatchSpans + 76 {
			p.OnEnd(sampledSpan)
			if i%100 == 0 {
				p.OnEnd(unsampledSpan)
			}
		}
		synctest.Wait()
		if got := c.got(); len(got) != 2 || got[0] != maxBatchSpans || got[1] != maxBatchSpans {
			t.Fatalf("exports before the schedule: %v, want two full batches", got)
		}
		time.Sleep(scheduleDelay)
		synctest.Wait()
		if got := c.got(); len(got) != 3 || got[2] != 76 {
			t.Fatalf("exports after the schedule: %v, want the remaining 76", got)
		}
		if err := p.ForceFlush(context.Background()); err != nil || len(c.got()) != 3 {
			t.Fatalf("ForceFlush with nothing to send: %v, %d exports", err, len(c.got()))
		}
		for range 3 {
			p.OnEnd(sampledSpan)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.OnEnd(sampledSpan)
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("second Shutdown: %v", err)
		}
		if err := p.ForceFlush(context.Background()); err != nil {
			t.Errorf("ForceFlush after Shutdown: %v", err)
		}
		if got := c.got(); len(got) != 4 || got[3] != 3 {
			t.Errorf("exports: %v, want the last 3 spans at Shutdown and none after", got)
		}
	})
}

// TestProcessorQueueFull: while the collector stalls, one batch is in
// flight and maxQueuedBatches wait; a batch filled beyond that is dropped
// and counted, and the others are all exported once the collector answers.
func TestProcessorQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &spanCounter{t: t, gate: make(chan struct{})}
		p := newTestProcessor(c)
		defer p.Shutdown(context.Background())
		for i := range (maxQueuedBatches + 2) * maxBatchSpans {
			p.OnEnd(sampledSpan)
			if i == maxBatchSpans-1 {
				synctest.Wait() // the first batch is in flight before the next fills
			}
		}
		if n := p.dropped.Load(); n != maxBatchSpans {
			t.Errorf("%d spans dropped, want %d", n, maxBatchSpans)
		}
		close(c.gate)
		if err := p.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, n := range c.got() {
			total += n
		}
		if want := (maxQueuedBatches + 1) * maxBatchSpans; total != want {
			t.Errorf("%d spans exported, want %d", total, want)
		}
	})
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestProcessorBodyReuse: an export is written in place in its batch's
// buffer, and the batch takes spans again only once the transport has
// closed the body it read from it (a transport may still read it after
// answering): a body still open is never overwritten, and a batch whose
// body was closed is reused rather than a new one made. Its bytes are
// those appendExport writes.
func TestProcessorBodyReuse(t *testing.T) {
	var held []io.ReadCloser // bodies left open; read by the test after ForceFlush returns
	closeBodies := false
	exp := newExporter(exporterConfig{url: "http://collector.test/v1/traces", timeout: time.Hour, headers: http.Header{}})
	exp.client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if closeBodies {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
		} else {
			held = append(held, r.Body)
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	p := newProcessor(exp)
	defer p.Shutdown(context.Background())
	named := func(name string) sdktrace.ReadOnlySpan {
		return tracetest.SpanStubs{{Name: name, StartTime: t0, EndTime: t0,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sidA, TraceFlags: trace.FlagsSampled})}}.Snapshots()[0]
	}
	flush := func(name string) {
		t.Helper()
		p.OnEnd(named(name))
		if err := p.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	made := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.made
	}
	for _, name := range []string{"first", "secnd", "third"} { // the same length: each would fit in the other's buffer
		flush(name)
	}
	for i, want := range []string{"first", "secnd", "third"} {
		b, _ := io.ReadAll(held[i])
		var bt batch
		bt.add(named(want))
		if !bytes.Equal(b, bt.appendExport(nil)) {
			t.Errorf("held body %d is not the export of span %q: its buffer was reused while open", i, want)
		}
		_ = held[i].Close()
	}
	closeBodies = true
	flush("forth")
	n := made()
	for range 3 {
		flush("again")
	}
	if made() != n {
		t.Errorf("%d batches made for three exports whose bodies were closed, want none", made()-n)
	}
}
