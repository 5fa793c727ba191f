// Package reqbody reads HTTP request bodies within bounds, for every front
// that reads one (Streamable HTTP POST, legacy /message):
//
//   - a declared Content-Length over the limit is refused before a byte of
//     the body is read (the caller answers 413 at once);
//   - the buffer grows with the bytes that arrive, never sized from the
//     header, so a client that declares 16 MiB and sends 3 KB costs 3 KB;
//   - a body that stops arriving ends with [ErrStalled] instead of holding
//     its connection and buffer forever. The bound is the serving
//     http.Server's ReadTimeout, used as an idle time: net/http applies it
//     from the request's start to the body's first read, and [Read] renews
//     it before each later read. A small body, which arrives with the
//     headers, costs no deadline change and no allocation for this;
//   - a body that trickles (a byte now and then, never stalling) ends with
//     [ErrStalled] too once [WithTimeout]'s bound for the whole body has
//     passed since its first read.
package reqbody

import (
	"context"
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
// server's ReadTimeout. Fronts answer it with 408.
var ErrStalled = errors.New("request body stalled")

// timeoutKey is the context key of WithTimeout's bound.
type timeoutKey struct{}

// WithTimeout returns ctx carrying d, the bound of a whole body's arrival
// for the requests served under it (a server's BaseContext); zero or less
// means none.
func WithTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, timeoutKey{}, d)
}

// Read reads r's body, at most max bytes. A body over max, declared or
// actual, is an *http.MaxBytesError; a declared one is refused without
// reading anything (the server then closes the connection rather than
// drain it). w is r's ResponseWriter (http.MaxBytesReader tells the
// server through it not to read on; deadlines are set through it).
func Read(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	size := int64(initialCap)
	if n := r.ContentLength; n >= 0 && n < size {
		size = n + 1 // room for the read that sees EOF, so no growth
	}
	var rd io.Reader = r.Body
	if r.ContentLength < 0 {
		// A declared length within max is enforced by net/http itself.
		rd = http.MaxBytesReader(w, r.Body, max)
	}
	idle := readTimeout(r)
	total, _ := r.Context().Value(timeoutKey{}).(time.Duration)
	var rc *http.ResponseController
	var end time.Time // the whole body's deadline, set at the second read
	b := make([]byte, 0, size)
	for first := true; ; first = false {
		if !first && (idle > 0 || total > 0) {
			// The body did not come whole with the first read: each
			// further read gets the idle time from when it starts,
			// within the whole body's bound. An error (a connection that
			// cannot take deadlines) leaves the read bounded by the first
			// deadline only.
			if rc == nil {
				rc = http.NewResponseController(w)
				if total > 0 {
					end = time.Now().Add(total)
				}
			}
			dl := end
			if idle > 0 {
				if t := time.Now().Add(idle); dl.IsZero() || t.Before(dl) {
					dl = t
				}
			}
			_ = rc.SetReadDeadline(dl)
		}
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			// No deadline is cleared: at EOF net/http has cleared it for
			// its background read, and setting one now would race with
			// that read.
			return b, nil
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if !end.IsZero() && !time.Now().Before(end) {
					return nil, fmt.Errorf("%w: not complete within %v", ErrStalled, total)
				}
				return nil, fmt.Errorf("%w: no bytes for %v", ErrStalled, idle)
			}
			return nil, err
		}
		if len(b) == cap(b) {
			b = grow(b, r.ContentLength)
		}
	}
}

// grow returns b with room for more. A body of declared length n grows
// fourfold, or straight to n+1 (room for the read that sees EOF) when four
// times would reach n: each step needs the client to have sent the whole
// buffer first, so what is allocated stays within about four times what
// arrived, and a 64 KiB body costs 16 and 64 KiB + 1 instead of append's
// 16, 32, 64 and 128. A body of unknown length grows by append's doubling.
func grow(b []byte, n int64) []byte {
	if n < 0 || int64(cap(b)) >= n+1 {
		return append(b, 0)[:len(b)]
	}
	size := int64(cap(b)) * 4
	if size >= n {
		size = n + 1
	}
	nb := make([]byte, len(b), size)
	copy(nb, b)
	return nb
}

// readTimeout is the ReadTimeout of the server serving r, 0 for none.
func readTimeout(r *http.Request) time.Duration {
	if s, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
		return s.ReadTimeout
	}
	return 0
}
