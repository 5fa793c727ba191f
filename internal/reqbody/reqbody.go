// Package reqbody reads HTTP request bodies within bounds, for every front
// that reads one (Streamable HTTP POST, legacy /message):
//
//   - a declared Content-Length over the limit is refused before a byte of
//     the body is read (the caller answers 413 at once);
//   - the buffer grows with the bytes that arrive, never sized from the
//     header, so a client that declares 16 MiB and sends 3 KB costs 3 KB;
//     a large body's buffer grows through pooled steps (16, 64, 256 KiB …)
//     to one of its exact length, so its only allocation is that buffer;
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
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/bigbuf"
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
//
// A declared body of 128 KiB or more is read into a buffer from bigbuf: the caller gives it back (bigbuf.Put) once nothing reads it, or
// leaves it to the garbage collector.
func Read(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	var g growth
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
	var b []byte
	if size == initialCap {
		b = g.take(0)
	} else {
		b = make([]byte, 0, size)
	}
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
			g.p = nil // b is the caller's now, pooled step or not
			return b, nil
		}
		if err != nil {
			g.release()
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
			b = g.grow(b, r.ContentLength)
		}
	}
}

// pooledFrom is the size from which a body's buffer comes from bigbuf
// (rounded up to its size class); a smaller one has exactly the body's
// length.
const pooledFrom = 128 << 10

// steps holds the buffers of growth's steps, by class: initialCap << 2k
// bytes, k = 0 … len(steps)-1. A step's buffer is released as soon as the
// body moved on to the next, so it is reused by the next large body
// instead of being garbage; what the pool holds is dropped at garbage
// collection.
var steps [5]sync.Pool // 16 KiB … 4 MiB

// growth is the state of one body's buffer: the pooled step it is in, if
// any.
type growth struct {
	p     *[]byte // the step buffer b is (nil: b is not pooled)
	class int
}

// take returns an empty buffer of step class c and remembers it as b's.
func (g *growth) take(c int) []byte {
	if p, ok := steps[c].Get().(*[]byte); ok {
		g.p, g.class = p, c
		return (*p)[:0]
	}
	b := make([]byte, 0, initialCap<<(2*c))
	g.p, g.class = &b, c
	return b
}

// release returns the step buffer, if b is one, to its pool: b's bytes
// have been copied on, or b is no longer read.
func (g *growth) release() {
	if g.p != nil {
		steps[g.class].Put(g.p)
		g.p = nil
	}
}

// grow returns b with room for more. A body of declared length n grows
// fourfold, through pooled step buffers, or straight to n+1 (room for the
// read that sees EOF) when four times would reach 80% of that: each step
// needs the client to have sent the whole buffer first, so what is
// allocated stays within about five times what arrived, and a 1 MiB body
// costs one allocation of its own length (the steps of 16, 64 and
// 256 KiB come from the pool and go back to it) instead of append's
// doubling. A body of unknown length grows by append's doubling.
func (g *growth) grow(b []byte, n int64) []byte {
	if n < 0 || int64(cap(b)) >= n+1 {
		nb := append(b, 0)[:len(b)]
		g.release() // b was copied into nb
		return nb
	}
	size := int64(cap(b)) * 4
	var nb []byte
	if c := g.class + 1; g.p != nil && c < len(steps) && size*5/4 < n+1 {
		old := g.p
		nb = g.take(c)[:len(b)]
		copy(nb, b)
		steps[c-1].Put(old)
		return nb
	}
	if size*5/4 >= n+1 {
		size = n + 1
	}
	if size == n+1 && size >= pooledFrom {
		nb = bigbuf.Get(int(size))[:len(b)] // the caller may give it back
	} else {
		nb = make([]byte, len(b), size)
	}
	copy(nb, b)
	g.release()
	return nb
}

// readTimeout is the ReadTimeout of the server serving r, 0 for none.
func readTimeout(r *http.Request) time.Duration {
	if s, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
		return s.ReadTimeout
	}
	return 0
}
