// Package destination runs one configured upstream server for the fronts:
// its connections (a shared process, one per session, or remote sessions),
// the protocol-era detection and translation with its pool of legacy
// connections, SigV4 signing and OAuth tokens, the x-mcp-header bindings of
// its tools, traced sends and its state for the probes. It knows nothing of
// the config file: the gateway fills its Options.
//
// Which upstream a session gets depends on the transport and isolation:
//
//	stdio, shared      one process for every legacy session (shared)
//	stdio, per session one process per session (private)
//	HTTP (streamable,  one upstream session per client session (private)
//	  legacy SSE)
//	agentcore          likewise, each an AgentCore runtime session
//
// 2026-07-28 requests go to modern, a separate stateless connection, so one
// process never has to mix protocol eras.
package destination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/era"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/sigv4"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
	"github.com/switchboard-mcp/switchboard/internal/upstream/stdio"
)

// Options configure a Destination. Exactly one of Stdio, HTTP and
// AgentCore is set: how its server is reached.
type Options struct {
	// Name is the destination's name, in logs, errors and spans. Required.
	Name string

	// Stdio runs the server as a child process. Its MaxLine, Logger and
	// Lines are the destination's (MaxMessage, Logger, one line budget
	// for all its processes) unless set.
	Stdio *stdio.Spec
	// PerSession gives each client session a process of its own
	// (isolation: session); false shares one among the legacy sessions.
	// Stdio only.
	PerSession bool

	// HTTP reaches a remote Streamable HTTP or legacy HTTP+SSE server.
	HTTP *HTTP

	// AgentCore reaches a Bedrock AgentCore runtime. Its MaxMessage and
	// Logger (and AWS.Logger) are the destination's unless set.
	AgentCore *agentcore.Options

	// Era pins the protocol era of the server: era.Legacy or era.Modern.
	// Zero (era.Unknown) probes it with server/discover. A legacy HTTP+SSE
	// server is always legacy.
	Era era.Era
	// States mints the requestState of 2026-07-28 calls translated onto a
	// legacy server and parked for the client's input (a cluster seals
	// them, naming this replica). Nil: random tokens of this process.
	States era.StateMinter

	// Timeout bounds the handshake of each connection and the era probe;
	// zero means none.
	Timeout time.Duration
	// ListTimeout bounds one tools/list walk (ParamHeaders); zero means
	// 30 s.
	ListTimeout time.Duration
	// MaxMessage is the largest message accepted from the server, in
	// bytes; zero means the transports' default.
	MaxMessage int

	// RestartDelays are the waits before each restart of a connection
	// that ended unexpectedly; their count is the attempts made before it
	// is failed. RetryFailedAfter and RetryFailedMax pace the retries of a
	// failed one (see upstream.Options; zero: upstream's defaults).
	RestartDelays                    []time.Duration
	RetryFailedAfter, RetryFailedMax time.Duration

	// Limits are the settings a reload may change in place (SetLimits).
	Limits Limits

	// Traced gives every call made under a traced request a client span
	// (internal/tracing) and, over HTTP, a traceparent header. Set it
	// only when the gateway traces.
	Traced bool

	// Logger is the operational log; the destination's lines carry its
	// name. Nil discards.
	Logger *slog.Logger
}

// HTTP is how a remote server is reached.
type HTTP struct {
	// URL is the server's endpoint. Required.
	URL string
	// SSE speaks the legacy HTTP+SSE transport; false speaks Streamable
	// HTTP.
	SSE bool
	// Header is sent with every request (secrets already substituted);
	// nil sends none.
	Header http.Header
	// ForwardHeaders names the client request headers passed on, each
	// canonical; the client's Authorization is passed only when named.
	ForwardHeaders []string
	// IdentityHeader, when not "", is the header that carries the
	// authenticated caller's name, which the gateway's authentication
	// sets on the client's request; it is passed on.
	IdentityHeader string
	// AWS signs every request with SigV4; nil sends them unsigned.
	AWS *sigv4.Options
	// OAuth makes the OAuth client whose tokens every request carries
	// (called once, by New); nil means no OAuth. An error leaves the
	// destination needs_login.
	OAuth func(log *slog.Logger) (*oauth.Client, error)
}

// Limits are the settings of a Destination a reload changes in place.
type Limits struct {
	// ChildIdle is the idle timeout of a session that owns a process
	// (isolation: session); zero leaves the session table's.
	ChildIdle time.Duration
	// ChildOrphan ends such a session once its client is gone that long
	// (see session.Session.OwnChild); zero: off.
	ChildOrphan time.Duration
	// MaxChildren caps the running per-session processes; zero means no
	// cap.
	MaxChildren int
}

// Destination serves one upstream server to the fronts. It implements
// streamable.Destination, the legacy SSE and stdio fronts' Destination and
// router.Server; its methods are safe for concurrent use.
type Destination struct {
	name   string
	opts   Options
	dialer func(forward http.Header) upstream.Dialer
	newUp  func(dial upstream.Dialer, shared bool, era upstream.Era) *upstream.Upstream

	log    *slog.Logger       // the destination's operational log
	eras   *eraState          // protocol-era detection and translation (era.go)
	aws    *awsClient         // the signing client of an HTTP type with an aws block; else nil
	oauth  *oauthTarget       // the OAuth client of an HTTP type with an oauth block; else nil
	shared *upstream.Upstream // nil unless stdio with isolation shared
	modern *upstream.Upstream // nil for legacy sse destinations
	// childIdle is the idle timeout, in nanoseconds, of a session that
	// owns a process (session_child_idle_timeout); zero leaves the
	// table's. A reload updates it in place.
	childIdle atomic.Int64
	// childOrphan is session_orphan_timeout in nanoseconds (see
	// session.Session.OwnChild; zero: off), and maxChildren the cap on
	// running per-session processes (zero: none); a reload updates both
	// in place (SetLimits).
	childOrphan atomic.Int64
	maxChildren atomic.Int64
	// toolHeaders caches the x-mcp-header bindings of modern's tools
	// (see ParamHeaders).
	toolHeaders toolHeaders
	// traced is set, before any call, when the gateway traces (traced.go):
	// calls get client spans and streamable HTTP connections copy
	// params._meta.traceparent into their header.
	traced bool
	// limits bound its requests (limits: in the config); nil: none. A
	// reload stores the new generation's (policy.NewDestinationLimiter
	// keeps the buckets of unchanged settings).
	limits atomic.Pointer[policy.DestinationLimiter]

	mu      sync.Mutex
	private map[*upstream.Upstream]*child // guarded by mu: per-session upstreams
	closed  bool                          // guarded by mu

	probeMu  sync.Mutex
	probedAt time.Time // guarded by probeMu: when probeErr was found
	probeErr error     // guarded by probeMu: the last remote probe's result

	// releasing counts release calls closing a private upstream; Close
	// waits for them (Add only under mu while !closed).
	releasing sync.WaitGroup
	// retiredRestarts sums the restarts of the private upstreams released
	// (see restarts); guarded by mu.
	retiredRestarts uint64
}

// New makes the destination; its shared process, if any, starts on Start
// or with the first session.
func New(opts Options) *Destination {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Destination{name: opts.Name, opts: opts, private: map[*upstream.Upstream]*child{}, traced: opts.Traced}
	d.SetLimits(opts.Limits)
	dlog := log.With("destination", opts.Name)
	d.log = dlog
	maxMsg := opts.MaxMessage
	switch {
	case opts.Stdio != nil:
		// One log budget for all of the destination's processes.
		spec := *opts.Stdio
		if spec.MaxLine == 0 {
			spec.MaxLine = maxMsg
		}
		if spec.Logger == nil {
			spec.Logger = dlog
		}
		if spec.Lines == nil {
			spec.Lines = stdio.NewLineLimit(0, 0)
		}
		d.dialer = func(http.Header) upstream.Dialer {
			return func(ctx context.Context, deliver func([]byte), oversize func([]byte)) (upstream.Conn, error) {
				p, err := stdio.Start(spec, deliver, oversize)
				if err != nil {
					return nil, err
				}
				dlog.Info("process started", "pid", p.Pid())
				return p, nil
			}
		}
	case opts.HTTP != nil:
		h := opts.HTTP
		d.aws = newAWSClient(h, dlog)
		d.oauth = newOAuthTarget(opts.Name, h, dlog)
		if d.oauth != nil && d.oauth.oc != nil {
			// The clients given a login's URL hear that it is done.
			d.oauth.oc.OnLogin(func(id string) {
				for _, up := range d.upstreams() {
					up.ElicitationComplete(id)
				}
			})
		}
		d.dialer = func(forward http.Header) upstream.Dialer {
			hdr := upstreamHeader(h, forward)
			if id := h.IdentityHeader; id != "" && forward.Get(id) != "" {
				// Set by the authentication middleware: the caller's name.
				hdr.Set(id, forward.Get(id))
			}
			return func(ctx context.Context, deliver func([]byte), oversize func([]byte)) (upstream.Conn, error) {
				client, err := d.aws.get(ctx)
				if err != nil {
					// No region, an unknown profile: connecting again at
					// once cannot help; the next session tries again.
					return nil, upstream.Permanent(err)
				}
				if d.oauth != nil {
					if client, err = d.oauth.get(); err != nil {
						return nil, err
					}
				}
				c, err := dialHTTP(ctx, h, hdr, client, maxMsg, dlog, d.traced, deliver, oversize)
				return c, d.oauth.permanent(err)
			}
		}
	case opts.AgentCore != nil:
		ac := *opts.AgentCore
		if ac.MaxMessage == 0 {
			ac.MaxMessage = maxMsg
		}
		if ac.Logger == nil {
			ac.Logger = dlog
		}
		if ac.AWS.Logger == nil {
			ac.AWS.Logger = dlog
		}
		d.dialer = (&agentCoreTarget{opts: ac}).dialer
	default:
		d.dialer = func(http.Header) upstream.Dialer {
			return func(context.Context, func([]byte), func([]byte)) (upstream.Conn, error) {
				return nil, upstream.Permanent(fmt.Errorf("destination %s: no transport configured", opts.Name))
			}
		}
	}
	timeout := opts.Timeout
	d.newUp = func(dial upstream.Dialer, shared bool, era upstream.Era) *upstream.Upstream {
		return upstream.New(upstream.Options{
			Name: opts.Name, Dial: dial, Shared: shared, Era: era,
			RestartDelays: opts.RestartDelays, HandshakeTimeout: timeout, Logger: log,
			RetryFailedAfter: opts.RetryFailedAfter, RetryFailedMax: opts.RetryFailedMax,
			OnState: d.eras.restarted,
		})
	}
	d.eras = newEraState(d, timeout)
	if opts.Stdio != nil && !opts.PerSession {
		d.shared = d.newUp(d.dialer(nil), true, upstream.Legacy)
	}
	if !d.legacySSE() {
		d.modern = d.newUp(d.dialer(nil), true, upstream.Modern)
	}
	return d
}

// A child process is the connection the upstream asks the most of: it
// encodes a message straight into its pipe and tells the stall watchdog
// what waits unread and how its threads stand with the CPU.
var (
	_ upstream.Conn         = (*stdio.Process)(nil)
	_ upstream.AppendWriter = (*stdio.Process)(nil)
	_ upstream.Unreader     = (*stdio.Process)(nil)
	_ upstream.InputWaiter  = (*stdio.Process)(nil)
	_ upstream.CPUWaiter    = (*stdio.Process)(nil)
)

// legacySSE reports a legacy HTTP+SSE server, which has no modern side.
func (d *Destination) legacySSE() bool { return d.opts.HTTP != nil && d.opts.HTTP.SSE }

// Name returns the destination's name (router.Server).
func (d *Destination) Name() string { return d.name }

// OAuthCallback is the handler of the redirects of the logins the gateway
// starts for the destination (oauth.callback_url), served at
// /oauth/callback/{name}; nil when it starts none.
func (d *Destination) OAuthCallback() http.Handler { return d.oauth.callback() }

// upstreamHeader builds the headers of an HTTP upstream: the configured
// ones (secrets already substituted) plus the client headers named in
// forward_headers. The client's Authorization is never passed otherwise.
func upstreamHeader(cfg *HTTP, forward http.Header) http.Header {
	h := cfg.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for _, name := range cfg.ForwardHeaders {
		if vs := forward.Values(name); len(vs) > 0 {
			h[http.CanonicalHeaderKey(name)] = append([]string(nil), vs...)
		}
	}
	return h
}

// child is a per-session upstream (a process, for stdio) and its client
// session.
type child struct {
	// s is the client session it serves, directly or as a member of an
	// aggregated session; nil when the downstream is not a client session.
	s *session.Session
	// reaping is set, under destination.mu, once s was ended to make room
	// (max_children): the child no longer counts against the cap while it
	// stops.
	reaping bool
}

// errChildReaped is the end error of a session ended to make room for
// another under max_children.
var errChildReaped = errors.New("session ended: the destination was at max_children and this session's process was the least recently used idle one")

// SetLimits takes the settings a reload may change in place.
func (d *Destination) SetLimits(l Limits) {
	d.childIdle.Store(int64(l.ChildIdle))
	d.childOrphan.Store(int64(l.ChildOrphan))
	d.maxChildren.Store(int64(l.MaxChildren))
}

// SetRequestLimits bounds the destination's requests from now on (nil:
// none); RequestLimits returns the bound in force.
func (d *Destination) SetRequestLimits(l *policy.DestinationLimiter) { d.limits.Store(l) }

// RequestLimits returns what SetRequestLimits stored last (nil: none).
func (d *Destination) RequestLimits() *policy.DestinationLimiter { return d.limits.Load() }

// admit registers up, the upstream of a new client session s (nil when the
// downstream is none), as private. A stdio destination at max_children
// makes room: it returns the session of the least recently used idle child
// to end (its process stops when it has left), or session.ErrTooMany when
// every child's session is busy or still being set up.
func (d *Destination) admit(up *upstream.Upstream, s *session.Session) (victim *session.Session, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, upstream.ErrClosed
	}
	if max := int(d.maxChildren.Load()); d.opts.Stdio != nil && max > 0 {
		running := 0
		var seen time.Time
		for _, c := range d.private {
			if c.reaping {
				continue
			}
			running++
			if c.s == nil {
				continue
			}
			if at, idle := c.s.IdleSince(); idle && (victim == nil || at.Before(seen)) {
				victim, seen = c.s, at
			}
		}
		if running < max {
			victim = nil
		} else {
			if victim == nil {
				return nil, fmt.Errorf("%w: destination %s runs %d processes (max_children), each for a session with a request in flight, a stream open or still starting", session.ErrTooMany, d.name, running)
			}
			for _, c := range d.private {
				if c.s == victim {
					c.reaping = true
				}
			}
		}
	}
	d.private[up] = &child{s: s}
	return victim, nil
}

// clientSession returns the client session behind down, or nil.
func clientSession(down upstream.Downstream) *session.Session {
	if cs, ok := down.(interface{ ClientSession() *session.Session }); ok {
		return cs.ClientSession()
	}
	return nil
}

// Open attaches a legacy session.
func (d *Destination) Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return d.Join(ctx, s, init)
}

// Join attaches a downstream (a session, or an aggregating router's member
// slot) and returns its backend and the InitializeResult response. A
// modern-only server gets the session translated (era.go).
func (d *Destination) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	if d.eras.legacyTranslated(ctx) {
		return d.eras.legacyOverModern().Join(ctx, down, init)
	}
	up := d.shared
	var owned *upstream.Upstream
	cs := clientSession(down)
	if up == nil {
		owned = d.newUp(d.dialer(clientHeader(ctx)), false, upstream.Legacy)
		victim, err := d.admit(owned, cs)
		if err != nil {
			return nil, nil, err
		}
		if victim != nil && victim.Reap(errChildReaped) { // its backend leaves: its process stops (release)
			d.log.Info("max_children reached: ended the session of the least recently used idle process",
				"max_children", d.maxChildren.Load(), "session", victim.ID[:8]+"…")
		}
		up = owned
	}
	m, res, err := up.Join(ctx, down, init)
	if err != nil {
		if owned != nil {
			d.release(owned)
		}
		return nil, nil, err
	}
	if owned != nil && d.opts.Stdio != nil && cs != nil {
		// The session owns a process: reap it sooner when idle, and
		// soon once its client is gone.
		cs.OwnChild(time.Duration(d.childIdle.Load()), time.Duration(d.childOrphan.Load()))
	}
	return &memberBackend{Member: m, d: d, owned: owned}, res, nil
}

// Stateless sends a 2026-07-28 request: to the server itself when it
// speaks that era, else translated onto its legacy side (era.go).
func (d *Destination) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return d.limits.Load().Send(ctx, req, d.stateless)
}

// stateless sends it to the server itself when it speaks that era, else
// translated onto its legacy side (era.go).
func (d *Destination) stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if !d.eras.modernNative(ctx) {
		t, err := d.eras.modernOverLegacy()
		if err != nil {
			return nil, err
		}
		return t.Stateless(ctx, req)
	}
	return d.nativeStateless(ctx, req)
}

// nativeStateless sends a 2026-07-28 request to the server as it is.
func (d *Destination) nativeStateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if d.modern == nil {
		return nil, jsonrpc.Errorf(jsonrpc.UnsupportedProtocolVersion,
			"destination %s is a legacy HTTP+SSE server; send initialize (protocol 2025-11-25 or earlier)", d.name)
	}
	return d.send(ctx, req, d.modern.CallStateless)
}

// release stops a private upstream whose session ended. The upstream stays
// in private until it has stopped, so a concurrent Close (shutdown) either
// closes it itself or waits for this release: Close never returns while a
// process is still running.
func (d *Destination) release(up *upstream.Upstream) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return // Close stops it and waits
	}
	d.releasing.Add(1)
	d.mu.Unlock()
	defer d.releasing.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = up.Close(ctx)
	d.mu.Lock()
	delete(d.private, up)
	d.retiredRestarts += up.Restarts()
	d.mu.Unlock()
}

// Close stops every process of the destination and waits for them.
func (d *Destination) Close(ctx context.Context) {
	d.mu.Lock()
	d.closed = true // from now on private only shrinks by this Close
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, up := range d.upstreams() {
		wg.Go(func() { _ = up.Close(ctx) })
	}
	wg.Go(func() { d.eras.close(ctx) })
	wg.Wait()
	d.releasing.Wait() // an up.Close that lost the race to release's returned at once
	d.aws.close()
	d.oauth.close()
}

// Retry starts the destination's failed upstreams again now (a reload);
// it reports whether there was one.
func (d *Destination) Retry() bool {
	retried := false
	for _, up := range d.sharedUpstreams() {
		retried = up.Retry() || retried
	}
	return retried
}

// NextRetry is when a failed destination accepts work again (the zero time
// unless failed).
func (d *Destination) NextRetry() time.Time {
	if d.shared != nil {
		return d.shared.NextRetry()
	}
	return time.Time{}
}

// Usage counts the destination's upstream sessions: members are the client
// sessions it serves, directly or through an aggregated endpoint; children
// the per-session processes running (isolation: session).
func (d *Destination) Usage() (members, children int) {
	if d.shared != nil {
		return d.shared.Members(), 0
	}
	d.mu.Lock()
	n := len(d.private)
	d.mu.Unlock()
	if d.opts.Stdio != nil {
		return n, n
	}
	return n, 0
}

// sharedUpstreams returns the shared and modern upstreams, those that exist.
func (d *Destination) sharedUpstreams() []*upstream.Upstream {
	var ups []*upstream.Upstream
	for _, up := range []*upstream.Upstream{d.shared, d.modern} {
		if up != nil {
			ups = append(ups, up)
		}
	}
	return ups
}

// upstreams returns every upstream of the destination: shared, modern and
// per-session ones.
func (d *Destination) upstreams() []*upstream.Upstream {
	ups := d.sharedUpstreams()
	d.mu.Lock()
	for up := range d.private {
		ups = append(ups, up)
	}
	d.mu.Unlock()
	return ups
}

// InFlight counts the requests sent to the destination's servers and not
// answered yet.
func (d *Destination) InFlight() int {
	n := 0
	for _, up := range d.upstreams() {
		n += up.InFlight()
	}
	return n
}

// Restarts counts the destination's connections restarted after an
// unexpected end, those of per-session upstreams since released included.
func (d *Destination) Restarts() uint64 {
	var n uint64
	for _, up := range d.sharedUpstreams() {
		n += up.Restarts()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n += d.retiredRestarts // one lock with private: a release is counted once
	for up := range d.private {
		n += up.Restarts()
	}
	return n
}

// ProbeTimeout bounds /healthz's connection attempt to a remote server.
const ProbeTimeout = 2 * time.Second

// probeEvery is how long a remote probe's result is reused.
const probeEvery = 5 * time.Second

// probe reports whether the remote server's host accepts a TCP connection
// (a cached answer, at most probeEvery old): the connections to it are made
// per session, on demand, so nothing else tells whether it is up.
func (d *Destination) probe(ctx context.Context) error {
	d.probeMu.Lock()
	defer d.probeMu.Unlock()
	if !d.probedAt.IsZero() && time.Since(d.probedAt) < probeEvery {
		return d.probeErr
	}
	u, err := url.Parse(d.opts.HTTP.URL)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err == nil {
		_ = c.Close()
	} else {
		err = fmt.Errorf("%s unreachable: %w", u.Host, err)
	}
	d.probeErr, d.probedAt = err, time.Now()
	return err
}

// State summarises the destination for /healthz: "ready", "unreachable" (a
// remote host that refuses connections), or the shared upstream's state.
func (d *Destination) State(ctx context.Context) (string, string) {
	up := d.shared
	if up == nil {
		// Per-session connections start on demand; a stdio command that
		// cannot be found would fail every one of them, and so would a
		// remote host that refuses.
		switch {
		case d.opts.Stdio != nil:
			if err := commandMissing(d.opts.Stdio); err != nil {
				return upstream.Failed.String(), err.Error()
			}
		case d.opts.HTTP != nil:
			if st, why := d.oauth.state(ctx); st != "" {
				return st, why
			}
			if err := d.probe(ctx); err != nil {
				return "unreachable", err.Error()
			}
		}
		return "ready", ""
	}
	st, err := up.State()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return st.String(), msg
}

// commandMissing reports a stdio command that cannot be started: not found
// in PATH, or (a path) missing or not executable. A relative path is
// relative to the process's working directory, as when it starts.
func commandMissing(spec *stdio.Spec) error {
	if len(spec.Argv) == 0 {
		return nil
	}
	name := spec.Argv[0]
	if strings.Contains(name, "/") && !filepath.IsAbs(name) && spec.Dir != "" {
		name = filepath.Join(spec.Dir, name)
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("command %q: %w", spec.Argv[0], err)
	}
	return nil
}

// memberBackend adapts an upstream member to session.Backend.
type memberBackend struct {
	*upstream.Member
	d     *Destination
	owned *upstream.Upstream // the session's own upstream (isolation: session); nil when shared
}

func (b *memberBackend) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return b.d.limits.Load().Send(ctx, req, b.call) // limits.go: nil sends at once
}

func (b *memberBackend) call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return b.d.send(ctx, req, b.Member.Call)
}

func (b *memberBackend) Leave() {
	b.Member.Leave()
	if b.owned != nil {
		b.d.release(b.owned)
	}
}

// HeaderKey is the context key of the client's request header, for
// HTTP.ForwardHeaders: a request's context answers it with an http.Header.
type HeaderKey struct{}

// clientHeader returns the client's request header, nil when ctx has none.
func clientHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(HeaderKey{}).(http.Header)
	return h
}

// Start starts the shared upstream, if any, in the background.
func (d *Destination) Start() {
	if d.shared != nil {
		d.shared.Start()
	}
}
