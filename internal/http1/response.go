package http1

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// response is the http.ResponseWriter of a request served here, with
// net/http's semantics for what handlers see: the header is taken at
// WriteHeader (changes after it have no effect), a body that the handler
// finishes without flushing, within chunkingAfter, goes out with a
// Content-Length, otherwise chunked (past chunkingAfter, as net/http); a missing Content-Type is sniffed
// from the first bytes; Date is added unless the handler set it (to nil
// to have none); 1xx statuses go out at once.
//
// Unlike net/http it encodes the status line and the handler's header
// into the connection's write buffer at WriteHeader, instead of cloning
// the header map, and adds the framing (Content-Length or chunked,
// Connection: close) when the head is sent.
type response struct {
	c   *conn
	req *http.Request
	hdr http.Header // nil until Header is called
	bd  *body       // the request body, nil when it had none

	status        int   // 0 until WriteHeader
	clen          int64 // the handler's Content-Length; -1 for none
	written       int64 // body bytes the handler wrote
	haveType      bool  // the handler's header has Content-Type (maybe nil)
	haveDate      bool  // … has Date
	haveConnClose bool  // … has Connection: close
	sent          bool  // the head, framing included, is in c.bw
	chunked       bool
	closeAfter    bool   // the connection closes after this response
	finished      bool   // the handler returned
	buf           []byte // body bytes before the head is sent
	err           error  // a write failed: the connection is done
}

// chunkingAfter is how much of a body of unknown length is kept before
// the head is sent chunked: net/http's bufferBeforeChunkingSize.
const chunkingAfter = 2048

var errWriteAfterFinish = errors.New("http1: response used after its handler returned")

func (w *response) Header() http.Header {
	if w.hdr == nil {
		w.hdr = make(http.Header)
	}
	return w.hdr
}

func (w *response) WriteHeader(code int) {
	if w.finished {
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if w.status != 0 {
		w.c.s.logf("http: superfluous response.WriteHeader call (status %d after %d)", code, w.status)
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		// Informational: at once, the header kept for what follows.
		w.writeStatusAndHeader(code, false)
		_, _ = w.c.bw.WriteString("\r\n")
		w.fail(w.c.bw.Flush())
		return
	}
	w.status = code
	w.writeStatusAndHeader(code, true)
}

// writeStatusAndHeader encodes the status line and the handler's header
// into the write buffer; final notes what the framing needs of it.
func (w *response) writeStatusAndHeader(code int, final bool) {
	bw := w.c.bw
	var num [8]byte
	_, _ = bw.WriteString("HTTP/1.1 ")
	_, _ = bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
	_ = bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		_, _ = bw.WriteString(text)
	} else {
		_, _ = bw.WriteString("status code ")
		_, _ = bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
	}
	_, _ = bw.WriteString("\r\n")

	var small [16]string
	keys := small[:0]
	for k := range w.hdr {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ { // insertion sort: a handful of keys
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	for _, k := range keys {
		vs := w.hdr[k]
		if final {
			switch k {
			case "Transfer-Encoding": // framing is ours
				continue
			case "Content-Length":
				if len(vs) > 0 {
					n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
					if err != nil || n < 0 {
						w.c.s.logf("http: invalid Content-Length of %q", vs[0])
						continue
					}
					w.clen = n
				}
			case "Content-Type":
				w.haveType = true
			case "Date":
				w.haveDate = true
			case "Connection":
				for _, v := range vs {
					if hasToken(v, "close") {
						w.haveConnClose, w.closeAfter = true, true
					}
				}
			}
		}
		if !allIn(k, &tokenChars) || k == "" {
			continue
		}
		for _, v := range vs {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			writeValue(bw, v)
			_, _ = bw.WriteString("\r\n")
		}
	}
}

// writeValue writes a header value as net/http does: CR and LF become
// spaces, surrounding space and tab are trimmed.
func writeValue(bw *bufio.Writer, v string) {
	v = trimOWS(v)
	if !strings.ContainsAny(v, "\r\n") {
		_, _ = bw.WriteString(v)
		return
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		_ = bw.WriteByte(c)
	}
}

// hasToken reports whether the comma-separated list v has token tok
// (ASCII case-insensitive).
func hasToken(v, tok string) bool {
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if asciiEqualFold(trimOWS(t), tok) {
			return true
		}
	}
	return false
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if w.finished {
		return 0, errWriteAfterFinish
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.clen >= 0 && w.written+int64(len(p)) > w.clen {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.sent {
		if w.clen < 0 && len(w.buf)+len(p) <= chunkingAfter {
			// Kept: it may yet all go out with a Content-Length.
			w.buf = append(w.buf, p...)
			return len(p), nil
		}
		first := w.buf
		if len(first) == 0 {
			first = p
		}
		w.sendHead(false, first)
	}
	w.writeBody(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// sendHead completes the head with what net/http adds (Content-Type
// sniffed from first, Date, the framing, Connection: close) and writes
// the body kept so far. final: the handler has returned, so a body of
// unknown length is what was kept.
func (w *response) sendHead(final bool, first []byte) {
	bw := w.c.bw
	allowed := bodyAllowed(w.status)
	if !w.haveType && allowed && len(first) > 0 {
		_, _ = bw.WriteString("Content-Type: ")
		_, _ = bw.WriteString(http.DetectContentType(first))
		_, _ = bw.WriteString("\r\n")
	}
	if !w.haveDate {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.WriteString(date())
		_, _ = bw.WriteString("\r\n")
	}
	if allowed && w.clen < 0 {
		if final {
			var num [20]byte
			_, _ = bw.WriteString("Content-Length: ")
			_, _ = bw.Write(strconv.AppendInt(num[:0], int64(len(w.buf)), 10))
			_, _ = bw.WriteString("\r\n")
		} else {
			w.chunked = true
			_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
		}
	}
	if w.bd != nil && (w.bd.err != nil || w.bd.remain > maxDiscard) || w.c.s.closing.Load() {
		// The request body failed, or the rest of it is not worth
		// reading to keep the connection, or the server is shutting down.
		w.closeAfter = true
	}
	if w.closeAfter && !w.haveConnClose {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	_, _ = bw.WriteString("\r\n")
	w.sent = true
	if len(w.buf) > 0 {
		w.writeBody(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *response) writeBody(p []byte) {
	if len(p) == 0 || w.err != nil {
		return
	}
	bw := w.c.bw
	if w.chunked {
		var num [16]byte
		_, _ = bw.Write(strconv.AppendInt(num[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		_, _ = bw.Write(p)
		_, err := bw.WriteString("\r\n")
		w.fail(err)
		return
	}
	_, err := bw.Write(p)
	w.fail(err)
}

func (w *response) fail(err error) {
	if err != nil && w.err == nil {
		w.err = err
		w.closeAfter = true
	}
}

// FlushError sends what the handler wrote so far (the head first: with no
// Content-Length set, the body is then chunked).
func (w *response) FlushError() error {
	if w.finished {
		return errWriteAfterFinish
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		w.sendHead(false, w.buf)
	}
	w.fail(w.c.bw.Flush())
	return w.err
}

func (w *response) Flush() { _ = w.FlushError() }

// SetReadDeadline and SetWriteDeadline serve http.ResponseController.
func (w *response) SetReadDeadline(t time.Time) error {
	if w.finished {
		return errWriteAfterFinish
	}
	if w.bd != nil {
		w.bd.netRead = true // the handler bounds the body's reads from now on
	}
	w.c.setReadDeadline(t)
	return nil
}

func (w *response) SetWriteDeadline(t time.Time) error {
	if w.finished {
		return errWriteAfterFinish
	}
	w.c.wdl = !t.IsZero()
	return w.c.nc.SetWriteDeadline(t)
}

// EnableFullDuplex: reading the body while writing works here anyway.
func (w *response) EnableFullDuplex() error { return nil }

// finish completes the response after the handler returned.
func (w *response) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		w.sendHead(true, w.buf)
	} else if w.clen >= 0 && w.written < w.clen && bodyAllowed(w.status) {
		w.closeAfter = true // the client waits for bytes that will not come
	}
	if w.chunked && w.err == nil {
		_, _ = w.c.bw.WriteString("0\r\n\r\n")
	}
	w.fail(w.c.bw.Flush())
	w.finished = true
}

var _ io.ReadCloser = (*body)(nil)

// body is the body of a request with a Content-Length, read from the
// connection's buffer.
type body struct {
	c       *conn
	remain  int64
	closed  bool
	err     error // a read failed: the connection is done
	netRead bool  // a read went to the network (its deadline is set)
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.remain == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	if len(p) == 0 {
		return 0, nil
	}
	c := b.c
	if c.br.Buffered() == 0 && !b.netRead {
		// The body did not come whole with the head: the server's
		// ReadTimeout bounds it from the request's start to this read,
		// as net/http does (reqbody renews it before later reads); the
		// idle deadline must not cut it.
		b.netRead = true
		if d := c.s.Fallback.ReadTimeout; d > 0 {
			c.setReadDeadline(c.start.Add(d))
		} else if !c.rdl.IsZero() {
			c.setReadDeadline(time.Time{})
		}
	}
	n, err := c.br.Read(p)
	b.remain -= int64(n)
	if b.remain == 0 {
		c.bodyEnded()
		return n, io.EOF
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		b.err = err
	}
	return n, err
}

func (b *body) Close() error {
	b.closed = true
	return nil
}

// drain reads and discards what the handler left of the body, to keep
// the connection; it reports whether the connection can go on.
func (b *body) drain() bool {
	if b.c == nil || b.remain == 0 {
		return b.err == nil
	}
	if b.err != nil || b.remain > maxDiscard {
		return false
	}
	c := b.c
	if d := c.s.Fallback.ReadTimeout; d > 0 {
		c.setReadDeadline(time.Now().Add(d))
	}
	_, err := c.br.Discard(int(b.remain))
	return err == nil
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// date is the Date header's value, made once a second.
func date() string {
	now := time.Now()
	sec := now.Unix()
	if e := dateCache.Load(); e != nil && e.sec == sec {
		return e.s
	}
	e := &dateEntry{sec: sec, s: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(e)
	return e.s
}

type dateEntry struct {
	sec int64
	s   string
}

var dateCache atomic.Pointer[dateEntry]
