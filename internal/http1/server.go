// Package http1 serves the gateway's hot endpoint over HTTP/1.1 itself and
// hands every other connection to net/http.
//
// Why: at one call in flight, net/http's request handling was about half
// of the gateway's instructions per call and two of its five goroutine
// wake-ups (docs/performance.md, "Third round"): a background read
// goroutine started and stopped per request to notice a client going
// away, six read-deadline changes, header parsing into canonicalised map
// keys, a header map clone per response and some twenty allocations.
// This server does the same job for the one shape of request that MCP
// clients send again and again (a POST, GET or DELETE of /{dest}/mcp with
// a Content-Length body) at a fraction of the cost:
//
//   - the request head is parsed in place into one string, with known
//     header names as static strings (parse.go);
//   - a read deadline is set only when the connection waits for a request
//     (and renewed at most every sixteenth of the idle timeout), for a
//     head that did not come whole, and for a body that is not already
//     buffered;
//   - a client going away is noticed the way net/http does it (a read of
//     the connection while the handler runs), but only for a request
//     still running after [WatchDelay]: the quick calls that make up
//     nearly all of the traffic start no goroutine;
//   - the response head is encoded once, at WriteHeader, with no header
//     clone, and a response whose length is known goes out in one write.
//
// Measured on the gateway (docs/performance.md, "Fourth round"; 64 B echo,
// one call in flight): 69.7k instructions per call against 110.2k with
// net/http (cachegrind), 22 allocations against 40, a fifth less gateway
// CPU per call (BenchmarkEcho/c1 against c1/obs=nethttp).
//
// Anything outside that shape is not parsed further: the connection, with
// the bytes already read, is handed to the fallback http.Server, which
// serves it from then on, so every odd or hostile request meets net/http
// exactly as before (parse.go lists what is taken; FuzzParseHead checks
// that whatever is taken, net/http reads the same way). TLS listeners are
// not served here at all.
package http1

import (
	"bufio"
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// WatchDelay is how long a request runs before its connection is watched
// for the client going away (which cancels the request's context).
const WatchDelay = 100 * time.Millisecond

// bufSize is the size of a connection's read and write buffers. A request
// head must fit in the read buffer to be served here.
const bufSize = 4 << 10

// maxDiscard is the most of an unread request body read and discarded to
// keep a connection; over it the connection is closed (net/http's figure).
const maxDiscard = 256 << 10

// Server serves HTTP/1.1 connections: the requests Take accepts with
// Handler, everything else through Fallback.
//
// The zero value is not usable: Handler, Take and Fallback are required.
type Server struct {
	// Handler serves the requests taken.
	Handler http.Handler
	// Take reports whether a request (its method and path) is served
	// here; the connection of the first one that is not goes to Fallback.
	Take func(method, path string) bool
	// Fallback serves handed-over connections. Its ReadHeaderTimeout,
	// ReadTimeout and IdleTimeout bound this server's connections too, its
	// ConnState hook hears of them, its ErrorLog gets this server's
	// messages, and requests' contexts carry it under
	// http.ServerContextKey.
	Fallback *http.Server

	mu       sync.Mutex
	conns    map[*conn]struct{} // guarded by mu: open connections served here
	lns      []net.Listener     // guarded by mu: being served
	handoffs []*handoff         // guarded by mu: one per Serve
	closing  atomic.Bool        // Shutdown or Close was called
}

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on ln until Shutdown or Close, serving each in
// its own goroutine; handed-over connections are served by Fallback.Serve,
// run on a listener of its own for the time of this call.
func (s *Server) Serve(ln net.Listener) error {
	ho := &handoff{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.lns = append(s.lns, ln)
	s.handoffs = append(s.handoffs, ho)
	s.mu.Unlock()

	fb := make(chan struct{})
	go func() { // ends when ho closes (Shutdown, Close or this Serve returning)
		defer close(fb)
		_ = s.Fallback.Serve(ho)
		ho.Close() // Fallback stopped on its own: no more hand-overs
	}()
	defer func() {
		ho.Close()
		<-fb
	}()

	base := context.WithValue(context.Background(), http.ServerContextKey, s.Fallback)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() { // as net/http: back off and go on
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("http1: accept error: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := &conn{s: s, nc: nc, ho: ho}
		c.ctx = context.WithValue(base, http.LocalAddrContextKey, nc.LocalAddr())
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			_ = nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.connState(nc, http.StateNew)
		go c.serve()
	}
}

// Shutdown stops accepting, closes idle connections, lets the requests in
// progress finish (their connections then close) and shuts Fallback down,
// waiting for both until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopListening()
	fbErr := s.Fallback.Shutdown(ctx)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() == 0 {
			return fbErr
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes the listeners and every connection at once, Fallback's too.
func (s *Server) Close() error {
	s.stopListening()
	err := s.Fallback.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	return err
}

func (s *Server) stopListening() {
	s.mu.Lock()
	s.closing.Store(true)
	lns, hos := s.lns, s.handoffs
	s.lns, s.handoffs = nil, nil
	s.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	for _, ho := range hos {
		ho.Close()
	}
}

// closeIdle closes the connections waiting for a request and returns how
// many are left.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosing) {
			_ = c.nc.Close()
		}
	}
	return len(s.conns)
}

func (s *Server) connState(nc net.Conn, st http.ConnState) {
	if h := s.Fallback.ConnState; h != nil {
		h(nc, st)
	}
}

func (s *Server) logf(format string, args ...any) {
	if l := s.Fallback.ErrorLog; l != nil {
		l.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// connection states, for Shutdown
const (
	stateActive  = iota // reading a request or serving one
	stateIdle           // waiting for a request with nothing buffered
	stateClosing        // closed by Shutdown while idle
)

// conn is one client connection served here.
type conn struct {
	s   *Server
	nc  net.Conn
	ho  *handoff
	ctx context.Context // requests' parent: the server and the local address

	br *bufio.Reader
	bw *bufio.Writer

	state  atomic.Int32 // stateActive, stateIdle, stateClosing
	remote string       // nc.RemoteAddr(), as a string once
	rdl    time.Time    // the read deadline last set (by the conn goroutine, or the watcher while it owns reads)
	rdlSet time.Time    // when rdl was set for an idle wait (for the renewal slack)
	buf    []byte       // a response's body before its head is sent; reused
	start  time.Time    // when the current request's head began to arrive
	wdl    bool         // a handler set a write deadline (cleared after its request)

	// The watch of a running request for the client going away; mu
	// guards the fields below it. The timer is made once and reset per
	// request; its function starts the watch in its own goroutine, which
	// the conn goroutine stops and waits for when the handler returns.
	mu       sync.Mutex
	watchT   *time.Timer
	ex       *exchange     // the request being served; nil between requests
	bodyDone bool          // ex's body was read to its end (or it had none)
	due      bool          // the delay passed before the body was read: watch once it is
	watching chan struct{} // non-nil while a watch runs; closed when it ends
	abort    bool          // the conn goroutine is stopping the watch
	gone     bool          // the watch saw the client go away
}

// serve serves c's requests until it closes or is handed over.
func (c *conn) serve() {
	s := c.s
	c.remote = c.nc.RemoteAddr().String()
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(c.nc)
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(c.nc)
	handed := false
	defer func() {
		if c.watchT != nil {
			c.watchT.Stop()
		}
		c.bw.Reset(nil)
		writers.Put(c.bw)
		if !handed {
			c.br.Reset(nil)
			readers.Put(c.br)
			_ = c.nc.Close()
			s.connState(c.nc, http.StateClosed)
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	for {
		h, res := c.readHead()
		switch res {
		case headLeave:
			handed = true
			c.handOver()
			return
		case headMore: // closed, timed out, or shutting down
			return
		}
		if !s.Take(h.method, h.target) {
			handed = true
			c.handOver()
			return
		}
		_, _ = c.br.Discard(h.n)
		if !c.serveRequest(&h) || s.closing.Load() {
			return
		}
		s.connState(c.nc, http.StateIdle)
	}
}

// readHead returns the next request head: headOK with the head at the
// start of br (not consumed), headLeave for one to hand over (nothing consumed), or headMore
// when the connection is done.
func (c *conn) readHead() (head, int) {
	var start time.Time // when the first byte of this head was at hand
	for {
		n := c.br.Buffered()
		if n > 0 && start.IsZero() {
			start = time.Now()
			if c.state.Load() != stateActive && !c.state.CompareAndSwap(stateIdle, stateActive) {
				return head{}, headMore // closed by Shutdown
			}
			c.s.connState(c.nc, http.StateActive) // as net/http: a request has begun
		}
		b, _ := c.br.Peek(n)
		h, res := parseHead(b)
		switch res {
		case headOK:
			c.start = start
			return h, headOK
		case headLeave:
			return h, headLeave
		}
		if n == bufSize {
			return head{}, headLeave // a head longer than we take: net/http's
		}
		if n == 0 {
			if c.s.closing.Load() {
				return head{}, headMore
			}
			c.idleDeadline()
			c.state.Store(stateIdle)
			if c.s.closing.Load() && c.state.CompareAndSwap(stateIdle, stateClosing) {
				return head{}, headMore
			}
		} else if d := c.s.Fallback.ReadHeaderTimeout; d > 0 {
			if dl := start.Add(d); c.rdl.IsZero() || dl.Before(c.rdl) {
				c.setReadDeadline(dl)
			}
		}
		if _, err := c.br.Peek(n + 1); err != nil && c.br.Buffered() == n {
			return head{}, headMore // closed, reset or timed out: nothing to answer (as net/http)
		}
	}
}

// idleDeadline bounds the wait for the next request by the idle timeout.
// A deadline set for this less than a sixteenth of the timeout ago is
// kept: a connection busy with back-to-back requests changes its
// deadline a few times a minute, not per request.
func (c *conn) idleDeadline() {
	d := c.s.Fallback.IdleTimeout
	if d <= 0 {
		d = c.s.Fallback.ReadTimeout
	}
	if d <= 0 {
		if !c.rdl.IsZero() {
			c.setReadDeadline(time.Time{})
		}
		return
	}
	now := time.Now()
	if !c.rdlSet.IsZero() && c.rdl.Equal(c.rdlSet.Add(d)) && now.Sub(c.rdlSet) < d/16 {
		return
	}
	c.setReadDeadline(now.Add(d))
	c.rdlSet = now
}

func (c *conn) setReadDeadline(t time.Time) {
	_ = c.nc.SetReadDeadline(t)
	c.rdl = t
}

// handOver gives the connection, with what br holds, to Fallback.
func (c *conn) handOver() {
	hc := &handedConn{Conn: c.nc, br: c.br}
	if !c.ho.push(hc) {
		_ = c.nc.Close()
		c.s.connState(c.nc, http.StateClosed)
	}
}

// serveRequest serves one request; it reports whether the connection
// stays open for another.
func (c *conn) serveRequest(h *head) (keep bool) {
	ex := &exchange{}
	ex.url.Path = h.target
	ctx, cancel := context.WithCancel(c.ctx)
	ex.cancel = cancel
	tmp := http.Request{
		Method: h.method, URL: &ex.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header, ContentLength: h.contentLength, Host: h.host,
		RemoteAddr: c.remote, RequestURI: h.target, Close: h.close,
	}
	w := &ex.w
	*w = response{c: c, clen: -1, closeAfter: h.close || c.s.closing.Load(), buf: c.buf[:0]}
	if h.contentLength > 0 {
		ex.body = body{c: c, remain: h.contentLength}
		tmp.Body = &ex.body
		w.bd = &ex.body
	} else {
		tmp.Body = http.NoBody
	}
	r := tmp.WithContext(ctx)
	w.req = r

	c.mu.Lock()
	c.ex, c.bodyDone, c.due, c.gone = ex, h.contentLength == 0, false, false
	c.mu.Unlock()
	if c.watchT == nil {
		c.watchT = time.AfterFunc(WatchDelay, c.watchFire)
	} else {
		c.watchT.Reset(WatchDelay)
	}

	ok := c.runHandler(w, r)

	c.watchT.Stop()
	c.mu.Lock()
	c.ex = nil
	watching := c.watching
	if watching != nil {
		c.abort = true
		_ = c.nc.SetReadDeadline(aLongTimeAgo)
	}
	c.mu.Unlock()
	if watching != nil {
		<-watching
		c.mu.Lock()
		c.watching, c.abort = nil, false
		c.mu.Unlock()
		// The abort left a deadline in the past; the watch may have read
		// the start of the next request, which must not meet it.
		c.setReadDeadline(time.Time{})
		c.rdlSet = time.Time{}
	}
	cancel()
	if !ok {
		return false
	}
	w.finish()
	c.buf = w.buf[:0]
	if c.wdl {
		_ = c.nc.SetWriteDeadline(time.Time{})
		c.wdl = false
	}
	if w.err != nil || w.closeAfter || c.gone {
		return false
	}
	return ex.body.drain()
}

// runHandler runs the handler, recovering a panic as net/http does (the
// connection is then closed); it reports whether the handler returned.
func (c *conn) runHandler(w *response, r *http.Request) (ok bool) {
	defer func() {
		if err := recover(); err != nil && err != http.ErrAbortHandler {
			const size = 64 << 10
			buf := make([]byte, size)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.logf("http: panic serving %v: %v\n%s", c.remote, err, buf)
		}
	}()
	c.s.Handler.ServeHTTP(w, r)
	return true
}

var aLongTimeAgo = time.Unix(1, 0)

// testHookWatch and testHookWatched, when set (by tests), are called as a
// watch begins and when its read returns.
var (
	testHookWatch   func()
	testHookWatched func(error)
)

// watchFire is the watch timer's function: it watches the connection if
// the request is still running and its body has been read.
func (c *conn) watchFire() {
	c.mu.Lock()
	if c.ex == nil || c.watching != nil {
		c.mu.Unlock()
		return
	}
	if !c.bodyDone {
		c.due = true
		c.mu.Unlock()
		return
	}
	done := c.startWatchLocked()
	c.mu.Unlock()
	c.watch(done)
}

// bodyEnded is called when the request body has been read to its end.
func (c *conn) bodyEnded() {
	c.mu.Lock()
	c.bodyDone = true
	if !c.due || c.watching != nil || c.ex == nil {
		c.mu.Unlock()
		return
	}
	done := c.startWatchLocked()
	c.mu.Unlock()
	go c.watch(done)
}

func (c *conn) startWatchLocked() chan struct{} {
	done := make(chan struct{})
	c.watching = done
	_ = c.nc.SetReadDeadline(time.Time{})
	return done
}

// watch reads from the connection while a request runs: an error other
// than the conn goroutine's abort means the client went away, and the
// request's context is cancelled; a byte (a pipelined request) stays in
// br for the next head and ends the watch.
func (c *conn) watch(done chan struct{}) {
	defer close(done)
	if testHookWatch != nil {
		testHookWatch()
	}
	_, err := c.br.Peek(1)
	if testHookWatched != nil {
		testHookWatched(err)
	}
	if err == nil || isTimeout(err) { // more bytes, or the abort (or a handler's deadline)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.abort || c.ex == nil {
		return
	}
	c.gone = true
	c.ex.cancel()
}

// exchange is what one request costs in allocations, together: its URL,
// its response writer and its body.
type exchange struct {
	url    url.URL
	w      response
	body   body
	cancel context.CancelFunc // the request context's
}

// handoff is the listener Fallback serves: connections pushed to it by
// the conns that leave their client to net/http.
type handoff struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }

// push gives c to Fallback, or reports false when it serves no more.
func (h *handoff) push(c net.Conn) bool {
	select {
	case h.conns <- c:
		return true
	case <-h.done:
		return false
	}
}

// handedConn is a connection handed to net/http: what was read from it
// before comes first.
type handedConn struct {
	net.Conn
	br *bufio.Reader // nil once drained
}

func (c *handedConn) Read(p []byte) (int, error) {
	if c.br != nil {
		if c.br.Buffered() > 0 {
			return c.br.Read(p)
		}
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection underneath, for ConnState hooks that
// look for their own connection type.
func (c *handedConn) NetConn() net.Conn { return c.Conn }

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)
