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
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
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
	ID   string // Mcp-Session-Id: a random UUIDv4, or a cluster's sealed token (NewWithID)
	Dest string // destination (or endpoint) name
	// Name is what logs and audit records show of the session: "" means
	// ID. A cluster's session id is a bearer token whose name is the
	// 16-character id inside it.
	Name string

	listen *jsonrpc.Queue // messages for the listen stream
	ended  chan struct{}  // closed by End
	table  *Table

	mu       sync.Mutex
	backend  Backend       // guarded by mu; set once by SetBackend
	endErr   error         // guarded by mu
	lastSeen time.Time     // guarded by mu
	busy     int           // guarded by mu: requests in flight plus open streams
	streams  int           // guarded by mu: open listen (GET) streams
	idle     time.Duration // guarded by mu: OwnChild's idle timeout; zero means the table's
	orphan   time.Duration // guarded by mu: OwnChild's orphan timeout; zero means none
	streamed bool          // guarded by mu: a listen stream was opened (Stream)
	created  time.Time
}

// LogName is what logs show of the session: Name, or ID when it has none.
func (s *Session) LogName() string {
	if s.Name != "" {
		return s.Name
	}
	return s.ID
}

// ClientSession returns s. A downstream that stands for a client session
// answers it (an aggregated session's member slot passes it on), so that
// whoever starts a process for the session can bind it to the session.
func (s *Session) ClientSession() *Session { return s }

// OwnChild says the session owns a child process (a stdio server with
// isolation: session), which costs memory for as long as the session
// lives, so it ends sooner than others:
//
//   - once it has been idle (nothing in flight, no stream open) for idle,
//     when that is below the table's Idle; zero leaves the table's;
//   - once its client opened a listen stream (a GET stream), then had none
//     open and nothing in flight for orphan: the client is gone without a
//     DELETE (the TypeScript SDK's close() sends none, and a client that
//     exits closes its stream). Zero turns this rule off.
//
// A client that never opens a listen stream is only subject to idle.
func (s *Session) OwnChild(idle, orphan time.Duration) {
	s.mu.Lock()
	s.idle, s.orphan = idle, orphan
	s.mu.Unlock()
	s.table.kickRun()
}

// IdleSince reports whether the session is idle (set up, nothing in flight,
// no open stream) and since when: it may then be ended to make room.
func (s *Session) IdleSince() (lastSeen time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen, s.busy == 0 && s.backend != nil
}

// ErrOrphaned is the end error of a session that owned a child process and
// whose client had left (see OwnChild).
var ErrOrphaned = errors.New("session orphaned: its client closed its stream and sent nothing since (session_orphan_timeout)")

// errExpired is the end error of a session idle for too long.
var errExpired = errors.New("session expired")

// expiry returns when the session expires if it stays as it is (busy or
// not), and why; ok is false when it never does (nor while it is being set
// up, before SetBackend). tableIdle is the table's Idle. Called with s.mu
// held.
func (s *Session) expiry(tableIdle time.Duration) (at time.Time, why error, ok bool) {
	if s.backend == nil {
		return at, nil, false
	}
	limit := tableIdle
	if s.idle > 0 && (limit <= 0 || s.idle < limit) {
		limit = s.idle
	}
	if limit > 0 {
		at, why, ok = s.lastSeen.Add(limit), errExpired, true
	}
	if s.orphan > 0 && s.streamed {
		if o := s.lastSeen.Add(s.orphan); !ok || o.Before(at) {
			at, why, ok = o, ErrOrphaned, true
		}
	}
	return at, why, ok
}

// SetBackend attaches the backend; a session is usable after it. Its idle
// time counts from here: a session being set up (its initialize in flight,
// a process starting) never expires.
func (s *Session) SetBackend(b Backend) {
	s.mu.Lock()
	s.backend = b
	s.lastSeen = time.Now()
	own := s.idle > 0 || s.orphan > 0
	s.mu.Unlock()
	if own {
		s.table.kickRun() // OwnChild was called while it was set up
	}
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
			if s.table.OnDrop != nil {
				s.table.OnDrop(s)
			}
		}
	}
}

// End ends the session: its listen streams close, its id answers 404 and
// the backend is left. It is idempotent.
func (s *Session) End(err error) { s.Reap(err) }

// Reap is End, reporting whether this call ended the session (false: it
// had ended already).
func (s *Session) Reap(err error) bool {
	// Unknown first: whoever sees the end (a closed stream) must get 404
	// for the id, not reach the dying backend. remove is idempotent.
	s.table.remove(s)
	s.mu.Lock()
	select {
	case <-s.ended:
		s.mu.Unlock()
		return false
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
	return true
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
	s.Hold()
	var once sync.Once
	return func() { once.Do(s.Release) }
}

// Stream is Acquire for a listen stream (a GET stream): it also records
// that the client opened one, which makes it subject to the orphan rule
// (OwnChild) once no stream is open.
func (s *Session) Stream() (release func()) {
	s.mu.Lock()
	first := !s.streamed
	s.streamed = true
	s.mu.Unlock()
	if first {
		s.table.kickRun() // an orphan deadline may now come first
	}
	return s.Acquire()
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
// every one of its sessions is busy. mcp.Classify answers it 503, -32000.
var ErrTooMany = mcp.Sentinel("too many sessions", http.StatusServiceUnavailable, mcp.CodeUpstreamUnavailable)

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
	// OnExpire, if set, is called (outside the table's lock) after Expire
	// ended s; why is ErrOrphaned for a client gone (see OwnChild), else
	// an idle timeout's error.
	OnExpire func(s *Session, why error)

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
	return t.NewWithID(dest, newUUID(), "")
}

// ErrExists is NewWithID's error when the id is live already.
var ErrExists = errors.New("session id is in use")

// NewWithID is New with the session's id (a cluster's sealed token, minted
// or adopted) and its Name for logs; ErrExists when the id is live.
func (t *Table) NewWithID(dest, id, name string) (*Session, error) {
	ql := t.QueueLimit
	if ql == 0 {
		ql = 1024
	}
	now := time.Now()
	s := &Session{ID: id, Dest: dest, Name: name, listen: jsonrpc.NewQueue(ql), ended: make(chan struct{}), table: t, lastSeen: now, created: now}
	t.mu.Lock()
	if t.byID == nil {
		t.byID = map[string]*Session{}
		t.byDest = map[string]int{}
	}
	if t.byID[id] != nil {
		t.mu.Unlock()
		return nil, ErrExists
	}
	var victim *Session
	var victimSeen time.Time
	if t.Max > 0 && t.byDest[dest] >= t.Max {
		for _, o := range t.byID {
			if o.Dest != dest {
				continue
			}
			if seen, ok := o.IdleSince(); ok && (victim == nil || seen.Before(victimSeen)) {
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

// All returns a snapshot of the live sessions.
func (t *Table) All() []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.byID))
}

// Expire ends the sessions whose idle (or orphan, see OwnChild) timeout
// has passed at now (strictly: a session idle exactly its timeout stays);
// it returns how many it ended.
func (t *Table) Expire(now time.Time) int {
	t.mu.Lock()
	idleFor, onExpire := t.Idle, t.OnExpire
	t.mu.Unlock()
	n := 0
	for _, s := range t.All() {
		s.mu.Lock()
		at, why, ok := s.expiry(idleFor)
		due := ok && s.busy == 0 && now.After(at)
		s.mu.Unlock()
		if due && s.Reap(why) {
			n++
			if onExpire != nil {
				onExpire(s, why)
			}
		}
	}
	return n
}

// Run expires sessions until ctx is done. It wakes when the first session
// is due (see Expire), at the latest every minute, and when a session's
// own timeouts change (OwnChild, Stream): a session is ended at its
// deadline, not up to a check interval later.
func (t *Table) Run(ctx context.Context) {
	kick := t.kicked()
	timer := time.NewTimer(t.nextDue(time.Now()))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			t.Expire(time.Now())
		case <-kick:
			timer.Stop()
		}
		timer.Reset(t.nextDue(time.Now()))
	}
}

// nextDue is how long Run may wait at now: until just past the earliest
// deadline of a session (an idle one's own; a busy one's cannot come before now plus
// its timeout), at most a minute.
func (t *Table) nextDue(now time.Time) time.Duration {
	t.mu.Lock()
	idleFor := t.Idle
	t.mu.Unlock()
	wait := time.Minute
	for _, s := range t.All() {
		s.mu.Lock()
		at, _, ok := s.expiry(idleFor)
		if ok && s.busy > 0 {
			at = now.Add(at.Sub(s.lastSeen)) // idle from now at the soonest
		}
		s.mu.Unlock()
		if ok {
			wait = min(wait, at.Sub(now)+time.Nanosecond) // strictly past at
		}
	}
	if idleFor > 0 {
		wait = min(wait, idleFor+time.Nanosecond) // a session made after now
	}
	if wait <= 0 {
		wait = time.Millisecond // past due, but not ended yet: never spin
	}
	return wait
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
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// ValidID reports whether id is a UUIDv4 in canonical form (any hex case).
func ValidID(id string) bool {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' || id[14] != '4' ||
		strings.IndexByte("89abAB", id[19]) < 0 {
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
