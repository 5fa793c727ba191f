// Package sse implements the text/event-stream format (Server-Sent Events) as
// the WHATWG HTML standard defines it: a [Writer] that frames and flushes
// events onto an HTTP response, and a [Reader] that parses a stream from an
// upstream server, with the [MessageReader] the upstream clients read MCP
// messages with, and [Writer.Messages] the fronts write a queue of them
// with. It is the codec only and knows nothing about MCP sessions:
// the fronts (front/streamable, front/sse) write with it, the upstream
// clients (upstream/streamable, upstream/sse) read with it.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxRetainedBuf is the largest encoding buffer a Writer keeps between
// events. A bigger event still works; its buffer is dropped afterwards so
// one huge event does not pin memory for the life of a stream.
const maxRetainedBuf = 256 << 10

var errFieldNewline = errors.New("value contains CR or LF")

// Writer writes events to an event stream. Each call writes one complete
// event with a single Write on the underlying writer and then flushes it.
//
// A Writer is safe for concurrent use: a mutex serialises calls, so the lines
// of two events never interleave.
//
// After the underlying writer or its flush fails once, the stream may hold a
// partial event, so every later call returns that first error and writes
// nothing.
//
// The zero Writer is not usable; call [NewWriter].
type Writer struct {
	w     io.Writer
	flush func() error // nil: w cannot flush

	// mu guards buf and err, and serialises writes to w.
	mu  sync.Mutex
	buf []byte // encoding scratch space, reused between events
	err error  // first write or flush error; sticky
}

// NewWriter returns a Writer that writes to w.
//
// If w (or, for an [http.ResponseWriter], a writer it wraps through an
// Unwrap() http.ResponseWriter method, as [http.ResponseController] follows)
// has a FlushError() error method or implements [http.Flusher], every event
// is flushed as soon as it is written. Otherwise events are only written.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, flush: flusherOf(w)}
}

// flusherOf finds the flush method of w, looking through ResponseWriter
// wrappers. FlushError is preferred because it reports failures.
func flusherOf(w io.Writer) func() error {
	var cur any = w
	for range 16 { // bound the walk in case of an Unwrap cycle
		switch f := cur.(type) {
		case interface{ FlushError() error }:
			return f.FlushError
		case http.Flusher:
			return func() error { f.Flush(); return nil }
		}
		u, ok := cur.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		cur = u.Unwrap()
	}
	return nil
}

// Event writes one event: an "event:" line (omitted when name is empty), an
// "id:" line (omitted when id is empty), one "data:" line per line of data,
// and the blank line that dispatches the event. Then it flushes.
//
// Lines of data may end in LF, CRLF or CR; a reader sees each of these as LF,
// so data round-trips exactly when it uses LF only. Empty or nil data is sent
// as one empty "data:" line, which a reader dispatches as an event with empty
// data.
//
// Event returns an error and writes nothing if name or id contains CR or LF,
// since that would inject fields into the stream.
func (w *Writer) Event(name, id string, data []byte) error {
	return w.event(name, id, data, true)
}

// EventNoFlush writes an event as Event does but leaves it in the
// response's buffer: a caller with more events at hand sends them
// together with the last one's flush (or an explicit [Writer.Flush]), in
// one write, and the reader wakes once.
func (w *Writer) EventNoFlush(name, id string, data []byte) error {
	return w.event(name, id, data, false)
}

// Flush sends what EventNoFlush left buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.flushLocked()
}

func (w *Writer) event(name, id string, data []byte, flush bool) error {
	if !validField(name) {
		return fmt.Errorf("sse: write event: name: %w", errFieldNewline)
	}
	if !validField(id) {
		return fmt.Errorf("sse: write event: id: %w", errFieldNewline)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	b := w.buf[:0]
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	if len(data) >= minDirect && bytes.IndexByte(data, '\n') < 0 && bytes.IndexByte(data, '\r') < 0 {
		// One large line (a JSON message is one): written from its own
		// buffer after its field name, not copied into the event's.
		b = append(b, "data: "...)
		if err := w.bufferLocked(b); err != nil {
			return err
		}
		if _, err := w.w.Write(data); err != nil {
			w.err = fmt.Errorf("sse: write: %w", err)
			return w.err
		}
		b = append(w.buf[:0], "\n\n"...)
	} else {
		b = appendLines(b, "data: ", data)
		b = append(b, '\n')
	}
	if !flush {
		return w.bufferLocked(b)
	}
	return w.writeLocked(b)
}

// minDirect is the size from which an event's data of one line is
// written from the caller's buffer rather than copied into the Writer's:
// past it the copy costs more than the two extra writes.
const minDirect = 32 << 10

// Comment writes a comment, which readers ignore; servers send one
// periodically to keep idle connections open. Each line of text becomes its
// own ": " line, and a blank line follows. Then it flushes.
func (w *Writer) Comment(text string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	b := appendLines(w.buf[:0], ": ", []byte(text))
	b = append(b, '\n')
	return w.writeLocked(b)
}

// Retry tells the reader to wait d before reconnecting after the stream
// drops ("retry:" in whole milliseconds, rounded down). It is not flushed:
// it goes out with the next event (or [Writer.Flush]), which is what it
// is about. A negative d is an error.
func (w *Writer) Retry(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("sse: write retry: negative duration %v", d)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	b := append(w.buf[:0], "retry: "...)
	b = strconv.AppendInt(b, d.Milliseconds(), 10)
	b = append(b, "\n\n"...)
	return w.bufferLocked(b)
}

// writeLocked writes b in one call, flushes, and keeps b for reuse.
// w.mu must be held.
func (w *Writer) writeLocked(b []byte) error {
	if err := w.bufferLocked(b); err != nil {
		return err
	}
	return w.flushLocked()
}

// bufferLocked writes b in one call without flushing, and keeps b for
// reuse. w.mu must be held.
func (w *Writer) bufferLocked(b []byte) error {
	if cap(b) <= maxRetainedBuf {
		w.buf = b[:0]
	} else {
		w.buf = nil
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("sse: write: %w", err)
		return w.err
	}
	return nil
}

// flushLocked flushes w's writer, if it can. w.mu must be held.
func (w *Writer) flushLocked() error {
	if w.flush != nil {
		if err := w.flush(); err != nil {
			w.err = fmt.Errorf("sse: flush: %w", err)
			return w.err
		}
	}
	return nil
}

// appendLines appends prefix+line+"\n" to b for each line of p, splitting on
// LF, CRLF and CR. An empty p gives one empty line; a trailing terminator
// gives a trailing empty line, so the reader rebuilds the same text.
func appendLines(b []byte, prefix string, p []byte) []byte {
	cr := bytes.IndexByte(p, '\r') >= 0 // without CR, IndexByte finds LF with SIMD
	for {
		var i int
		if cr {
			i = bytes.IndexAny(p, "\r\n")
		} else {
			i = bytes.IndexByte(p, '\n')
		}
		if i < 0 {
			break
		}
		b = append(b, prefix...)
		b = append(b, p[:i]...)
		b = append(b, '\n')
		if p[i] == '\r' && i+1 < len(p) && p[i+1] == '\n' {
			i++
		}
		p = p[i+1:]
	}
	b = append(b, prefix...)
	b = append(b, p...)
	return append(b, '\n')
}

func validField(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return false
		}
	}
	return true
}
