package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The batching of ended spans, in place of the SDK's BatchSpanProcessor
// (same defaults: 512 spans a batch, at most 2048 waiting, an export at
// least every 5 s; the OTEL_BSP_* variables are not read).
const (
	maxBatchSpans    = 512
	maxQueuedBatches = 3 // full batches waiting for the exporter, besides the one filling
	scheduleDelay    = 5 * time.Second
)

// processor is an [sdktrace.SpanProcessor] that encodes each sampled span
// as it ends into the batch being filled, and hands a full batch (or,
// every scheduleDelay, whatever there is) to its goroutine, which exports
// it. A batch is bytes, not spans: the span's snapshot is garbage at once,
// so the garbage collector never marks up to 2048 spans and their
// attributes waiting for export, and ending a span neither sends on a
// channel nor wakes a goroutine until a batch is full. Spans that find the
// queue full are dropped (as the SDK's processor drops them), counted,
// and reported through otel.Handle at the next export.
//
// The goroutine is the processor's: Shutdown ends it.
type processor struct {
	exp *exporter

	mu     sync.Mutex
	cur    *batch   // guarded by mu: the batch being filled
	free   []*batch // guarded by mu: exported batches, for reuse
	closed bool     // guarded by mu: Shutdown was called

	full    chan *batch       // full batches, for run
	flushes chan flushRequest // ForceFlush's requests, for run
	stop    chan struct{}     // closed by Shutdown
	done    chan struct{}     // closed when run returns
	once    sync.Once
	dropped atomic.Int64

	made int // guarded by mu: batches made, for the tests
}

// flushRequest asks run to export everything ended so far within ctx and
// to answer on reply.
type flushRequest struct {
	ctx   context.Context
	reply chan error
}

var _ sdktrace.SpanProcessor = (*processor)(nil)

func newProcessor(exp *exporter) *processor {
	p := &processor{exp: exp, cur: &batch{}, full: make(chan *batch, maxQueuedBatches),
		flushes: make(chan flushRequest), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// OnStart does nothing: spans are read when they end.
func (p *processor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd encodes s into the current batch if it is sampled.
func (p *processor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.cur.add(s)
	p.rotate()
}

// rotate hands the current batch to run once it is full, or drops it when
// the exporter is behind. Callers hold p.mu.
func (p *processor) rotate() {
	if p.cur.n < maxBatchSpans {
		return
	}
	select {
	case p.full <- p.cur:
		p.cur = p.newBatch()
	default: // the exporter is behind: drop this batch
		p.dropped.Add(int64(p.cur.n))
		p.cur.reset()
	}
}

// newBatch is an exported batch, emptied, whose export the transport has
// done reading, or a new one. Callers hold p.mu.
func (p *processor) newBatch() *batch {
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; b.refs == nil || b.refs.released() {
			p.free = append(p.free[:i], p.free[i+1:]...)
			b.refs = nil
			return b
		}
	}
	p.made++
	return &batch{}
}

// take returns the current batch, replacing it, or nil when it is empty.
func (p *processor) take() *batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur.n == 0 {
		return nil
	}
	b := p.cur
	p.cur = p.newBatch()
	return b
}

// run exports the batches: each full one as it comes, the current one
// every scheduleDelay, and all there are on a flush or at the stop.
func (p *processor) run() {
	defer close(p.done)
	tick := time.NewTicker(scheduleDelay)
	defer tick.Stop()
	for {
		select {
		case b := <-p.full:
			p.report(p.export(context.Background(), b))
		case <-tick.C:
			p.report(p.export(context.Background(), p.take()))
		case f := <-p.flushes:
			f.reply <- p.exportAll(f.ctx)
		case <-p.stop:
			return
		}
	}
}

// exportAll exports the queued batches and the current one, within ctx.
func (p *processor) exportAll(ctx context.Context) error {
	var errs []error
	for len(p.full) > 0 { // run is full's only receiver: this never blocks
		errs = append(errs, p.export(ctx, <-p.full))
	}
	errs = append(errs, p.export(ctx, p.take()))
	return errors.Join(errs...)
}

// export sends b (nothing when nil) and keeps it for reuse.
func (p *processor) export(ctx context.Context, b *batch) error {
	if b == nil {
		return nil
	}
	body, inPlace := b.inPlace()
	if !inPlace {
		body = b.appendExport(make([]byte, 0, b.size()+256))
	}
	refs := &bodyRefs{}
	err := p.exp.export(ctx, body, refs)
	b.reset()
	p.mu.Lock()
	if inPlace {
		b.refs = refs
	}
	// A transport that never closed the bodies it read would leave every
	// batch unreleased: at most maxQueuedBatches+1 are kept.
	if len(p.free) > maxQueuedBatches {
		p.free = append(p.free[:0], p.free[1:]...)
	}
	p.free = append(p.free, b)
	p.mu.Unlock()
	return err
}

// report hands an export's error, and the count of spans dropped since
// the last report, to the OpenTelemetry error handler.
func (p *processor) report(err error) {
	if n := p.dropped.Swap(0); n > 0 {
		otel.Handle(fmt.Errorf("tracing: %d spans dropped: the export queue was full", n))
	}
	if err != nil {
		otel.Handle(err)
	}
}

// ForceFlush exports every span ended so far, within ctx.
func (p *processor) ForceFlush(ctx context.Context) error {
	f := flushRequest{ctx: ctx, reply: make(chan error, 1)}
	select {
	case p.flushes <- f:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-f.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is left within ctx, ends the goroutine and stops
// the exporter; spans ending afterwards are dropped. Later calls do
// nothing.
func (p *processor) Shutdown(ctx context.Context) error {
	var err error
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		err = p.ForceFlush(ctx)
		close(p.stop)
		select {
		case <-p.done:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
		}
		err = errors.Join(err, p.exp.Shutdown(ctx))
	})
	return err
}
