// Package session keeps the client sessions of the legacy protocol era
// (2025-11-25 and earlier): the Mcp-Session-Id Switchboard mints, the
// session's backend, its listen stream (the queue behind GET streams or the
// legacy SSE stream), per-destination caps and idle expiry.
//
// A Session is transport-neutral: the Streamable HTTP front and the legacy
// SSE front both create and use it. Protocol 2026-07-28 requests have no
// session and never reach this package.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Call is one request in flight, as a front reads it. *upstream.Call
// satisfies it.
type Call interface {
	// Poll returns the next message (related notifications and requests,
	// then the response) without waiting; ended is true once the response
	// has been taken.
	Poll() (m *jsonrpc.Message, ended bool)
	// Ready receives when Poll may have something new.
	Ready() <-chan struct{}
	// Abandon says nobody reads the call any more (see upstream.Call).
	Abandon(cancel bool)
	// LongLived reports a subscription stream with no response deadline.
	LongLived() bool
}

// Backend is what a session talks to: one upstream server (a per-destination
// route) or an aggregating router. *upstream.Member satisfies it via
// an adapter in the gateway.
type Backend interface {
	Call(ctx context.Context, req *jsonrpc.Message) (Call, error)
	Notify(ctx context.Context, n *jsonrpc.Message) error
	Respond(ctx context.Context, r *jsonrpc.Message) error
	// Leave detaches from the upstream; called once when the session ends.
	Leave()
}

// Session is one client session.
type Session struct {
	ID   string // Mcp-Session-Id: a random UUIDv4
	Dest string // destination (or endpoint) name

	listen *jsonrpc.Queue // messages for the listen stream
	ended  chan struct{}  // closed by End
	table  *Table

	mu       sync.Mutex
	backend  Backend       // guarded by mu; set once by SetBackend
	endErr   error         // guarded by mu
	lastSeen time.Time     // guarded by mu
	busy     int           // guarded by mu: requests in flight plus open streams
	streams  int           // guarded by mu: open listen (GET) streams
	idle     time.Duration // guarded by mu: SetIdle's own idle timeout; zero means the table's
	created  time.Time
}

// SetIdle gives the session an idle timeout shorter than the table's (a
// session that owns a child process is reaped sooner); zero or a value not
// below the table's Idle leaves the table's.
func (s *Session) SetIdle(d time.Duration) {
	s.mu.Lock()
	s.idle = d
	s.mu.Unlock()
	s.table.kickRun()
}

// evictable reports whether the session may be ended to make room: it is
// set up (has a backend), has nothing in flight and no open stream. It
// returns when it was last used. Called with s.mu unheld.
func (s *Session) evictable() (lastSeen time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen, s.busy == 0 && s.backend != nil
}

// SetBackend attaches the backend; a session is usable after it.
func (s *Session) SetBackend(b Backend) {
	s.mu.Lock()
	s.backend = b
	s.mu.Unlock()
}

// Backend returns the session's backend (nil before SetBackend).
func (s *Session) Backend() Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backend
}

// Deliver queues a message for the listen stream. It never blocks; when the
// queue is full the message is dropped (and counted).
func (s *Session) Deliver(m *jsonrpc.Message) {
	if !s.listen.Push(m, false) {
		select {
		case <-s.ended:
			// Not an overflow: the session is gone (its backend may
			// not have left yet).
		default:
			s.table.dropped(s)
		}
	}
}

// End ends the session: its listen streams close, its id answers 404 and
// the backend is left. It is idempotent.
func (s *Session) End(err error) {
	// Unknown first: whoever sees the end (a closed stream) must get 404
	// for the id, not reach the dying backend. remove is idempotent.
	s.table.remove(s)
	s.mu.Lock()
	select {
	case <-s.ended:
		s.mu.Unlock()
		return
	default:
	}
	s.endErr = err
	close(s.ended)
	b := s.backend
	s.mu.Unlock()
	s.listen.Close()
	if b != nil {
		go b.Leave() // may wait on a process; never under a front's request
	}
}

// Ended is closed when the session has ended.
func (s *Session) Ended() <-chan struct{} { return s.ended }

// Listen returns the queue behind the session's listen streams. Several
// streams may read it; each message goes to exactly one of them.
func (s *Session) Listen() *jsonrpc.Queue { return s.listen }

// OpenStream counts a listen (GET) stream in, unless max are open already
// (max <= 0: no bound); it reports whether it did. The caller calls
// CloseStream when a stream it counted ends.
func (s *Session) OpenStream(max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max > 0 && s.streams >= max {
		return false
	}
	s.streams++
	return true
}

// CloseStream ends one OpenStream.
func (s *Session) CloseStream() {
	s.mu.Lock()
	s.streams--
	s.mu.Unlock()
}

// Acquire marks the session busy (a request or stream is open) and returns
// the func that releases it. Busy sessions never expire.
func (s *Session) Acquire() (release func()) {
	s.mu.Lock()
	s.busy++
	s.lastSeen = time.Now()
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.busy--
			s.lastSeen = time.Now()
			s.mu.Unlock()
		})
	}
}

// Hold marks the session busy, as Acquire does, without allocating a
// release func: the caller must call Release exactly once (a request's
// handler: s.Hold(); defer s.Release()).
func (s *Session) Hold() {
	s.mu.Lock()
	s.busy++
	s.lastSeen = time.Now()
	s.mu.Unlock()
}

// Release ends one Hold.
func (s *Session) Release() {
	s.mu.Lock()
	s.busy--
	s.lastSeen = time.Now()
	s.mu.Unlock()
}

// ErrTooMany is returned by Table.New when a destination is at its cap and
// every one of its sessions is busy.
var ErrTooMany = errors.New("too many sessions")

// ErrEvicted is the end error of a session evicted to make room for a new
// one.
var ErrEvicted = errors.New("session evicted: the destination was at its session cap and this session was the least recently used idle one")

// Table holds the live sessions of all destinations.
type Table struct {
	// Max is the session cap per destination; zero means no cap.
	Max int
	// Idle is how long a session may sit with nothing in flight and no open
	// stream before it expires; zero means never.
	Idle time.Duration
	// QueueLimit bounds each listen queue; zero means 1024.
	QueueLimit int
	// OnDrop, if set, is called when a listen queue overflows.
	OnDrop func(s *Session)
	// OnEvict, if set, is called (outside the table's lock) after New
	// ended s to make room: age is how long s lived, idle how long it had
	// nothing in flight.
	OnEvict func(s *Session, age, idle time.Duration)

	mu     sync.Mutex
	byID   map[string]*Session // guarded by mu
	byDest map[string]int      // guarded by mu
	kick   chan struct{}       // guarded by mu (made once): Run recomputes its interval
}

// kicked returns the channel that tells Run to recompute its interval.
func (t *Table) kicked() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kick == nil {
		t.kick = make(chan struct{}, 1)
	}
	return t.kick
}

// kickRun tells Run that a shorter idle timeout may be in use.
func (t *Table) kickRun() {
	select {
	case t.kicked() <- struct{}{}:
	default:
	}
}

// SetLimits changes Max and Idle (a config reload); live sessions stay.
func (t *Table) SetLimits(max int, idle time.Duration) {
	t.mu.Lock()
	t.Max, t.Idle = max, idle
	t.mu.Unlock()
	t.kickRun()
}

// New creates a session for dest. At the cap it first evicts the least
// recently used session of dest that is evictable (set up, nothing in
// flight, no open stream; see OnEvict); it returns ErrTooMany only when
// every session of dest is busy or still being set up.
func (t *Table) New(dest string) (*Session, error) {
	id := newUUID()
	ql := t.QueueLimit
	if ql == 0 {
		ql = 1024
	}
	now := time.Now()
	s := &Session{ID: id, Dest: dest, listen: jsonrpc.NewQueue(ql), ended: make(chan struct{}), table: t, lastSeen: now, created: now}
	t.mu.Lock()
	if t.byID == nil {
		t.byID = map[string]*Session{}
		t.byDest = map[string]int{}
	}
	var victim *Session
	var victimSeen time.Time
	if t.Max > 0 && t.byDest[dest] >= t.Max {
		for _, o := range t.byID {
			if o.Dest != dest {
				continue
			}
			if seen, ok := o.evictable(); ok && (victim == nil || seen.Before(victimSeen)) {
				victim, victimSeen = o, seen
			}
		}
		if victim == nil {
			max := t.Max
			t.mu.Unlock()
			return nil, fmt.Errorf("%w: destination %s has %d sessions (the cap), each with a request in flight or a stream open", ErrTooMany, dest, max)
		}
		// Take the victim's place now, under the lock, so that concurrent
		// New calls cannot overshoot the cap; End's remove then finds it
		// gone.
		delete(t.byID, victim.ID)
		t.byDest[dest]--
	}
	t.byID[id] = s
	t.byDest[dest]++
	onEvict := t.OnEvict
	t.mu.Unlock()
	if victim != nil {
		victim.End(ErrEvicted)
		if onEvict != nil {
			onEvict(victim, now.Sub(victim.created), now.Sub(victimSeen))
		}
	}
	return s, nil
}

// Get returns the live session with id, or nil.
func (t *Table) Get(id string) *Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// Count returns the number of live sessions of dest.
func (t *Table) Count(dest string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byDest[dest]
}

func (t *Table) remove(s *Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[s.ID] == s {
		delete(t.byID, s.ID)
		t.byDest[s.Dest]--
	}
}

func (t *Table) dropped(s *Session) {
	if t.OnDrop != nil {
		t.OnDrop(s)
	}
}

// All returns a snapshot of the live sessions.
func (t *Table) All() []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Session, 0, len(t.byID))
	for _, s := range t.byID {
		out = append(out, s)
	}
	return out
}

// Expire ends the sessions idle for longer than Idle at now; it returns how
// many it ended.
func (t *Table) Expire(now time.Time) int {
	t.mu.Lock()
	idleFor := t.Idle
	t.mu.Unlock()
	n := 0
	for _, s := range t.All() {
		s.mu.Lock()
		limit := idleFor
		if s.idle > 0 && (limit <= 0 || s.idle < limit) {
			limit = s.idle
		}
		idle := limit > 0 && s.busy == 0 && now.Sub(s.lastSeen) > limit
		s.mu.Unlock()
		if idle {
			s.End(errors.New("session expired"))
			n++
		}
	}
	return n
}

// Run expires idle sessions until ctx is done. It checks every half of the
// shortest idle timeout in use (the table's or a session's), at most every
// minute.
func (t *Table) Run(ctx context.Context) {
	kick := t.kicked()
	every := t.checkEvery()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			t.Expire(now)
		case <-kick:
		}
		if e := t.checkEvery(); e != every {
			every = e
			tick.Reset(every)
		}
	}
}

// checkEvery is Run's interval for the current limits and sessions.
func (t *Table) checkEvery() time.Duration {
	every := time.Minute
	t.mu.Lock()
	idle := t.Idle
	t.mu.Unlock()
	if idle > 0 {
		every = min(every, idle/2)
	}
	for _, s := range t.All() {
		s.mu.Lock()
		if s.idle > 0 {
			every = min(every, s.idle/2)
		}
		s.mu.Unlock()
	}
	return max(every, time.Millisecond)
}

// EndAll ends every session (shutdown).
func (t *Table) EndAll(err error) {
	for _, s := range t.All() {
		s.End(err)
	}
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// ValidID reports whether id is a UUIDv4 in canonical form (any hex case).
func ValidID(id string) bool {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' || id[14] != '4' {
		return false
	}
	switch id[19] {
	case '8', '9', 'a', 'b', 'A', 'B':
	default:
		return false
	}
	// One table lookup per character: this runs on every request.
	var bad byte
	for _, part := range [...]string{id[:8], id[9:13], id[14:18], id[19:23], id[24:]} {
		for i := 0; i < len(part); i++ {
			bad |= notHex[part[i]]
		}
	}
	return bad == 0
}

// notHex is 1 for every byte that is not a hexadecimal digit.
var notHex = func() (t [256]byte) {
	for c := range t {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			t[c] = 1
		}
	}
	return t
}()
