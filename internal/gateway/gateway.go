// Package gateway is Switchboard's composition root: it turns a loaded
// config into running parts and wires them in a fixed order.
//
//	client ─HTTP─▶ audit ─▶ guard (Origin/Host) ─▶ front (streamable | legacy sse)
//	                                                  │ session.Session
//	                                                  ▼
//	                                   destination ─▶ upstream.Upstream ─▶ stdio.Process
//
// The gateway owns every long-lived goroutine it starts (the HTTP server,
// the session janitor) and every destination, and Run ends them all before
// it returns: streams are closed, children get stdin EOF, SIGTERM, SIGKILL.
package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/connlimit"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/edge"
	"github.com/switchboard-mcp/switchboard/internal/front/sse"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/guard/gate"
	"github.com/switchboard-mcp/switchboard/internal/metrics"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/reqbody"
	"github.com/switchboard-mcp/switchboard/internal/router"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/statusui"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
)

// Gateway serves a config, and the configs it is reloaded with.
type Gateway struct {
	opts     Options
	static   *config.Config // the config Run started with: listen, log and audit outputs
	log      *slog.Logger
	audit    *audit.Logger
	redactor *audit.Redactor
	sessions *session.Table
	done     chan struct{} // closed when shutdown begins: streams end
	// draining is closed when a cluster replica begins to drain (before
	// done): /readyz answers 503, listen streams end, calls go on. Nil
	// without a cluster block.
	draining chan struct{}
	closers  []io.Closer
	// auditDest is where the audit log goes ("off", "stderr", a file, or
	// "(writer)" for Options.AuditWriter), for the start-up log.
	auditDest string
	// metrics are observed from every audit record (observe.go); they
	// exist whether or not the config enables /metrics, so a reload can
	// turn it on.
	metrics *metrics.Metrics
	// statusPage is /ui (statuspage.go), fed like the metrics.
	statusPage *statusui.Page
	// tracer makes the spans of every request (tracing.go); nil when the
	// config Switchboard started with has no tracing block. Set by New.
	tracer *tracing.Tracer
	// cluster is this replica's part in a cluster (cluster.go); zero
	// without a cluster block. Set by New, never changed (a reload does
	// not change the cluster block).
	cluster clusterParts
	// edge serves every HTTP request (internal/edge): the gateway stores
	// each configuration generation's edge.Table in it. Set by New.
	edge *edge.Edge

	// cur is what requests see: replaced whole by a reload (reload.go).
	cur atomic.Pointer[state]
	// stdioView is the view ServeStdio serves (set before it starts
	// anything): startShared starts only that view's servers. Nil when
	// serving HTTP.
	stdioView atomic.Pointer[string]
	// watchSum is the checksum of the config files as New loaded them, the
	// watcher's baseline; read-only after New.
	watchSum string

	// reloadMu serialises reloads (the only writers of cur) and guards the
	// fields below it.
	reloadMu sync.Mutex
	// pinMu serializes the approvals of /ui (pinsui.go): each reads,
	// changes and writes the pin file.
	pinMu   sync.Mutex
	routers map[string]*router.Router // by view name; kept across reloads
	// gates are the guards of the destinations that have them (guards.go),
	// kept with their destination across reloads.
	gates      map[*destination.Destination]*gate.Gate
	lastReload edge.Reload
	retiring   sync.WaitGroup // destinations replaced by a reload, still closing
	stopped    bool           // stopAll has begun: reloads are refused

	// clientLimits holds the clients' rate limits (policy.go), their
	// buckets kept across reloads.
	clientLimits policy.Limiter
	// lim bounds the connections of the servers serveAll runs (nil
	// before); tests read its counts.
	lim atomic.Pointer[connlimit.Limit]
	// owners maps each session opened by an authenticated caller to its
	// name (the edge refuses the session to anyone else).
	owners policy.Owners

	// reloadsOK and reloadsFailed count reloads applied and rejected
	// (guarded by reloadMu).
	reloadsOK, reloadsFailed uint64
}

// state is one generation of the configuration, as requests see it. It is
// immutable once published.
type state struct {
	cfg      *config.Config
	dests    map[string]*destination.Destination
	routers  map[string]*router.Router // the aggregated views', by name ("" the default; aggregate.go)
	loadedAt time.Time
	// table is what the HTTP edge serves: the fronts, the guard and the
	// callers' authentication and access.
	table *edge.Table
}

// Options are the parts of a Gateway that do not come from the config file.
type Options struct {
	// Logger is the operational log; nil means a text log on stderr at the
	// config's level (secret values redacted either way).
	Logger *slog.Logger
	// AuditWriter receives the audit log; nil means the config's audit.path
	// (see config.Audit: a file, stderr, off, or by default a file in the
	// state directory).
	AuditWriter io.Writer
	// ConfigPath is the file to reload from; "" disables reloading.
	ConfigPath string
	// NoReload disables watching ConfigPath; Reload and SIGHUP still work.
	NoReload bool
	// ReloadInterval is how often ConfigPath is checked for changes besides
	// file-system events. Zero means 1 s.
	ReloadInterval time.Duration
	// StdioClient is the configured client ServeStdio serves as: its
	// grants, tool rules and rate limit apply to every request, and its
	// scripts' audit lines name it. "" serves the local user with no
	// rules.
	StdioClient string

	// Bounds of the HTTP servers (see serveAll).
	//
	// IdleTimeout closes a kept-alive connection that has had no request
	// for that long. Zero means 2 min; negative keeps them open.
	IdleTimeout time.Duration
	// BodyIdleTimeout ends a request whose body sends no byte for that
	// long (408; the deadline moves with each byte, so slow uploads that
	// progress are not cut). Zero means 30 s; negative disables it.
	BodyIdleTimeout time.Duration
	// MaxConns caps the client connections held open, all listeners
	// together; at the cap the connection idle longest is closed for a new
	// one. Zero means the config's connections.max (whose zero is
	// min(1024, ¾ of the file-descriptor limit)); negative means no cap.
	// The config's other connection bounds apply either way.
	MaxConns int
}

// Defaults of the Options bounds.
const (
	defaultIdleTimeout     = 2 * time.Minute
	defaultBodyIdleTimeout = 30 * time.Second
	// readHeaderTimeout bounds the wait for a request's headers when the
	// config does not say (it always does once validated).
	readHeaderTimeout = config.DefaultReadHeaderTimeout
)

// New builds a Gateway; nothing runs until Run.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	red := audit.NewRedactor(cfg.SecretValues())
	g := &Gateway{opts: opts, static: cfg, redactor: red, done: make(chan struct{}), routers: map[string]*router.Router{},
		gates: map[*destination.Destination]*gate.Gate{}}
	log := opts.Logger
	if log == nil {
		w, err := g.openOutput(cfg.Log.File)
		if err != nil {
			return nil, fmt.Errorf("gateway: log file: %w", err)
		}
		log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: parseLevel(cfg.Log.Level)}))
	}
	g.log = slog.New(audit.RedactingHandler(log.Handler(), red))
	aw, err := g.auditOutput(cfg, opts.AuditWriter)
	if err != nil {
		return nil, err
	}
	if aw != nil {
		g.audit = audit.New(aw, audit.Options{LogBodies: cfg.Audit.LogBodies, Redact: red})
	}
	g.metrics = metrics.New(metrics.Options{ToolLabels: cfg.Metrics.ToolLabels, Status: g.metricsStatus, Version: buildinfo.Version()})
	tr, err := newTracer(cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if tr != nil {
		g.tracer = tr
		g.closers = append(g.closers, tracerCloser{tr})
	}
	g.statusPage = statusui.New(statusui.Options{Status: g.uiStatus, Redact: red.String})
	g.sessions = &session.Table{Max: cfg.MaxSessions, Idle: cfg.SessionIdleTimeout,
		OnDrop: func(s *session.Session) {
			g.metrics.QueueDropped(s.Dest)
			g.log.Warn("listen stream queue full; message dropped", "destination", s.Dest, "session", s.LogName())
		},
		// The id in full would let a log reader take over a live session;
		// its first group tells sessions apart.
		OnEvict: func(s *session.Session, age, idle time.Duration) {
			g.log.Info("session cap reached: evicted the least recently used idle session",
				"destination", s.Dest, "session", s.ID[:8]+"…", "age", age.Round(time.Second), "idle", idle.Round(time.Second))
		},
		OnExpire: func(s *session.Session, why error) {
			if errors.Is(why, session.ErrOrphaned) {
				g.log.Info("client left without DELETE: session ended, its process stops (session_orphan_timeout)",
					"destination", s.Dest, "session", s.ID[:8]+"…")
			}
		}}
	if cfg.Cluster != nil {
		g.draining = make(chan struct{})
	}
	if g.cluster, err = newCluster(cfg, g.log, g.draining); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if g.cluster.limits != nil {
		g.clientLimits.Shared = g.cluster.limits // before build: no request yet
	}
	g.edge = edge.New(nil, edge.Options{Cluster: g.cluster.edgeCluster(), Audit: g.audit, Metrics: g.metrics, StatusPage: g.statusPage, Tracer: g.tracer,
		Sessions: g.sessions, Owners: &g.owners, PerClient: g.perClientBound(), Done: g.done, Draining: g.draining, Routes: g.statusRoutes})
	st, _ := g.build(cfg, nil)
	g.cur.Store(st)
	g.edge.Store(st.table)
	g.lastReload = edge.Reload{Time: st.loadedAt, OK: true}
	if opts.ConfigPath != "" {
		// The baseline of the watcher, taken now: a change made before
		// Serve starts watching is still seen.
		g.watchSum = g.checksum()
	}
	return g, nil
}

// state returns the current configuration generation.
func (g *Gateway) state() *state { return g.cur.Load() }

// keepAlive converts the config's keep_alive ("0s" disables) to the fronts'
// convention (zero is their default, negative disables).
func keepAlive(cfg *config.Config) time.Duration {
	if cfg.KeepAlive <= 0 {
		return -1
	}
	return cfg.KeepAlive
}

func timeoutOf(dc *config.Destination, cfg *config.Config) time.Duration {
	if dc.Timeout > 0 {
		return dc.Timeout
	}
	return cfg.Timeout
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// auditOutput opens where the audit log goes (config.Audit.Path): w when
// not nil, stderr, a file, or nil for "off". The default file
// (config.DefaultAuditPath) falls back to stderr, with a warning, when it
// cannot be created; a configured file that cannot be is an error.
// g.auditDest says where it went, for the start-up log.
func (g *Gateway) auditOutput(cfg *config.Config, w io.Writer) (io.Writer, error) {
	switch p := cfg.Audit.Path; {
	case w != nil:
		g.auditDest = "(writer)"
		return w, nil
	case p == config.AuditOff:
		g.auditDest = "off"
		return nil, nil
	case p == config.AuditStderr || p == "-":
		g.auditDest = "stderr"
		return os.Stderr, nil
	case p != "":
		f, err := g.openOutput(p)
		if err != nil {
			return nil, fmt.Errorf("gateway: audit log: %w", err)
		}
		g.auditDest = p
		return f, nil
	}
	g.auditDest = "stderr"
	p := config.DefaultAuditPath()
	if p == "" {
		g.log.Warn("audit log: no state directory for the default file; writing the audit log to stderr (set audit.path to a file, stderr or off)")
		return os.Stderr, nil
	}
	f, err := g.openOutput(p)
	if err != nil {
		g.log.Warn("audit log: cannot create the default file; writing the audit log to stderr (set audit.path to a file, stderr or off)",
			"path", p, "err", err)
		return os.Stderr, nil
	}
	g.auditDest = p
	return f, nil
}

// openOutput opens a log file for appending ("" is stderr). Files are closed
// when the gateway stops.
func (g *Gateway) openOutput(path string) (io.Writer, error) {
	if path == "" || path == "-" {
		return os.Stderr, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, f)
	return f, nil
}

// fronts returns the Streamable HTTP front of d and the legacy SSE front's
// stream and message handlers (the messages POSTed to msgPath), with the
// settings common to every endpoint added to o.
func (g *Gateway) fronts(cfg *config.Config, d policy.Destination, o streamable.Options, msgPath string) (mcp, stream, message http.Handler) {
	o.Sessions, o.MaxBody, o.KeepAlive, o.GetStreams = g.sessions, cfg.MaxBodyBytes, keepAlive(cfg), cfg.Connections.GetStreams
	o.Done, o.Logger, o.Cluster, o.Drain, o.Events = g.done, g.log, g.cluster.frontCluster(), g.draining, g.cluster.events
	s := sse.NewServer(d, sse.ServerOptions{Name: o.Name, View: o.View, Sessions: o.Sessions, Timeout: o.Timeout,
		MaxBody: o.MaxBody, KeepAlive: o.KeepAlive, Done: o.Done, Logger: o.Logger, MessagePath: msgPath})
	return streamable.NewHandler(d, o), http.HandlerFunc(s.ServeStream), http.HandlerFunc(s.ServeMessage)
}

// Handler returns the gateway's HTTP handler (internal/edge): audit,
// guard, authentication, routes.
func (g *Gateway) Handler() http.Handler { return g.edge.Handler() }

// statusRoutes registers the status endpoints on the edge's mux.
func (g *Gateway) statusRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", edge.PermitStatus(edge.Healthz(g.health))) // HEAD too; other methods 405 with Allow
	metricsOn := func(cfg *config.Config) bool { return cfg.Metrics.Enabled }
	mux.HandleFunc("GET /metrics", edge.PermitStatus(g.when(metricsOn, g.metrics.Handler()))) // Prometheus (observe.go); 404 when off
	g.routeStatusPage(mux)                                                                    // GET /ui, /ui/status.json, … (statuspage.go)
}

// perClientBound is connections.per_client resolved: 0 is half the
// connection cap, -1 (or any negative) no bound (0 returned).
func (g *Gateway) perClientBound() int {
	n := g.static.Connections.PerClient
	switch {
	case n < 0:
		return 0
	case n > 0:
		return n
	}
	if m := g.maxConns(); m > 0 {
		return max(1, m/2)
	}
	return 0
}

// maxConns is the connection cap: Options.MaxConns, else the config's
// connections.max, else connlimit.DefaultMax; negative means none.
func (g *Gateway) maxConns() int {
	return cmp.Or(g.opts.MaxConns, g.static.Connections.Max, connlimit.DefaultMax())
}

// health is /healthz's report (edge.Healthz): each destination's state
// and when the config was loaded.
func (g *Gateway) health(ctx context.Context) edge.Health {
	cur := g.state()
	g.reloadMu.Lock()
	last := g.lastReload
	g.reloadMu.Unlock()
	h := edge.Health{ConfigLoaded: cur.loadedAt.UTC().Format(time.RFC3339Nano), LastReload: last,
		Destinations: make([]edge.HealthDest, 0, len(cur.dests))}
	for _, d := range g.destinationStatus(ctx, cur) {
		hd := edge.HealthDest{Name: d.Name, Type: d.Type, State: d.State, Error: g.redactor.String(d.err),
			Sessions: d.Sessions, Members: d.Members, Children: d.Children}
		if d.State == "failed" && !d.next.IsZero() {
			hd.NextRetry = d.next.UTC().Format(time.RFC3339Nano)
		}
		h.Destinations = append(h.Destinations, hd)
	}
	return h
}

// Run serves on the config's listen address (or addr, when not empty) until
// ctx is done, then shuts down gracefully.
func (g *Gateway) Run(ctx context.Context, addr string) error {
	if addr == "" {
		addr = g.static.Listen
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway: listen: %w", err)
	}
	return g.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done, then shuts down: stop accepting,
// end streams and sessions, stop every process. It returns after all of it.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	tc, stopTLS, err := g.tlsConfig() // tls.go; nil without a tls block
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer stopTLS()
	lns := []listener{{ln: ln, h: g.Handler(), tls: tc}}
	if cc := g.static.Cluster; cc != nil && cc.Listen != "" {
		// The hops of the other replicas; plain HTTP on the private
		// network, each request signed (hopauth).
		cln, err := net.Listen("tcp", cc.Listen)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("gateway: cluster.listen: %w", err)
		}
		lns = append(lns, listener{ln: cln, h: g.Handler(), name: "cluster"})
	}
	return g.serveAll(ctx, lns)
}

// listener is one listening socket and the handler serving it; name, when
// set, is logged with the address.
type listener struct {
	ln   net.Listener
	h    http.Handler
	name string
	tls  *tls.Config // nil: plain HTTP
}

// serveAll is Serve on several listeners at once, each with its own
// handler over the same gateway; the first one failing stops them all.
//
// Every server is bounded (Options and the config's connections block):
// headers within read_header_timeout, each request body byte within
// BodyIdleTimeout and the whole body within body_timeout (reqbody),
// kept-alive connections closed after IdleTimeout, and the connections of
// all listeners capped together at MaxConns, per address, with a reserve
// for the probes (internal/connlimit), so that neither running out of file
// descriptors nor a flood of connections can stop /healthz.
func (g *Gateway) serveAll(ctx context.Context, lns []listener) error {
	var wg sync.WaitGroup
	jctx, stopJanitor := context.WithCancel(context.Background())
	wg.Go(func() { g.sessions.Run(jctx) })
	wg.Go(func() { g.watch(jctx) })
	// The heartbeat stops (and this replica leaves the membership) as soon
	// as shutdown begins: the others then stop forwarding here.
	bctx, leave := context.WithCancel(context.Background())
	defer leave()
	wg.Go(func() { g.runHeartbeat(bctx) })
	g.startShared(g.state())
	errc := make(chan error, len(lns))
	srvs := make([]*http.Server, len(lns))
	idle, bodyIdle := cmp.Or(g.opts.IdleTimeout, defaultIdleTimeout), cmp.Or(g.opts.BodyIdleTimeout, defaultBodyIdleTimeout)
	cc := g.static.Connections
	lim := connlimit.New(g.maxConns(), cc.Reserved, cc.PerAddress, g.log)
	g.lim.Store(lim)
	headerTimeout := cmp.Or(cc.ReadHeaderTimeout, readHeaderTimeout)
	for i, l := range lns {
		// ReadTimeout is the body's idle bound: reqbody.Read renews it
		// before every read after the first, within BodyTimeout.
		srv := &http.Server{Handler: connlimit.Gate(l.h), ReadHeaderTimeout: headerTimeout, ReadTimeout: max(bodyIdle, 0),
			IdleTimeout: idle, ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
			ConnState: lim.ConnState, ConnContext: connlimit.ConnContext,
			BaseContext: func(net.Listener) context.Context {
				return reqbody.WithTimeout(context.Background(), cc.BodyTimeout)
			}}
		if idle < 0 {
			// Zero would fall back to ReadTimeout: a century is never.
			srv.IdleTimeout = 100 * 365 * 24 * time.Hour
		}
		l.ln = lim.Listen(l.ln)
		if l.tls != nil {
			// Over the limited conns, so that net/http sees *tls.Conn
			// (r.TLS, client certificates).
			l.ln = tls.NewListener(l.ln, l.tls)
		}
		srvs[i] = srv
		g.logListening(l)
		wg.Go(func() { errc <- srvs[i].Serve(l.ln) })
	}

	g.logFeatures()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	g.log.Info("switchboard shutting down")
	leave()
	g.drain()
	close(g.done) // end streams so Shutdown does not wait on them
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// With done closed every handler ends at once (streams close, calls
	// answer 503), so what Shutdown could still wait for is connections
	// that never sent a request, which net/http gives 5 s. Cut that short.
	hctx, hcancel := context.WithTimeout(sctx, time.Second)
	for _, srv := range srvs {
		if srv.Shutdown(hctx) != nil {
			_ = srv.Close()
		}
	}
	hcancel()
	stopJanitor()
	wg.Wait() // the janitor and the reload watcher have stopped: no more reloads
	g.stopAll(sctx)
	g.cluster.close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("gateway: serve: %w", serveErr)
	}
	return nil
}
