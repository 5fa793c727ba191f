// Package upstream multiplexes client sessions onto one connection to an MCP
// server: a stdio child, or a remote Streamable HTTP or legacy SSE server.
//
// An Upstream owns the connection and everything that must be rewritten for
// several clients to share it (see Upstream): request ids and progress
// tokens, cancellation, server→client requests, per-session logging levels
// and resource subscriptions, and the handshake, which Switchboard makes
// itself and replays when the server restarts.
//
// Data flow: a front (streamable, sse) owns a session, which holds a Member;
// Member.Call returns a Call whose messages the front writes to the client.
// The connection's reader goroutine calls dispatch for every message; it never
// blocks on a client (Calls and members have their own queues).
//
// Stalls: a call waits only on its server. A watchdog per Upstream counts
// and logs a message held at one of the gateway's own hand-offs past
// Options.StallAfter, and its ping releases the answer of a stdio server
// that holds it until more input comes (see stall.go: Stages,
// StalledTotal).
package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/backoff"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// Conn is one live connection to an MCP server that carries whole messages.
// *stdio.Process satisfies it.
type Conn interface {
	// Write sends one encoded message. Safe for concurrent use.
	Write(msg []byte) error
	// Done is closed when the connection has ended.
	Done() <-chan struct{}
	// Err tells why it ended; valid after Done.
	Err() error
	// Close ends the connection gracefully, within ctx.
	Close(ctx context.Context) error
}

// AppendWriter is implemented by connections that encode a message straight
// into their own write buffer (*stdio.Process): no encoded copy is made for
// Write. *jsonrpc.Message is an Appender.
type AppendWriter interface {
	WriteFrom(m interface{ AppendTo([]byte) []byte }) error
}

// Dialer opens a connection. deliver is called for each message received,
// with a slice valid only during the call; it may be called from several
// goroutines at once (an HTTP connection reads several response streams),
// but the messages of one stream arrive in order. oversize is called with
// the first bytes of a message over the size limit.
type Dialer func(ctx context.Context, deliver func([]byte), oversize func([]byte)) (Conn, error)

// Downstream is the client side of a Member: the session's listen stream
// (the GET stream, or the legacy SSE stream). Implementations must not block.
type Downstream interface {
	// Deliver queues a message that belongs to no open call: an unrelated
	// notification, or a server→client request whose call stream is gone.
	Deliver(m *jsonrpc.Message)
	// End tells the session that the upstream is gone for good.
	End(err error)
}

// Era is the protocol era an Upstream speaks with its server.
type Era int

const (
	// Legacy servers (protocol 2025-11-25 and earlier) get an initialize
	// handshake before anything else.
	Legacy Era = iota
	// Modern servers (2026-07-28) are stateless: no handshake.
	Modern
)

// Options configure an Upstream. The zero value of each field is documented.
type Options struct {
	Name string // destination name, for logs and errors; required
	Dial Dialer // required
	// Shared means many client sessions share the connection: Switchboard
	// initializes the server with its own client identity and the union of
	// the capabilities it can route. When false the first member's initialize
	// params are sent as they are (one process per session).
	Shared bool
	Era    Era // Legacy (zero) or Modern
	// RestartDelays are the waits before each restart attempt after the
	// connection ends unexpectedly; nil means never restart. After the last
	// one fails the Upstream is Failed and its members are ended.
	RestartDelays []time.Duration
	// NoRestartBeforeReady makes a failure before the first connection was
	// ever Ready final (no restart): the first caller learns at once why
	// the server cannot be reached. RestartDelays apply after that.
	NoRestartBeforeReady bool
	// StableAfter resets the restart attempt count once a connection has
	// lived this long. Zero means 10 s.
	StableAfter time.Duration
	// RetryFailedAfter is how long a Failed upstream refuses new work before
	// the next use starts it again. Each consecutive retry that ends Failed
	// again doubles the wait, up to RetryFailedMax; reaching Ready resets
	// it. Zero means 30 s.
	RetryFailedAfter time.Duration
	// RetryFailedMax caps the doubled RetryFailedAfter. Zero (or a value
	// below RetryFailedAfter) means 10 minutes or RetryFailedAfter,
	// whichever is larger.
	RetryFailedMax time.Duration
	// HandshakeTimeout bounds the initialize exchange. Zero means 30 s.
	HandshakeTimeout time.Duration
	// QueueLimit bounds the messages queued for one call or member before
	// notifications are dropped. Zero means 1024.
	QueueLimit int
	Logger     *slog.Logger // nil discards
	// StallAfter is how long a message may wait at one of Switchboard's
	// own hand-offs (written to the server, read from it, handed to its
	// call) before the call is logged and counted as stalled (see
	// Stages). Zero means 1 s; negative turns the watchdog off.
	StallAfter time.Duration
	// OnState, if set, is called (without locks held) on every state change.
	OnState func(State)
}

// State is an Upstream's lifecycle state.
type State int

const (
	Idle       State = iota // not started; the first use starts it
	Starting                // connecting and handshaking
	Ready                   // serving
	Restarting              // waiting to reconnect after an unexpected end
	Failed                  // restarts exhausted; calls fail fast
	Closed                  // Close was called
)

func (s State) String() string {
	return [...]string{"idle", "starting", "ready", "restarting", "failed", "closed"}[s]
}

// Errors returned by Upstream methods. Each carries its answer for
// mcp.Classify: the server is down or cannot be reached (503, -32000); the
// upstream, and so the session on it, has ended (404 so that a client
// initializes again, -32600); the client reused an id in flight (409,
// -32600).
var (
	ErrUnavailable = mcp.Sentinel("upstream unavailable", http.StatusServiceUnavailable, mcp.CodeUpstreamUnavailable)
	ErrClosed      = mcp.Sentinel("upstream closed", http.StatusNotFound, jsonrpc.InvalidRequest)
	ErrDuplicateID = mcp.Sentinel("duplicate request id", http.StatusConflict, jsonrpc.InvalidRequest)
)

// PermanentError marks why a connection failed when connecting again cannot
// help (the server refused the credentials: HTTP 401 or 403). An Upstream
// whose connection fails with one is not restarted: it is Failed at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err in a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err is or wraps a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// Upstream is one connection to one MCP server, shared by its members.
//
// It owns the connection and everything that must be rewritten for several
// clients to share it:
//
//   - request ids: each client request gets an internal integer id, and the
//     response is routed back under the client's own id;
//   - progress tokens: rewritten to the internal id, so progress reaches only
//     the call that asked for it, under the client's own token;
//   - cancellation: a client's notifications/cancelled is mapped to the
//     internal id of that client's own request, never anyone else's;
//   - server→client requests (sampling, elicitation, roots): routed to the
//     session whose call caused them, with ids rewritten both ways; when the
//     owner cannot be told apart the request is refused, never guessed;
//   - per-session protocol state: logging/setLevel filters notifications/message
//     per member, resource subscriptions are ref-counted so
//     notifications/resources/updated reaches only subscribers;
//   - the handshake: Switchboard initializes the server itself and answers
//     each client's initialize from the cached result, so a restarted server
//     is re-initialized (handshake replayed, level and subscriptions restored)
//     without the clients noticing anything but the calls that were in flight.
//
// Its stall watchdog is described in stall.go.
type Upstream struct {
	opts Options
	log  *slog.Logger

	// restarts counts the restarts scheduled after a connection ended
	// unexpectedly (see Restarts).
	restarts atomic.Uint64

	// stalled counts the stalls seen, by stage (see stall.go).
	stalled [numStages]atomic.Uint64
	// dispatching is when (Unix ns) the reader began handing over the
	// message it holds; 0 between messages. deliverReported is the
	// dispatching value last reported as stalled.
	dispatching     atomic.Int64
	deliverReported atomic.Int64
	// lastWrite and lastHeard are when (Unix ns) a message was last
	// written to the server and last read from it: the watchdog probes a
	// server that sits on a request in silence.
	lastWrite atomic.Int64
	lastHeard atomic.Int64

	// connecting counts connect goroutines (dialling, or waiting to redial);
	// Close waits for them so no connection outlives it.
	connecting sync.WaitGroup

	mu sync.Mutex
	// The fields below are guarded by mu.
	state     State
	ready     chan struct{} // closed when the current Starting/Restarting phase ends
	lastErr   error         // why the last connection or attempt failed
	conn      Conn          // nil unless Ready or Starting (after dial)
	gen       int           // bumped for every connection; stale events are ignored
	connected time.Time
	attempts  int
	wasReady  bool      // some connection reached Ready
	retryAt   time.Time // when a Failed Upstream may start again
	// retryWait is the wait of a Failed upstream before it may start
	// again: RetryFailedAfter doubling per Failed phase up to
	// RetryFailedMax, reset by Ready. Not jittered: a retry is made by the
	// next request after it, not by a timer, and /healthz announces it.
	retryWait backoff.Backoff
	redial    *time.Timer     // the pending restart, if any
	initReq   json.RawMessage // the initialize params sent to the server
	initRes   json.RawMessage // the server's InitializeResult
	version   string          // protocol version the server chose
	nextID    int64
	pending   map[int64]*Call
	// gaveUp notes when calls were given up before their response (a
	// timeout, a cancellation), so that a response arriving later is
	// logged as late rather than unknown: whether a server was slow or
	// silent. Bounded: it is emptied past maxGaveUp entries.
	gaveUp  map[int64]time.Time
	reverse map[int64]*serverRequest // by downstream id
	nextRev int64
	members map[*Member]struct{}
	// elicited are the members given a URL elicitation (-32042) that no
	// notifications/elicitation/complete has answered yet, by
	// elicitationId (see ElicitationComplete).
	elicited map[string][]elicitee
	subs     map[string]int // resource URI → number of members subscribed
	level    string         // logging level set on the server; "" none
	// hsErr is why the handshake of connection hsGen failed: the reason
	// watch reports, rather than the end of the connection it caused.
	hsErr error
	hsGen int
	sw    stallWatch // the stall watchdog
}

// serverRequest is a server→client request awaiting the client's response.
type serverRequest struct {
	upID   json.RawMessage // the id the server used
	member *Member
	gen    int
}

// New returns an idle Upstream; nothing starts until it is used.
func New(opts Options) *Upstream {
	opts.StableAfter = cmp.Or(opts.StableAfter, 10*time.Second)
	opts.RetryFailedAfter = cmp.Or(opts.RetryFailedAfter, 30*time.Second)
	opts.RetryFailedMax = max(cmp.Or(opts.RetryFailedMax, 10*time.Minute), opts.RetryFailedAfter)
	opts.HandshakeTimeout = cmp.Or(opts.HandshakeTimeout, 30*time.Second)
	opts.QueueLimit = cmp.Or(opts.QueueLimit, 1024)
	opts.StallAfter = cmp.Or(opts.StallAfter, time.Second)
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	return &Upstream{
		retryWait: backoff.Backoff{Base: opts.RetryFailedAfter, Max: opts.RetryFailedMax, Jitter: -1},
		opts:      opts,
		log:       log.With("destination", opts.Name),
		pending:   map[int64]*Call{},
		reverse:   map[int64]*serverRequest{},
		members:   map[*Member]struct{}{},
		subs:      map[string]int{},
	}
}

// Name returns the destination name.
func (u *Upstream) Name() string { return u.opts.Name }

// State returns the current state and, for Failed or Restarting, why.
func (u *Upstream) State() (State, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state, u.lastErr
}

// Members returns the number of attached members.
func (u *Upstream) Members() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.members)
}

// InFlight returns the number of requests sent to the server and not yet
// answered.
func (u *Upstream) InFlight() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.pending)
}

// Restarts returns how many times the connection was restarted after it
// ended unexpectedly (a child that exited, a remote that hung up), since
// the Upstream was made.
func (u *Upstream) Restarts() uint64 { return u.restarts.Load() }

func (u *Upstream) setState(s State) {
	// mu held by caller
	u.state = s
	if f := u.opts.OnState; f != nil {
		go f(s)
	}
}

// ensure returns once the Upstream is Ready, starting it if Idle. params are
// the initialize params to use if this call starts a Legacy connection.
func (u *Upstream) ensure(ctx context.Context, params json.RawMessage) error {
	u.mu.Lock()
	for {
		switch u.state {
		case Ready:
			u.mu.Unlock()
			return nil
		case Idle:
			if params != nil {
				// A call (no params) that starts it again after Stop or
				// Failed keeps the initialize params it was started with.
				u.initReq = params
			}
			u.ready = make(chan struct{})
			u.setState(Starting)
			u.connecting.Add(1)
			go u.connect(u.gen + 1)
		case Starting, Restarting:
			ch := u.ready
			u.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return fmt.Errorf("%w: %s is starting: %w", ErrUnavailable, u.opts.Name, ctx.Err())
			}
			u.mu.Lock()
		case Failed:
			if !time.Now().Before(u.retryAt) {
				// Give a failed server another chance, now and then.
				u.attempts = 0
				u.setState(Idle)
				continue
			}
			err := u.lastErr
			if e := loginError(err); e != nil {
				// The handshake waits for a person's login (an OAuth
				// destination's, its URL in e): the next request tries
				// again at once, and this one tells its client.
				u.retryAt = time.Time{}
				u.mu.Unlock()
				return fmt.Errorf("%w: %s: %w", ErrUnavailable, u.opts.Name, e)
			}
			u.mu.Unlock()
			return fmt.Errorf("%w: %s failed: %v", ErrUnavailable, u.opts.Name, err)
		case Closed:
			u.mu.Unlock()
			return ErrClosed
		}
	}
}

// NextRetry returns when a Failed Upstream will accept work again (the
// next use then starts it); the zero time when it is not Failed.
func (u *Upstream) NextRetry() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state != Failed {
		return time.Time{}
	}
	return u.retryAt
}

// Retry makes a Failed Upstream start again now, in the background, with
// its restart attempts renewed (a config reload); a no-op in any other
// state. It reports whether it retried.
func (u *Upstream) Retry() bool {
	u.mu.Lock()
	failed := u.state == Failed
	if failed {
		u.retryAt = time.Time{}
	}
	u.mu.Unlock()
	if failed {
		go func() { _ = u.ensure(context.Background(), nil) }()
	}
	return failed
}

// Start starts an idle Upstream in the background (a no-op otherwise), so
// its state shows before the first client arrives.
func (u *Upstream) Start() {
	u.mu.Lock()
	idle := u.state == Idle
	u.mu.Unlock()
	if idle {
		go func() { _ = u.ensure(context.Background(), nil) }()
	}
}

// connect dials and handshakes connection number gen; on failure it
// schedules the next attempt or marks the Upstream Failed.
// The caller has done u.connecting.Add(1).
func (u *Upstream) connect(gen int) {
	defer u.connecting.Done()
	u.mu.Lock()
	closed := u.state == Closed
	u.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), u.opts.HandshakeTimeout)
	defer cancel()
	conn, err := u.opts.Dial(ctx, func(b []byte) { u.dispatch(gen, b) }, func(p []byte) { u.oversize(gen, p) })
	u.mu.Lock()
	if u.state == Closed {
		u.mu.Unlock()
		if conn != nil {
			_ = conn.Close(context.Background()) // Close waits for this goroutine
		}
		return
	}
	if err != nil {
		u.mu.Unlock()
		u.failed(gen, fmt.Errorf("start: %w", err))
		return
	}
	u.gen = gen
	u.conn = conn
	u.connected = time.Now()
	u.mu.Unlock()
	go u.watch(gen, conn)

	if err := u.handshake(ctx); err != nil {
		u.log.Warn("handshake failed", "err", err)
		if r, ok := conn.(Refuser); ok && r.Refused() {
			err = Permanent(err)
		}
		u.mu.Lock()
		u.hsErr, u.hsGen = err, gen
		u.mu.Unlock()
		_ = conn.Close(context.Background())
		// watch sees the connection end and schedules the restart.
		return
	}
	u.mu.Lock()
	// u.conn == conn: the connection may have ended (and a restart been
	// scheduled) while the handshake was finishing.
	if u.gen == gen && u.conn == conn && u.state != Closed {
		u.lastErr = nil
		u.wasReady = true
		u.retryWait.Reset()
		u.setState(Ready)
		close(u.ready)
	}
	u.mu.Unlock()
}

// handshake runs initialize/initialized (Legacy) and restores what the
// members had set up on a previous connection: the log level and resource
// subscriptions. It runs before the Upstream is Ready, so it talks to the
// connection directly through internal calls.
func (u *Upstream) handshake(ctx context.Context) error {
	if u.opts.Era == Legacy {
		res, err := u.internalCall(ctx, "initialize", u.initParams())
		if err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		u.mu.Lock()
		u.initRes = res
		u.version, _ = jsonrpc.StringMember(res, "protocolVersion")
		u.mu.Unlock()
		if err := u.write(jsonrpc.NewNotification("notifications/initialized", nil)); err != nil {
			return err
		}
	}
	u.restore(ctx)
	return nil
}

// Refuser is implemented by connections that can tell that the server
// refused the credentials (HTTP 401 or 403, streamable.ClientConn): a failed
// handshake is then final (PermanentError), not retried.
type Refuser interface {
	Refused() bool
}

// Reinitializer is implemented by connections that re-establish a lost
// upstream session by themselves (streamable.ClientConn); the Upstream then
// restores the session state only it knows.
type Reinitializer interface {
	Reinitialized() <-chan struct{}
}

// restore re-applies the log level and resource subscriptions the members
// set up, after a new connection or a re-established session.
func (u *Upstream) restore(ctx context.Context) {
	u.mu.Lock()
	level := u.level
	uris := slices.Collect(maps.Keys(u.subs))
	u.mu.Unlock()
	if level != "" {
		if _, err := u.internalCall(ctx, "logging/setLevel", jsonrpc.Marshal(map[string]string{"level": level})); err != nil {
			u.log.Warn("restoring log level failed", "err", err)
		}
	}
	for _, uri := range uris {
		if _, err := u.internalCall(ctx, "resources/subscribe", jsonrpc.Marshal(map[string]string{"uri": uri})); err != nil {
			u.log.Warn("restoring resource subscription failed", "uri", uri, "err", err)
		}
	}
}

// elicitee is a client given a URL elicitation: a member, or the
// client of a stateless call (m nil) reached by d. Comparable: every
// Downstream is a pointer.
type elicitee struct {
	m *Member
	d Downstream
}

// maxElicited bounds Upstream.elicited: the logins whose completion has
// not come yet (a login that never completes leaves its entry).
const maxElicited = 64

// ElicitationComplete tells the clients given the URL elicitation id
// (an OAuth destination's login, now done) that it is complete:
// notifications/elicitation/complete, on their listen streams. Members
// that left are skipped; an id nobody was given is ignored.
func (u *Upstream) ElicitationComplete(id string) {
	u.mu.Lock()
	who := slices.DeleteFunc(u.elicited[id], func(w elicitee) bool { return w.m != nil && w.m.left })
	delete(u.elicited, id)
	u.mu.Unlock()
	n := jsonrpc.NewNotification("notifications/elicitation/complete", jsonrpc.Marshal(map[string]string{"elicitationId": id}))
	for _, w := range who {
		w.d.Deliver(n)
	}
}

// noteElicited records that the client w was given the URL
// elicitations of e (a -32042 error), for ElicitationComplete. u.mu is
// not held.
func (u *Upstream) noteElicited(w elicitee, e *jsonrpc.Error) {
	var d struct {
		Elicitations []mcp.URLElicitation `json:"elicitations"`
	}
	if w.d == nil || json.Unmarshal(e.Data, &d) != nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.elicited == nil {
		u.elicited = map[string][]elicitee{}
	}
	for _, el := range d.Elicitations {
		if el.ElicitationID == "" || slices.Contains(u.elicited[el.ElicitationID], w) {
			continue
		}
		if _, ok := u.elicited[el.ElicitationID]; !ok && len(u.elicited) >= maxElicited {
			for old := range u.elicited { // forget one that never completed
				delete(u.elicited, old)
				break
			}
		}
		u.elicited[el.ElicitationID] = append(u.elicited[el.ElicitationID], w)
	}
}

// loginError returns the URLElicitationRequired error (-32042) in err's
// chain, the handshake's answer when an OAuth destination waits for a
// person's login, or nil.
func loginError(err error) *jsonrpc.Error {
	var e *jsonrpc.Error
	if errors.As(err, &e) && e.Code == mcp.CodeURLElicitationRequired {
		return e
	}
	return nil
}

// forClient rewrites a login error of err (loginError) for a client that
// cannot take -32042 (elicitURL false): mcp.URLElicitationFallback.
func forClient(err error, elicitURL bool) error {
	if e := loginError(err); e != nil && !elicitURL {
		return fmt.Errorf("%w: %w", ErrUnavailable, mcp.URLElicitationFallback(e))
	}
	return err
}

// gatewayCapabilities are the client capabilities a shared Upstream
// declares: everything Switchboard can route to some client.
var gatewayCapabilities = json.RawMessage(`{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`)

func (u *Upstream) initParams() json.RawMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.opts.Shared && u.initReq != nil {
		return u.initReq
	}
	return jsonrpc.Marshal(map[string]any{
		"protocolVersion": mcp.LatestLegacyVersion,
		"capabilities":    gatewayCapabilities,
		"clientInfo":      map[string]string{"name": "switchboard", "version": "1"},
	})
}

// watch waits for connection gen to end, fails its in-flight calls at once
// and restarts it according to the policy.
func (u *Upstream) watch(gen int, conn Conn) {
	var reinit <-chan struct{}
	if r, ok := conn.(Reinitializer); ok {
		reinit = r.Reinitialized()
	}
	for ended := false; !ended; {
		select {
		case <-reinit:
			// The connection replayed the handshake on its own (an HTTP
			// server forgot the session): restore what the members set up.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), u.opts.HandshakeTimeout)
				defer cancel()
				u.restore(ctx)
			}()
		case <-conn.Done():
			ended = true
		}
	}
	cerr := conn.Err()
	err := fmt.Errorf("connection ended: %w", cmp.Or(cerr, errors.New("exited")))
	u.mu.Lock()
	if u.hsErr != nil && u.hsGen == gen {
		// The handshake failed and closed the connection: say why (a
		// PermanentError stays one), and how the connection ended (a
		// child's exit error carries its last stderr lines).
		if cerr != nil {
			err = fmt.Errorf("handshake failed: %w (connection ended: %v)", u.hsErr, cerr)
		} else {
			err = fmt.Errorf("handshake failed: %w", u.hsErr)
		}
		u.hsErr = nil
	}
	u.mu.Unlock()
	u.failed(gen, err)
}

// failed handles the end of connection gen (or a failed attempt at it).
func (u *Upstream) failed(gen int, err error) {
	u.mu.Lock()
	if u.state == Closed || gen < u.gen {
		u.mu.Unlock()
		return
	}
	u.gen = gen
	u.conn = nil
	u.lastErr = err
	calls := u.pending
	u.pending = map[int64]*Call{}
	u.reverse = map[int64]*serverRequest{}
	for _, c := range calls {
		if c.member != nil {
			delete(c.member.calls, string(c.clientID))
		}
	}
	if !u.connected.IsZero() && time.Since(u.connected) >= u.opts.StableAfter {
		u.attempts = 0
	}
	u.connected = time.Time{}
	var delay, retryIn time.Duration
	restart := u.attempts < len(u.opts.RestartDelays) && !IsPermanent(err) &&
		(u.wasReady || !u.opts.NoRestartBeforeReady)
	if restart {
		delay = u.opts.RestartDelays[u.attempts]
		u.attempts++
		// A new phase needs a new ready channel only if the last one was
		// closed (we were Ready): while Starting or Restarting, callers
		// already wait on the open one, which must be the one closed later.
		if u.state == Ready {
			u.ready = make(chan struct{})
		}
		u.setState(Restarting)
	} else {
		retryIn = u.retryWait.Next()
		u.retryAt = time.Now().Add(retryIn)
		u.setState(Failed)
		u.closeReady()
	}
	var members []*Member
	if !restart {
		members = slices.Collect(maps.Keys(u.members))
	}
	u.mu.Unlock()

	fail := jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "upstream %s: %v", u.opts.Name, err)
	for _, c := range calls {
		c.fail(fail)
	}
	if restart {
		u.restarts.Add(1)
		u.log.Warn("upstream ended; restarting", "err", err, "attempt", u.attempts, "delay", delay)
		// Counted and armed under the lock, after checking that no Close
		// came in between: Close either sees the timer (and stops it) or
		// this sees Closed, never a connect counted while Close waits.
		u.mu.Lock()
		if u.state != Closed {
			u.connecting.Add(1)
			u.redial = time.AfterFunc(delay, func() { u.connect(gen + 1) })
		}
		u.mu.Unlock()
		return
	}
	u.log.Error("upstream failed; restarts exhausted", "err", err, "retry_in", retryIn)
	for _, m := range members {
		m.d.End(fmt.Errorf("%w: %s failed: %v", ErrUnavailable, u.opts.Name, err))
	}
}

// closeReady releases the callers waiting for the current phase, if any
// and not released yet; mu held.
func (u *Upstream) closeReady() {
	if u.ready == nil {
		return
	}
	select {
	case <-u.ready:
	default:
		close(u.ready)
	}
}

// Stop ends the connection of an Upstream nobody uses (no member, no
// request in flight) and makes it Idle again: the next use starts a new
// connection. Package era's detection stops the connection it made only
// to probe a server that turned out not to speak its era. It reports
// whether it stopped one: only a Ready Upstream is stopped.
func (u *Upstream) Stop(ctx context.Context) bool {
	u.mu.Lock()
	if u.state != Ready || len(u.members) > 0 || len(u.pending) > 0 {
		u.mu.Unlock()
		return false
	}
	conn := u.conn
	u.conn = nil
	u.gen++ // the end of this connection is not a failure: watch ignores it
	u.attempts = 0
	u.connected = time.Time{}
	u.reverse = map[int64]*serverRequest{}
	u.setState(Idle)
	u.connecting.Add(1) // a Close meanwhile waits for this connection to end
	u.mu.Unlock()
	defer u.connecting.Done()
	if conn != nil {
		_ = conn.Close(ctx)
	}
	u.log.Info("idle connection stopped")
	return true
}

// Close ends the connection and every member. It waits for the connection
// to close gracefully within ctx.
func (u *Upstream) Close(ctx context.Context) error {
	u.mu.Lock()
	if u.state == Closed {
		u.mu.Unlock()
		return nil
	}
	u.setState(Closed)
	u.stopStalls()
	if u.redial != nil && u.redial.Stop() {
		u.connecting.Done() // the pending connect will not run
	}
	u.closeReady()
	conn := u.conn
	u.conn = nil
	calls := u.pending
	u.pending = map[int64]*Call{}
	members := u.members
	u.members = map[*Member]struct{}{}
	u.mu.Unlock()
	fail := jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "upstream %s is shutting down", u.opts.Name)
	for _, c := range calls {
		c.fail(fail)
	}
	for m := range members {
		m.d.End(ErrClosed)
	}
	var err error
	if conn != nil {
		err = conn.Close(ctx)
	}
	// A connection being dialled now is closed by its own goroutine.
	done := make(chan struct{})
	go func() { u.connecting.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return err
}

// write sends m on the current connection.
func (u *Upstream) write(m *jsonrpc.Message) error {
	u.mu.Lock()
	conn := u.conn
	u.mu.Unlock()
	if conn == nil {
		return fmt.Errorf("%w: %s is not connected", ErrUnavailable, u.opts.Name)
	}
	var err error
	if aw, ok := conn.(AppendWriter); ok {
		err = aw.WriteFrom(m) // encoded straight into the connection's buffer
	} else {
		err = conn.Write(m.Encode())
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, u.opts.Name, err)
	}
	u.lastWrite.Store(time.Now().UnixNano())
	return nil
}

// internalCall sends a request of Switchboard's own and waits for its result.
func (u *Upstream) internalCall(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	c := u.newCall(nil, nil, method)
	c.internal = true
	u.mu.Lock()
	c.sent = time.Now()
	u.pending[c.id] = c
	u.watchStalls()
	u.mu.Unlock()
	if err := u.write(jsonrpc.NewRequest(jsonrpc.IntID(c.id), method, params)); err != nil {
		u.forget(c)
		return nil, err
	}
	c.wrote.Store(time.Now().UnixNano())
	for {
		m, err := c.q.Pop(ctx)
		if err != nil {
			u.forget(c)
			return nil, err
		}
		if !m.IsResponse() {
			continue
		}
		if e := m.ErrorOf(); e != nil {
			return nil, e
		}
		return m.Result, nil
	}
}

// forget removes c from the pending table if it is still there.
func (u *Upstream) forget(c *Call) {
	u.mu.Lock()
	if u.pending[c.id] == c {
		u.unpend(c)
	}
	u.mu.Unlock()
}

// unpend removes c, which is pending, from the pending table and its
// member's calls; mu held.
func (u *Upstream) unpend(c *Call) {
	delete(u.pending, c.id)
	if c.member != nil {
		delete(c.member.calls, string(c.clientID))
	}
}

func (u *Upstream) newCall(m *Member, clientID json.RawMessage, method string) *Call {
	u.mu.Lock()
	u.nextID++
	id := u.nextID
	u.mu.Unlock()
	c := &Call{u: u, member: m, id: id, clientID: clientID, method: method}
	c.q.Init(u.opts.QueueLimit)
	return c
}
