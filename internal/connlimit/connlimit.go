// Package connlimit bounds the client connections of Switchboard's HTTP
// servers, all listeners together (Limit), and keeps a reserve of
// connections on which only the probes are served (Gate), so that neither
// running out of file descriptors nor a flood of connections can stop
// /healthz.
package connlimit

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/backoff"
)

// Limit bounds the client connections the gateway's HTTP servers hold
// open, together, so that the process cannot run out of file descriptors
// (which stops every accept, /healthz included) and no flood can lock the
// probes out.
//
// At the cap (max) a new connection still gets in: the connection idle
// longest (kept alive between requests, or opened without a complete
// request head: net/http counts a connection busy only once its head is
// read, so a connection that sent one byte is idle here) is closed for
// it, the way a browser would lose a pooled connection. When every
// connection under the cap has a request in progress, the new one goes to
// the reserve: up to reserve connections beyond the cap on which only the
// gateway's probes and scrapes are served (Gate; anything else
// gets 503 and the connection is closed), so that /healthz, /readyz,
// /health and /metrics answer while long requests fill the cap. Only when
// the reserve is busy too does accepting wait, for one to close or go
// idle. With perAddr set, one client address holds at most that many
// connections: over it its own connection idle longest is closed for the
// new one, or the new one goes to the reserve.
//
// An accept that fails for want of descriptors (EMFILE, ENFILE: children
// and upstream connections use them too) frees an idle connection and is
// retried with a backoff; it never stops the server.
//
// The servers report connection states through connState (http.Server's
// ConnState); connections are counted from Accept until closed. The log
// lines of evictions and refusals are rate-limited (one per logInterval,
// with the count since the last).
type Limit struct {
	max, reserve, perAddr int // perAddr 0: no bound per address
	log                   *slog.Logger

	mu      sync.Mutex
	conns   map[*limitedConn]struct{} // open connections
	nMain   int                       // of conns, those under the cap (not reserved)
	nRes    int                       // of conns, those in the reserve
	byAddr  map[string]int            // open connections per client IP
	added   int                       // connections counted in, ever (tests wait on it)
	changed chan struct{}             // nil, or made by a waiter and closed (then nil again) when one is added, closes, or goes idle or busy
	evicted logEvery                  // idle connections closed for new ones
	refused logEvery                  // new connections closed at once, every one being busy
}

// logInterval is how often Limit logs each of its events at most.
const logInterval = 10 * time.Second

// New returns a limit of max connections (negative: no cap),
// reserve more for the probes, and perAddr per client address (0: none).
func New(max, reserve, perAddr int, log *slog.Logger) *Limit {
	if max < 0 {
		max = math.MaxInt
	}
	return &Limit{max: max, reserve: reserve, perAddr: perAddr, log: log,
		conns: map[*limitedConn]struct{}{}, byAddr: map[string]int{},
		evicted: logEvery{interval: logInterval}, refused: logEvery{interval: logInterval}}
}

// limitedConn is a connection counted by a Limit.
type limitedConn struct {
	net.Conn
	lim      *Limit
	addr     string    // the client's IP
	reserved bool      // set once by add: in the reserve, only probes are served
	idle     bool      // guarded by lim.mu: no request in progress
	since    time.Time // guarded by lim.mu: when it last went idle
	once     sync.Once
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	c.once.Do(func() { c.lim.remove(c) })
	return c.Conn.Close()
}

func (l *Limit) remove(c *limitedConn) {
	l.mu.Lock()
	if _, ok := l.conns[c]; ok {
		l.dropLocked(c)
		l.signalLocked()
	}
	l.mu.Unlock()
}

// dropLocked takes c out of the counts.
func (l *Limit) dropLocked(c *limitedConn) {
	delete(l.conns, c)
	if c.reserved {
		l.nRes--
	} else {
		l.nMain--
	}
	if n := l.byAddr[c.addr] - 1; n > 0 {
		l.byAddr[c.addr] = n
	} else {
		delete(l.byAddr, c.addr)
	}
}

// signalLocked wakes the waiters, if any (one is closed, added, or goes
// idle or busy): the channel is made only when one waits, so the request path
// (every request goes idle after) allocates nothing here.
func (l *Limit) signalLocked() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// changedLocked returns the channel signalLocked closes next.
func (l *Limit) changedLocked() <-chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// ConnState is the servers' ConnState hook.
func (l *Limit) ConnState(nc net.Conn, st http.ConnState) {
	c := asLimited(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		c.idle, c.since = true, time.Now()
		l.signalLocked()
	case http.StateActive, http.StateHijacked:
		c.idle = false // a hijacked one is its new owner's until closed
		l.signalLocked()
	}
}

// asLimited returns the limitedConn under nc (HTTPS: TLS runs over it,
// tls.go), or nil.
func asLimited(nc net.Conn) *limitedConn {
	for {
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	c, _ := nc.(*limitedConn)
	return c
}

// oldestIdleLocked returns the connection idle longest that ok accepts,
// or nil.
func (l *Limit) oldestIdleLocked(ok func(*limitedConn) bool) *limitedConn {
	var old *limitedConn
	for c := range l.conns {
		if c.idle && (old == nil || c.since.Before(old.since)) && ok(c) {
			old = c
		}
	}
	return old
}

func isMain(c *limitedConn) bool     { return !c.reserved }
func isReserved(c *limitedConn) bool { return c.reserved }
func anyConn(*limitedConn) bool      { return true }

// roomLocked reports whether a connection could be taken now: under the
// cap, an idle one to close for it, or room in the reserve.
func (l *Limit) roomLocked() bool {
	return l.nMain < l.max || l.nRes < l.reserve ||
		l.oldestIdleLocked(anyConn) != nil
}

// wait returns once there is room for a connection, or false when done is
// closed.
func (l *Limit) wait(done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if l.roomLocked() {
			l.mu.Unlock()
			return true
		}
		ch := l.changedLocked()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// evictLocked takes v out of the count for the caller to close (outside
// the lock).
func (l *Limit) evictLocked(v *limitedConn) {
	l.dropLocked(v)
	v.once.Do(func() {}) // its Close must not count it out again
}

// add counts nc in, closing the idle connections it displaces. It returns
// nil, having closed nc, when there is no room for it (every connection
// became busy since wait, or its address is at its bound and the reserve
// is busy).
func (l *Limit) add(nc net.Conn) *limitedConn {
	c := &limitedConn{Conn: nc, lim: l, addr: remoteIP(nc), idle: true, since: time.Now()} // new: idle until its first request
	var victims []*limitedConn
	// take closes the idle connection longest that ok accepts, if any, for c.
	take := func(ok func(*limitedConn) bool) bool {
		v := l.oldestIdleLocked(ok)
		if v != nil {
			l.evictLocked(v)
			victims = append(victims, v)
		}
		return v != nil
	}
	l.mu.Lock()
	main := true
	if l.perAddr > 0 && l.byAddr[c.addr] >= l.perAddr {
		main = take(func(o *limitedConn) bool { return o.addr == c.addr })
	}
	if main && l.nMain >= l.max {
		main = take(isMain)
	}
	ok := main || l.nRes < l.reserve || take(isReserved)
	if ok {
		c.reserved = !main
		l.conns[c] = struct{}{}
		if main {
			l.nMain++
		} else {
			l.nRes++
		}
		l.byAddr[c.addr]++
		l.added++
		l.signalLocked()
	}
	now := time.Now()
	nEvicted, logEvicted := 0, false
	if len(victims) > 0 {
		nEvicted, logEvicted = l.evicted.add(now, len(victims))
	}
	nRefused, logRefused := 0, false
	if !ok {
		nRefused, logRefused = l.refused.add(now, 1)
	}
	l.mu.Unlock()
	for _, v := range victims {
		_ = v.Conn.Close()
	}
	if logEvicted {
		l.log.Info("connection cap reached: closed the connections idle longest for new ones", "max_conns", l.max,
			"per_address", l.perAddr, "closed", nEvicted, "last_remote", victims[0].RemoteAddr().String())
	}
	if !ok {
		_ = nc.Close()
		if logRefused {
			l.log.Warn("connection cap reached and every connection busy: new connections refused", "max_conns", l.max,
				"reserved", l.reserve, "per_address", l.perAddr, "refused", nRefused)
		}
		return nil
	}
	return c
}

// remoteIP is the IP of nc's peer (its whole address when it has none).
func remoteIP(nc net.Conn) string {
	a := nc.RemoteAddr()
	if ta, ok := a.(*net.TCPAddr); ok {
		return string(ta.IP.To16())
	}
	if a == nil {
		return ""
	}
	return a.String()
}

// logEvery lets one log line through per interval, with the count of the
// events since the line before. Its owner's lock guards it. Events after
// the last line are counted into the next one, whenever that comes.
type logEvery struct {
	interval time.Duration
	last     time.Time // when the last line went out
	n        int       // events since
}

// add counts n events and reports whether a line is due now, with the
// count it should carry.
func (e *logEvery) add(now time.Time, n int) (count int, due bool) {
	e.n += n
	if !e.last.IsZero() && now.Sub(e.last) < e.interval {
		return 0, false
	}
	count, e.n, e.last = e.n, 0, now
	return count, true
}

// Listen wraps ln so that its connections are counted.
func (l *Limit) Listen(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, lim: l, done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	lim       *Limit
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// Accept waits for room, then accepts.
func (ll *limitListener) Accept() (net.Conn, error) {
	wait := backoff.Backoff{Base: 5 * time.Millisecond, Max: time.Second}
	for {
		if !ll.lim.wait(ll.done) {
			return nil, net.ErrClosed
		}
		nc, err := ll.Listener.Accept()
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
				return nil, err // net/http backs off what is temporary
			}
			ll.lim.mu.Lock()
			victim := ll.lim.oldestIdleLocked(func(*limitedConn) bool { return true })
			if victim != nil {
				ll.lim.evictLocked(victim)
			}
			ll.lim.mu.Unlock()
			if victim != nil {
				_ = victim.Conn.Close()
			}
			if wait.Waits() == 0 {
				ll.lim.log.Warn("accept: out of file descriptors; closing idle connections and retrying", "err", err)
			}
			select {
			case <-time.After(wait.Next()):
			case <-ll.done:
				return nil, net.ErrClosed
			}
			continue
		}
		wait.Reset()
		if c := ll.lim.add(nc); c != nil {
			return c, nil
		}
	}
}

func (ll *limitListener) Close() error {
	ll.closeOnce.Do(func() { close(ll.done) })
	return ll.Listener.Close()
}

// connKey is the context key of a request's connection (serveAll's
// ConnContext).
type connKey struct{}

// ProbePath reports the paths served on a reserved connection: the
// gateway's probes and scrapes, and AgentCore's /ping.
func ProbePath(p string) bool {
	switch p {
	case "/healthz", "/readyz", "/health", "/metrics", "/ping":
		return true
	}
	return false
}

// Gate serves a reserved connection's probes and answers anything
// else 503 and closes the connection (its body unread). It also closes the
// connection after a request that had a Transfer-Encoding: net/http drops
// a Content-Length sent with one (RFC 9112 §6.3) without telling the
// handler, and RFC 9112 §6.1 asks that the connection of such a request be
// closed; MCP clients send Content-Length.
func Gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		if c, _ := r.Context().Value(connKey{}).(*limitedConn); c != nil && c.reserved && !ProbePath(r.URL.Path) {
			// No body is read: without a deadline net/http would wait
			// to drain it (up to 256 KiB) before closing.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"switchboard is at its connection cap: every connection is busy; retry"}}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ConnContext is the servers' ConnContext: it puts the request's
// limitedConn in its context, for Gate.
func ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c := asLimited(nc); c != nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Counts are a Limit's connection counts (Wait).
type Counts struct {
	Main, Reserved int // open connections under the cap and in the reserve
	BusyMain       int // of Main, those with a request in progress
	Added          int // connections counted in since the Limit was made
}

// Wait waits until cond holds for l's counts, and returns them; or ctx's
// error (context.Cause) with the last counts.
func (l *Limit) Wait(ctx context.Context, cond func(Counts) bool) (Counts, error) {
	for {
		l.mu.Lock()
		c := Counts{Main: l.nMain, Reserved: l.nRes, Added: l.added}
		for lc := range l.conns {
			if !lc.reserved && !lc.idle {
				c.BusyMain++
			}
		}
		if cond(c) {
			l.mu.Unlock()
			return c, nil
		}
		ch := l.changedLocked()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return c, context.Cause(ctx)
		}
	}
}
