package gateway

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

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/stdio"
)

// destination serves one configured upstream server to the fronts. It
// implements streamable.Destination and sse.Destination.
//
// Which upstream a session gets depends on the type and isolation:
//
//	stdio, isolation shared   one process for every legacy session (shared)
//	stdio, isolation session  one process per session (private)
//	streamable_http, sse      one upstream session per client session (private)
//	agentcore                 likewise, each an AgentCore runtime session
//
// 2026-07-28 requests go to modern, a separate stateless connection, so one
// process never has to mix protocol eras.
type destination struct {
	name   string
	cfg    *config.Destination
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
	// running per-session processes (max_children resolved: never zero);
	// a reload updates both in place (setLimits).
	childOrphan atomic.Int64
	maxChildren atomic.Int64
	// toolHeaders caches the x-mcp-header bindings of modern's tools
	// (see paramHeaders).
	toolHeaders toolHeaders
	// traced is set, before any call, when the gateway traces (tracing.go):
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

func newDestination(cfg *config.Destination, global *config.Config, log *slog.Logger) *destination {
	d := &destination{name: cfg.Name, cfg: cfg, private: map[*upstream.Upstream]*child{}}
	d.setLimits(global)
	dlog := log.With("destination", cfg.Name)
	d.log = dlog
	maxMsg := int(global.MaxMessageBytes)
	switch cfg.Type {
	case config.TypeStdio:
		argv := append(append([]string{}, cfg.Command...), cfg.Args...)
		// One log budget for all of the destination's processes; the stderr
		// lines an exit error carries to clients are redacted.
		spec := stdio.Spec{Argv: argv, Env: stdio.Env(cfg.Env, cfg.Secrets), Dir: cfg.Cwd, MaxLine: maxMsg, Logger: dlog,
			Lines: stdio.NewLineLimit(0, 0), Redact: audit.NewRedactor(global.SecretValues()).String}
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
	case config.TypeStreamableHTTP, config.TypeSSE:
		dial := dialStreamable
		if cfg.Type == config.TypeSSE {
			dial = dialSSE
		}
		d.aws = newAWSClient(cfg, dlog)
		d.oauth = newOAuthTarget(cfg, dlog)
		d.dialer = func(forward http.Header) upstream.Dialer {
			hdr := upstreamHeader(cfg, forward)
			if h := global.Auth.IdentityHeader; h != "" && forward.Get(h) != "" {
				// Set by the authentication middleware: the caller's name.
				hdr.Set(h, forward.Get(h))
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
				c, err := dial(ctx, cfg.URL, hdr, client, maxMsg, dlog, d.traced, deliver, oversize)
				return c, d.oauth.permanent(err)
			}
		}
	case config.TypeAgentCore:
		d.dialer = (&agentCoreTarget{cfg: cfg, maxMsg: maxMsg, log: dlog}).dialer
	}
	delays := restartDelays(global.Restart)
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = global.Timeout
	}
	d.newUp = func(dial upstream.Dialer, shared bool, era upstream.Era) *upstream.Upstream {
		return upstream.New(upstream.Options{
			Name: cfg.Name, Dial: dial, Shared: shared, Era: era,
			RestartDelays: delays, HandshakeTimeout: timeout, Logger: log,
			RetryFailedAfter: global.Restart.RetryAfter, RetryFailedMax: global.Restart.RetryMax,
			OnState: d.eras.restarted,
		})
	}
	d.eras = newEraState(d, cfg, timeout)
	if cfg.Type == config.TypeStdio && cfg.Isolation != config.IsolationSession {
		d.shared = d.newUp(d.dialer(nil), true, upstream.Legacy)
	}
	if cfg.Type != config.TypeSSE {
		d.modern = d.newUp(d.dialer(nil), true, upstream.Modern)
	}
	return d
}

// upstreamHeader builds the headers of an HTTP upstream: the configured
// ones (secrets already substituted) plus the client headers named in
// forward_headers. The client's Authorization is never passed otherwise.
func upstreamHeader(cfg *config.Destination, forward http.Header) http.Header {
	h := http.Header{}
	for k, v := range cfg.Headers {
		h.Set(k, v)
	}
	for _, name := range cfg.ForwardHeaders {
		if vs := forward.Values(name); len(vs) > 0 {
			h[http.CanonicalHeaderKey(name)] = append([]string(nil), vs...)
		}
	}
	return h
}

// restartDelays expands the policy into one delay per attempt.
func restartDelays(r config.Restart) []time.Duration {
	out := make([]time.Duration, r.MaxAttempts)
	for i := range out {
		switch {
		case len(r.Delays) == 0:
		case i < len(r.Delays):
			out[i] = r.Delays[i]
		default:
			out[i] = r.Delays[len(r.Delays)-1]
		}
	}
	return out
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

// setLimits takes the global settings a reload may change in place.
func (d *destination) setLimits(global *config.Config) {
	d.childIdle.Store(int64(global.SessionChildIdleTimeout))
	d.childOrphan.Store(int64(global.SessionOrphanTimeout))
	maxChildren := global.MaxChildren
	if maxChildren == 0 {
		maxChildren = global.MaxSessions
	}
	d.maxChildren.Store(int64(maxChildren))
}

// admit registers up, the upstream of a new client session s (nil when the
// downstream is none), as private. A stdio destination at max_children
// makes room: it returns the session of the least recently used idle child
// to end (its process stops when it has left), or session.ErrTooMany when
// every child's session is busy or still being set up.
func (d *destination) admit(up *upstream.Upstream, s *session.Session) (victim *session.Session, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, upstream.ErrClosed
	}
	if max := int(d.maxChildren.Load()); d.cfg.Type == config.TypeStdio && max > 0 {
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
func (d *destination) Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return d.Join(ctx, s, init)
}

// Join attaches a downstream (a session, or an aggregating router's member
// slot) and returns its backend and the InitializeResult response. A
// modern-only server gets the session translated (era.go).
func (d *destination) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
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
	if owned != nil && d.cfg.Type == config.TypeStdio && cs != nil {
		// The session owns a process: reap it sooner when idle, and
		// soon once its client is gone.
		cs.OwnChild(time.Duration(d.childIdle.Load()), time.Duration(d.childOrphan.Load()))
	}
	return &memberBackend{Member: m, d: d, owned: owned}, res, nil
}

// Stateless sends a 2026-07-28 request: to the server itself when it
// speaks that era, else translated onto its legacy side (era.go).
func (d *destination) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return d.limits.Load().Send(ctx, req, d.stateless)
}

// stateless sends it to the server itself when it speaks that era, else
// translated onto its legacy side (era.go).
func (d *destination) stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
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
func (d *destination) nativeStateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if d.modern == nil {
		return nil, jsonrpc.Errorf(jsonrpc.UnsupportedProtocolVersion,
			"destination %s is a legacy HTTP+SSE server; send initialize (protocol 2025-11-25 or earlier)", d.name)
	}
	if d.traced {
		return d.tracedSend(ctx, req, d.modern.CallStateless)
	}
	c, err := d.modern.CallStateless(ctx, req)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// release stops a private upstream whose session ended. The upstream stays
// in private until it has stopped, so a concurrent Close (shutdown) either
// closes it itself or waits for this release: Close never returns while a
// process is still running.
func (d *destination) release(up *upstream.Upstream) {
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
func (d *destination) Close(ctx context.Context) {
	d.mu.Lock()
	d.closed = true
	var ups []*upstream.Upstream
	for _, up := range []*upstream.Upstream{d.shared, d.modern} {
		if up != nil {
			ups = append(ups, up)
		}
	}
	for up := range d.private {
		ups = append(ups, up)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, up := range ups {
		wg.Go(func() { _ = up.Close(ctx) })
	}
	wg.Go(func() { d.eras.close(ctx) })
	wg.Wait()
	d.releasing.Wait() // an up.Close that lost the race to release's returned at once
	d.aws.close()
	d.oauth.close()
}

// retry starts the destination's failed upstreams again now (a reload);
// it reports whether there was one.
func (d *destination) retry() bool {
	retried := false
	for _, up := range []*upstream.Upstream{d.shared, d.modern} {
		if up != nil && up.Retry() {
			retried = true
		}
	}
	return retried
}

// nextRetry is when a failed destination accepts work again (the zero time
// unless failed).
func (d *destination) nextRetry() time.Time {
	if d.shared != nil {
		return d.shared.NextRetry()
	}
	return time.Time{}
}

// usage counts the destination's upstream sessions: members are the client
// sessions it serves, directly or through an aggregated endpoint; children
// the per-session processes running (isolation: session).
func (d *destination) usage() (members, children int) {
	if d.shared != nil {
		return d.shared.Members(), 0
	}
	d.mu.Lock()
	n := len(d.private)
	d.mu.Unlock()
	if d.cfg.Type == config.TypeStdio {
		return n, n
	}
	return n, 0
}

// probeTimeout bounds /healthz's connection attempt to a remote server.
const probeTimeout = 2 * time.Second

// probeEvery is how long a remote probe's result is reused.
const probeEvery = 5 * time.Second

// probe reports whether the remote server's host accepts a TCP connection
// (a cached answer, at most probeEvery old): the connections to it are made
// per session, on demand, so nothing else tells whether it is up.
func (d *destination) probe(ctx context.Context) error {
	d.probeMu.Lock()
	defer d.probeMu.Unlock()
	if !d.probedAt.IsZero() && time.Since(d.probedAt) < probeEvery {
		return d.probeErr
	}
	u, err := url.Parse(d.cfg.URL)
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
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
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
func (d *destination) State(ctx context.Context) (string, string) {
	up := d.shared
	if up == nil {
		// Per-session connections start on demand; a stdio command that
		// cannot be found would fail every one of them, and so would a
		// remote host that refuses.
		switch d.cfg.Type {
		case config.TypeStdio:
			if err := commandMissing(d.cfg); err != nil {
				return upstream.Failed.String(), err.Error()
			}
		case config.TypeStreamableHTTP, config.TypeSSE:
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
func commandMissing(cfg *config.Destination) error {
	if len(cfg.Command) == 0 {
		return nil
	}
	name := cfg.Command[0]
	if strings.Contains(name, "/") && !filepath.IsAbs(name) && cfg.Cwd != "" {
		name = filepath.Join(cfg.Cwd, name)
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("command %q: %w", cfg.Command[0], err)
	}
	return nil
}

// memberBackend adapts an upstream member to session.Backend.
type memberBackend struct {
	*upstream.Member
	d     *destination
	owned *upstream.Upstream // the session's own upstream (isolation: session); nil when shared
}

func (b *memberBackend) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return b.d.limits.Load().Send(ctx, req, b.call) // limits.go: nil sends at once
}

func (b *memberBackend) call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if b.d.traced {
		return b.d.tracedSend(ctx, req, b.Member.Call)
	}
	c, err := b.Member.Call(ctx, req)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (b *memberBackend) Leave() {
	b.Member.Leave()
	if b.owned != nil {
		b.d.release(b.owned)
	}
}

// headerKey is the context key of the client's request header, for
// forward_headers; the audited request's context answers for it
// (auditedRequest).
type headerKey struct{}

// clientHeader returns the client's request header, nil outside an audited
// request.
func clientHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(headerKey{}).(http.Header)
	return h
}

// start starts the shared upstream, if any, in the background.
func (d *destination) start() {
	if d.shared != nil {
		d.shared.Start()
	}
}
