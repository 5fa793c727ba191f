// Package reqbody reads HTTP request bodies within bounds, for every front
// that reads one (Streamable HTTP POST, legacy /message):
//
//   - a declared Content-Length over the limit is refused before a byte of
//     the body is read (the caller answers 413 at once);
//   - the buffer grows with the bytes that arrive, never sized from the
//     header, so a client that declares 16 MiB and sends 3 KB costs 3 KB;
//   - with [Deadlines] around the server's handler, a body that stops
//     arriving ends with [ErrStalled] instead of holding its connection
//     and buffer forever.
package reqbody

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// initialCap bounds the first allocation of a body buffer; larger bodies
// grow it as their bytes arrive.
const initialCap = 16 << 10

// ErrStalled is the error (wrapped) of a body read that saw no byte for the
// idle time of [Deadlines]. Fronts answer it with 408.
var ErrStalled = errors.New("request body stalled")

// Read reads r's body, at most max bytes. A body over max, declared or
// actual, is an *http.MaxBytesError; a declared one is refused without
// reading anything (the server then closes the connection rather than
// drain it). w is r's ResponseWriter (http.MaxBytesReader tells the
// server through it not to read on).
func Read(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	size := int64(initialCap)
	if n := r.ContentLength; n >= 0 && n < size {
		size = n + 1 // room for the read that sees EOF, so no growth
	}
	rd := http.MaxBytesReader(w, r.Body, max)
	b := make([]byte, 0, size)
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow by append's amortised doubling
		}
	}
}

// Deadlines returns next with a read deadline on every request body: each
// read of the body must see a byte within idle, else it fails with
// [ErrStalled] (wrapped). The deadline moves with every read, so a slow
// upload that keeps progressing is never cut; requests without a body
// (GET event streams) are untouched. Once the body has been read to its
// end the connection has no deadline again (net/http clears it for its
// background read), so a long answer streamed afterwards is not cut
// either. Zero or negative idle returns next itself.
func Deadlines(next http.Handler, idle time.Duration) http.Handler {
	if idle <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			// A copy: net/http must still find its own body in the
			// request it holds, to close a connection whose unread body
			// is too big to drain (a 413 answered without reading)
			// instead of reading it first.
			r2 := new(http.Request)
			*r2 = *r
			r2.Body = &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: idle}
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

// idleBody arms the connection's read deadline before each read of the
// body, until the body ends. Like any request body it is read by one
// goroutine at a time.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	done bool // the body ended (EOF or an error): no more deadlines
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	// An error (a connection that cannot take deadlines) leaves the read
	// unbounded, as it was before; the header timeout still applies.
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done = true
		// No deadline is cleared here: at EOF net/http has already
		// cleared it for its background read, and setting one now would
		// race with that read. After a timeout the connection is closed.
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return n, fmt.Errorf("%w: no bytes for %v", ErrStalled, b.idle)
		}
	}
	return n, err
}
