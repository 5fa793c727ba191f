package destination

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/era"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// legacyPool holds the legacy connections that serve translated 2026-07-28
// requests (era.Joiner), one per distinct clientCapabilities: each is
// initialized with exactly the capabilities its clients declared, so the
// server relies on nothing they did not declare (2026-07-28 requires that
// per request).
//
// Each request borrows a member of its connection (Lend) and gives it back
// when it ends (Leave): joining and leaving per request cost more than the
// rest of the translation. A member serves one request at a time, so a
// server→client request, which the connection routes to the one member
// with a call in flight (refusing it when several have), reaches exactly
// the call that raised it; members are upstream.CallBound, so one raised
// with no call in flight is refused at once.
//
// Bounds: at most maxPooled connections. A new capability set retires the
// least recently used connection with no request in flight, ending its
// parked MRTR calls (their requestState then reads as expired) and its
// subscription streams: calls waiting for a client never hold a connection
// another client needs. When every connection has requests in flight the
// request is refused (503, retry later). Each connection keeps at most
// maxIdleMembers members between requests. A connection with nothing lent
// and no stream joined for the pool's idle time is retired too, so a
// server that modern clients stopped using does not keep its process.
type legacyPool struct {
	d   *Destination
	max int // the most connections; zero means maxPooled
	// dropParked ends the parked calls whose member a predicate picks
	// (era.ModernOverLegacy.DropParked); set before the pool is used.
	dropParked func(match func(session.Backend) bool) int

	mu     sync.Mutex
	conns  map[string]*poolConn // guarded by mu; by canonical capabilities
	keys   map[string]string    // guarded by mu; raw capabilities → canonical (bounded)
	tick   uint64               // guarded by mu; the clock of poolConn.used
	closed bool                 // guarded by mu
	// idle is how long a connection may go unused (nothing lent, no
	// stream joined) before it is retired; zero means the destination's
	// session_child_idle_timeout when set, else poolIdle.
	idle  time.Duration
	sweep *time.Timer // guarded by mu: retires idle connections; nil when none is pooled
	// retiring counts retired connections still closing; close waits for
	// them (Add only under mu while !closed).
	retiring sync.WaitGroup
}

// maxPooled bounds the legacy connections kept for modern clients: one per
// distinct set of client capabilities.
const maxPooled = 8

// poolIdle is the default idle time of a pooled connection.
const poolIdle = 5 * time.Minute

// maxIdleMembers bounds the members a connection keeps between requests
// (the most requests in flight at once on it, up to this).
const maxIdleMembers = 64

// maxKeys bounds legacyPool.keys: spellings of capabilities beyond it are
// canonicalised per call.
const maxKeys = 256

// poolConn is one legacy connection of the pool.
type poolConn struct {
	key    string
	up     *upstream.Upstream
	used   uint64        // guarded by pool.mu: the pool's tick at its last use
	free   []*poolMember // guarded by pool.mu: idle members, lent first
	lent   int           // guarded by pool.mu: members out on requests
	parked int           // guarded by pool.mu: of those, waiting for a client's retry
	joined int           // guarded by pool.mu: members joined for streams of their own (Join)
	last   time.Time     // guarded by pool.mu: when it was made or last had nothing lent or joined
}

// poolMember is a member of a pool connection: lent to one request (Lend;
// Leave gives it back) or joined for a stream of its own (Join; Leave
// leaves). Its calls are the destination's (traced when it traces); the
// destination's limits were applied to the 2026-07-28 request already.
type poolMember struct {
	*upstream.Member
	p    *legacyPool
	c    *poolConn
	lend bool

	out, parked bool // guarded by p.mu: lent now; parked (lent only)
}

// boundDown is the downstream of lent members: nothing outlives a request,
// and a server→client request without a call in flight is refused.
type boundDown struct{}

func (boundDown) Deliver(*jsonrpc.Message) {}
func (boundDown) End(error)                {}
func (boundDown) CallBound()               {}

// Lend returns a member of the connection for caps, idle one first.
func (p *legacyPool) Lend(ctx context.Context, caps, info json.RawMessage) (session.Backend, error) {
	p.mu.Lock()
	c, retired, err := p.connLocked(caps)
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	c.lent++
	var m *poolMember
	if n := len(c.free); n > 0 {
		m = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		m.out = true
	}
	p.mu.Unlock()
	if retired != nil {
		p.retire(retired)
	}
	if m != nil {
		return m, nil
	}
	mem, _, err := c.up.Join(ctx, boundDown{}, era.InitRequest(caps, info))
	if err != nil {
		p.mu.Lock()
		c.release(&c.lent)
		p.mu.Unlock()
		return nil, err
	}
	return &poolMember{Member: mem, p: p, c: c, lend: true, out: true}, nil
}

// Join attaches a member with its own downstream (a subscriptions/listen
// stream; server/discover's) to the connection for init's capabilities.
func (p *legacyPool) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	p.mu.Lock()
	c, retired, err := p.connLocked(jsonrpc.Member(init.Params, "capabilities"))
	if err == nil {
		c.joined++
	}
	p.mu.Unlock()
	if retired != nil {
		p.retire(retired)
	}
	if err != nil {
		return nil, nil, err
	}
	m, res, err := c.up.Join(ctx, down, init)
	if err != nil {
		p.mu.Lock()
		c.release(&c.joined)
		p.mu.Unlock()
		return nil, nil, err
	}
	return &poolMember{Member: m, p: p, c: c}, res, nil
}

// connLocked returns the connection for caps, made when missing; retired
// is a connection it retired to make room, for the caller to retire
// (outside mu). p.mu held.
func (p *legacyPool) connLocked(caps json.RawMessage) (c, retired *poolConn, err error) {
	if p.closed {
		return nil, nil, upstream.ErrClosed
	}
	key, known := p.keys[string(caps)]
	if !known {
		key = canonicalJSON(caps)
		if p.keys == nil {
			p.keys = map[string]string{}
		}
		if len(p.keys) < maxKeys {
			p.keys[string(caps)] = key
		}
	}
	p.tick++
	if c = p.conns[key]; c != nil {
		c.used = p.tick
		return c, nil, nil
	}
	if len(p.conns) >= cmp.Or(p.max, maxPooled) {
		for _, v := range p.conns {
			if v.lent == v.parked && (retired == nil || v.used < retired.used) {
				retired = v
			}
		}
		if retired == nil {
			return nil, nil, fmt.Errorf("%w: %s: all %d legacy connections (one per distinct set of client capabilities) have requests in flight; retry shortly",
				upstream.ErrUnavailable, p.d.name, len(p.conns))
		}
		delete(p.conns, retired.key)
		p.retiring.Add(1)
	}
	if p.conns == nil {
		p.conns = map[string]*poolConn{}
	}
	c = &poolConn{key: key, up: p.d.newUp(p.d.dialer(nil), false, upstream.Legacy), used: p.tick, last: time.Now()}
	p.conns[key] = c
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTime(), p.sweepIdle)
	}
	return c, retired, nil
}

// release counts one lent or joined member (*n) back; a connection left
// with neither starts its idle time. pool.mu held.
func (c *poolConn) release(n *int) {
	*n--
	if c.lent == 0 && c.joined == 0 {
		c.last = time.Now()
	}
}

// idleTime is how long a pooled connection may go unused.
func (p *legacyPool) idleTime() time.Duration {
	if p.idle > 0 {
		return p.idle
	}
	if d := time.Duration(p.d.childIdle.Load()); d > 0 {
		return d
	}
	return poolIdle
}

// sweepIdle retires the connections unused for the idle time, and runs
// again when the next one would be, while any is pooled (p.sweep's func).
func (p *legacyPool) sweepIdle() {
	idle := p.idleTime()
	now := time.Now()
	var old []*poolConn
	p.mu.Lock()
	if p.sweep != nil {
		p.sweep.Stop() // called by hand (tests): one timer at a time
		p.sweep = nil
	}
	if p.closed {
		p.mu.Unlock()
		return
	}
	next := idle
	for k, c := range p.conns {
		if c.lent > 0 || c.joined > 0 {
			continue // in use: looked at again an idle time from now
		}
		if left := idle - now.Sub(c.last); left > 0 {
			next = min(next, left)
			continue
		}
		delete(p.conns, k)
		p.retiring.Add(1)
		old = append(old, c)
	}
	if len(p.conns) > 0 {
		p.sweep = time.AfterFunc(next, p.sweepIdle)
	}
	p.mu.Unlock()
	for _, c := range old {
		p.d.log.Info("idle legacy connection of translated clients stopped", "idle", idle)
		p.retire(c)
	}
}

// retire ends a connection taken out of the pool: its parked calls at
// once (a retry of one finds its requestState gone, never a call on a
// closing connection), then the connection, in the background (close
// waits for it).
func (p *legacyPool) retire(c *poolConn) {
	if p.dropParked != nil {
		if n := p.dropParked(func(b session.Backend) bool { m, ok := b.(*poolMember); return ok && m.c == c }); n > 0 {
			p.d.log.Info("parked calls ended to retire their legacy connection", "calls", n)
		}
	}
	go func() {
		defer p.retiring.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.up.Close(ctx)
	}()
}

// Call sends one of the member's requests (traced when the destination
// traces). The destination's limits are not applied again.
func (m *poolMember) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return m.p.d.send(ctx, req, m.Member.Call)
}

// SetParked marks a lent member as waiting for a client's retry (package
// era): its connection may then be retired for another client.
func (m *poolMember) SetParked(on bool) {
	if !m.lend {
		return
	}
	p := m.p
	p.mu.Lock()
	if m.out && m.parked != on {
		m.parked = on
		if on {
			m.c.parked++
		} else {
			m.c.parked--
		}
	}
	p.mu.Unlock()
}

// Leave gives a lent member back (it serves the next request, when idle
// and its connection still pooled) or detaches a joined one.
func (m *poolMember) Leave() {
	if !m.lend {
		m.Member.Leave()
		m.p.mu.Lock()
		m.c.release(&m.c.joined)
		m.p.mu.Unlock()
		return
	}
	idle := m.Member.Idle()
	p := m.p
	p.mu.Lock()
	if !m.out {
		p.mu.Unlock()
		return // given back already
	}
	m.out = false
	m.c.release(&m.c.lent)
	if m.parked {
		m.parked = false
		m.c.parked--
	}
	keep := idle && !p.closed && p.conns[m.c.key] == m.c && len(m.c.free) < maxIdleMembers
	if keep {
		m.c.free = append(m.c.free, m)
	}
	p.mu.Unlock()
	if !keep {
		m.Member.Leave()
	}
}

// close stops every connection of the pool and waits for retired ones.
func (p *legacyPool) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { _ = c.up.Close(ctx) })
	}
	wg.Wait()
	p.retiring.Wait()
}

// canonicalJSON re-encodes v with sorted keys (encoding/json sorts map
// keys), so equal capability sets give equal keys.
func canonicalJSON(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return string(v)
	}
	b, _ := json.Marshal(x)
	return string(b)
}
