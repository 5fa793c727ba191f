package gateway

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// connLimit bounds the client connections the gateway's HTTP servers hold
// open, together, so that the process cannot run out of file descriptors
// (which stops every accept, /healthz included). At the cap a new
// connection still gets in: the connection idle longest (kept alive
// between requests, or opened and never used) is closed for it, the way
// a browser would lose a pooled connection. Only when every connection has
// a request in progress does accepting wait, for one to close or go idle.
// An accept that fails for want of descriptors (EMFILE, ENFILE: children
// and upstream connections use them too) frees an idle connection and is
// retried with a backoff; it never stops the server.
//
// The servers report connection states through connState (http.Server's
// ConnState); connections are counted from Accept until closed.
type connLimit struct {
	max int
	log *slog.Logger

	mu      sync.Mutex
	conns   map[*limitedConn]struct{} // open connections
	changed chan struct{}             // nil, or made by a waiter and closed (then nil again) when one closes or goes idle
	refused int                       // connections closed at once, every one being busy (logged now and then)
}

// newConnLimit returns a limit of max connections (see Options.MaxConns).
func newConnLimit(max int, log *slog.Logger) *connLimit {
	return &connLimit{max: max, log: log, conns: map[*limitedConn]struct{}{}}
}

// limitedConn is a connection counted by a connLimit.
type limitedConn struct {
	net.Conn
	lim   *connLimit
	idle  bool      // guarded by lim.mu: no request in progress
	since time.Time // guarded by lim.mu: when it last went idle
	once  sync.Once
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	c.once.Do(func() { c.lim.remove(c) })
	return c.Conn.Close()
}

func (l *connLimit) remove(c *limitedConn) {
	l.mu.Lock()
	if _, ok := l.conns[c]; ok {
		delete(l.conns, c)
		l.signalLocked()
	}
	l.mu.Unlock()
}

// signalLocked wakes the waiters, if any: the channel is made only when
// one waits, so the request path (every request goes idle after) allocates
// nothing here.
func (l *connLimit) signalLocked() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// connState is the servers' ConnState hook.
func (l *connLimit) connState(nc net.Conn, st http.ConnState) {
	// HTTPS: TLS runs over the limited conn (tls.go).
	for {
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	c, ok := nc.(*limitedConn)
	if !ok {
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
	}
}

// oldestIdleLocked returns the connection idle longest, or nil.
func (l *connLimit) oldestIdleLocked() *limitedConn {
	var old *limitedConn
	for c := range l.conns {
		if c.idle && (old == nil || c.since.Before(old.since)) {
			old = c
		}
	}
	return old
}

// evictLocked takes the connection idle longest out of the count and
// returns it for the caller to close (outside the lock), or nil.
func (l *connLimit) evictLocked() *limitedConn {
	c := l.oldestIdleLocked()
	if c != nil {
		delete(l.conns, c)
		c.once.Do(func() {}) // its Close must not count it out again
	}
	return c
}

// wait returns once there is room for a connection (below the cap, or an
// idle one to close for it), or false when done is closed.
func (l *connLimit) wait(done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if len(l.conns) < l.max || l.oldestIdleLocked() != nil {
			l.mu.Unlock()
			return true
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// add counts nc in, closing the idle connection it displaces at the cap.
// It returns nil, having closed nc, when every connection is busy (they
// became so since wait).
func (l *connLimit) add(nc net.Conn) *limitedConn {
	c := &limitedConn{Conn: nc, lim: l, idle: true, since: time.Now()} // new: idle until its first request
	var victim *limitedConn
	var idleFor time.Duration
	l.mu.Lock()
	if len(l.conns) >= l.max {
		if victim = l.evictLocked(); victim != nil {
			idleFor = time.Since(victim.since)
		}
	}
	ok := len(l.conns) < l.max
	if ok {
		l.conns[c] = struct{}{}
	} else {
		l.refused++
	}
	refused := l.refused
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
		l.log.Debug("connection cap reached: closed the connection idle longest", "max_conns", l.max,
			"remote", victim.RemoteAddr().String(), "idle", idleFor.Round(time.Millisecond))
	}
	if !ok {
		_ = nc.Close()
		if refused == 1 || refused%100 == 0 {
			l.log.Warn("connection cap reached and every connection busy: new connections refused", "max_conns", l.max, "refused", refused)
		}
		return nil
	}
	return c
}

// listen wraps ln so that its connections are counted.
func (l *connLimit) listen(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, lim: l, done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	lim       *connLimit
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// Accept waits for room under the cap, then accepts.
func (ll *limitListener) Accept() (net.Conn, error) {
	var backoff time.Duration
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
			victim := ll.lim.evictLocked()
			ll.lim.mu.Unlock()
			if victim != nil {
				_ = victim.Conn.Close()
			}
			if backoff == 0 {
				backoff = 5 * time.Millisecond
				ll.lim.log.Warn("accept: out of file descriptors; closing idle connections and retrying", "err", err)
			} else {
				backoff = min(2*backoff, time.Second)
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ll.done:
				t.Stop()
				return nil, net.ErrClosed
			}
			continue
		}
		backoff = 0
		if c := ll.lim.add(nc); c != nil {
			return c, nil
		}
	}
}

func (ll *limitListener) Close() error {
	ll.closeOnce.Do(func() { close(ll.done) })
	return ll.Listener.Close()
}
