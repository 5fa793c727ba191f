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
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/front/sse"
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
	reloadMu   sync.Mutex
	routers    map[string]*router.Router // by view name; kept across reloads
	lastReload reloadStatus
	retiring   sync.WaitGroup // destinations replaced by a reload, still closing
	stopped    bool           // stopAll has begun: reloads are refused

	// clientLimits holds the clients' rate limits (policy.go), their
	// buckets kept across reloads.
	clientLimits policy.Limiter
	// lim bounds the connections of the servers serveAll runs (nil
	// before); tests read its counts.
	lim atomic.Pointer[connLimit]
	// clientReqs counts each client's requests in progress
	// (connections.per_client, connlimit_client.go).
	clientReqs clientRequests
	// owners maps each session opened by an authenticated caller to its
	// name (auth.go refuses the session to anyone else).
	owners policy.Owners

	// reloadsOK and reloadsFailed count reloads applied and rejected
	// (guarded by reloadMu).
	reloadsOK, reloadsFailed uint64
}

// state is one generation of the configuration, as requests see it. It is
// immutable once published.
type state struct {
	cfg       *config.Config
	dests     map[string]*destination.Destination
	fronts    map[string]http.Handler // "{d}/mcp", "{d}/sse", "{d}/message"
	views     *views                  // aggregated endpoints (aggregate.go)
	loadedAt  time.Time
	guard     guardPolicy
	auth      *auth.Authenticator // nil: authentication off (auth.go)
	authority *policy.Authority   // what each client may reach (policy.go)
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
	g := &Gateway{opts: opts, static: cfg, redactor: red, done: make(chan struct{}), routers: map[string]*router.Router{}}
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
			g.log.Warn("listen stream queue full; message dropped", "destination", s.Dest, "session", s.ID)
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
	st, _ := g.build(cfg, nil)
	g.cur.Store(st)
	g.lastReload = reloadStatus{Time: st.loadedAt, OK: true}
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

// orDefault is d, or def when d is zero.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
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

// openOutput opens a log file for appending ("" is stderr). Files are closed
// when the gateway stops.
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

// legacyFront returns the handlers of /{d}/sse and /{d}/message.
func (g *Gateway) legacyFront(cfg *config.Config, name string, d sse.Destination, dc *config.Destination) (http.Handler, http.Handler) {
	if !dc.LegacySSE {
		gone := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			audit.FromContext(r.Context()).Destination = name
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"error": fmt.Sprintf("the legacy HTTP+SSE transport is disabled for %s; use Streamable HTTP at /%s/mcp", name, name),
			})
		})
		return gone, gone
	}
	h := sse.NewServer(d, sse.ServerOptions{
		Name: name, Sessions: g.sessions, Timeout: timeoutOf(dc, cfg), MaxBody: cfg.MaxBodyBytes,
		KeepAlive: keepAlive(cfg), Done: g.done, Logger: g.log, MessagePath: "/" + name + "/message",
	})
	return http.HandlerFunc(h.ServeStream), http.HandlerFunc(h.ServeMessage)
}

// Handler returns the gateway's HTTP handler: guard, audit, routes.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", permitStatus(g.healthz))      // HEAD too; other methods 405 with Allow
	mux.HandleFunc("GET /health", g.health)                      // liveness, as mithril-proxy and MCProxy answer it (health.go); HEAD too, others 405
	mux.HandleFunc("GET /readyz", g.readyz)                      // readiness (health.go); HEAD too, others 405
	mux.HandleFunc("GET /metrics", permitStatus(g.serveMetrics)) // Prometheus (observe.go); 404 when metrics are off
	g.routeStatusPage(mux)                                       // GET /ui, /ui/status.json, … (statuspage.go)
	mux.HandleFunc("GET "+auth.MetadataPath, g.serveMetadata)    // RFC 9728 (auth.go); 404 without oauth
	mux.HandleFunc("GET "+auth.MetadataPath+"/", g.serveMetadata)
	atView := g.viewRoutes() // /{ns}/mcp, /{ns}/sse, /{ns}/message (aggregate.go)
	mux.HandleFunc("/{dest}/{endpoint}", func(w http.ResponseWriter, r *http.Request) {
		h := g.state().fronts[r.PathValue("dest")+"/"+r.PathValue("endpoint")]
		if h == nil {
			if v := atView[r.PathValue("endpoint")]; v != nil && g.state().views.mcp[r.PathValue("dest")] != nil {
				r.SetPathValue("name", r.PathValue("dest"))
				v(w, r)
				return
			}
			http.Error(w, "no such destination, namespace or endpoint: "+r.URL.Path, http.StatusNotFound)
			return
		}
		if !g.permitDestination(w, r, r.PathValue("dest")) {
			return
		}
		h.ServeHTTP(w, r)
	})
	g.routeViews(mux)
	return g.audited(g.guard(g.authenticate(g.clientBound(g.directFront(mux))))) // refused requests are audited too
}

// directFront serves /{dest}/mcp, the path of nearly every request, by one
// map lookup, and everything else through mux (whose pattern matching
// costs a routing walk and two allocations per request). It is exactly
// mux's "/{dest}/{endpoint}" route for these paths: a destination name is
// [a-zA-Z0-9_-]+ (so the path is clean), a path with escapes goes to mux
// (which matches escaped segments), and the names whose first segment
// other routes share (mcp, sse, message) go through mux.
func (g *Gateway) directFront(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawPath == "" && r.Method != http.MethodConnect {
			if dest, h := g.mcpFront(r.URL.Path); h != nil {
				if g.permitDestination(w, r, dest) {
					h.ServeHTTP(w, r)
				}
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// mcpFront returns the destination and the Streamable HTTP front of a path
// /{dest}/mcp, or a nil handler for any other path (and for the names
// whose first segment other routes share: mcp, sse, message).
func (g *Gateway) mcpFront(path string) (dest string, h http.Handler) {
	dest, ok := strings.CutSuffix(path, "/mcp")
	if !ok || len(dest) < 2 || dest[0] != '/' {
		return "", nil
	}
	switch dest = dest[1:]; dest {
	case "mcp", "sse", "message":
		return "", nil
	}
	if strings.Contains(dest, "/") {
		return "", nil
	}
	return dest, g.state().fronts[path[1:]]
}

// audited is the one call site of the audit log: every request gets a
// record, filled in by the handlers, written when the handler returns
// (for a stream, when it closes).
func (g *Gateway) audited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unaudited(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		a := &auditedRequest{Context: r.Context(), header: r.Header}
		rec := &a.rec
		*rec = audit.Record{Time: start, SourceIP: audit.SourceIP(r), HTTPMethod: r.Method, Path: r.URL.Path}
		sw := &a.sw
		*sw = statusWriter{ResponseWriter: w, rec: rec}
		if g.state().cfg.Metrics.Enabled {
			sw.m = g.metrics
		}
		q := g.tracer.Start(r, start) // nil when tracing is off
		a.trace = q
		sw.m.RequestStarted()
		next.ServeHTTP(sw, r.WithContext(a))
		sw.m.RequestDone()
		sw.endStream()
		rec.Status = sw.status
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
		rec.Latency = time.Since(start)
		q.End(rec) // a no-op when tracing is off
		g.audit.Log(rec)
		g.observe(rec)
	})
}

// auditedRequest is what audited keeps per request, in one allocation: the
// audit record, the response writer that fills it in, and the request's
// context, which answers for the record ([audit.FromContext]), the
// client's header ([destination.HeaderKey]) and the request's trace
// ([tracing.FromContext]) itself instead of three context.WithValue
// layers.
type auditedRequest struct {
	context.Context // the request's own
	rec             audit.Record
	sw              statusWriter
	header          http.Header      // the client's request header
	trace           *tracing.Request // its trace; nil when tracing is off
}

func (a *auditedRequest) Value(key any) any {
	switch key.(type) {
	case audit.RecordKey:
		return &a.rec
	case destination.HeaderKey:
		return a.header
	case tracing.RequestKey:
		return a.trace
	}
	return a.Context.Value(key)
}

// statusWriter records the status code and the bytes written, and counts
// event streams in the metrics (m, nil when they are off); Unwrap keeps
// http.ResponseController (flushing) working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	rec    *audit.Record

	m          *metrics.Metrics
	stream     bool   // the answer is an event stream, counted open in m
	streamDest string // its destination label
	streamView string // its view label
}

// Record gives the fronts' error writer the request's audit record.
func (w *statusWriter) Record() *audit.Record { return w.rec }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.noteStream()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.noteStream()
	}
	n, err := w.ResponseWriter.Write(b)
	w.rec.BytesOut += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// healthz reports each destination's state and when the config was loaded.
func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	type dest struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		State    string `json:"state"`
		Error    string `json:"error,omitempty"`
		Sessions int    `json:"sessions"` // client sessions of /{name}/…
		// Members counts the client sessions the destination serves,
		// directly or through aggregated endpoints; Children its
		// per-session processes (isolation: session).
		Members  int `json:"members"`
		Children int `json:"children"`
		// NextRetry is when a failed destination accepts work again
		// (RFC 3339); a request or a reload then starts it.
		NextRetry string `json:"next_retry,omitempty"`
	}
	cur := g.state()
	g.reloadMu.Lock()
	last := g.lastReload
	g.reloadMu.Unlock()
	out := struct {
		Status       string       `json:"status"`
		ConfigLoaded string       `json:"config_loaded_at"`
		LastReload   reloadStatus `json:"last_reload"`
		Destinations []dest       `json:"destinations"`
	}{Status: "ok", ConfigLoaded: cur.loadedAt.UTC().Format(time.RFC3339Nano), LastReload: last}
	names := make([]string, 0, len(cur.dests))
	for n := range cur.dests {
		names = append(names, n)
	}
	sort.Strings(names)
	out.Destinations = make([]dest, len(names))
	var wg sync.WaitGroup // remote probes may take a while: all at once
	for i, n := range names {
		wg.Go(func() {
			d := cur.dests[n]
			st, msg := d.State(r.Context())
			members, children := d.Usage()
			out.Destinations[i] = dest{Name: n, Type: cur.cfg.Destinations[n].Type, State: st,
				Error: g.redactor.String(msg), Sessions: g.sessions.Count(n), Members: members, Children: children}
			if at := d.NextRetry(); st == "failed" && !at.IsZero() {
				out.Destinations[i].NextRetry = at.UTC().Format(time.RFC3339Nano)
			}
		})
	}
	wg.Wait()
	for _, d := range out.Destinations {
		if d.State == "failed" || d.State == "unreachable" || d.State == "needs_login" {
			out.Status = "degraded"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
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
	return g.serveAll(ctx, []listener{{ln: ln, h: g.Handler(), tls: tc}})
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
// for the probes (connlimit.go), so that neither running out of file
// descriptors nor a flood of connections can stop /healthz.
func (g *Gateway) serveAll(ctx context.Context, lns []listener) error {
	var wg sync.WaitGroup
	jctx, stopJanitor := context.WithCancel(context.Background())
	wg.Go(func() { g.sessions.Run(jctx) })
	wg.Go(func() { g.watch(jctx) })
	g.startShared(g.state())
	errc := make(chan error, len(lns))
	srvs := make([]*http.Server, len(lns))
	idle, bodyIdle := orDefault(g.opts.IdleTimeout, defaultIdleTimeout), orDefault(g.opts.BodyIdleTimeout, defaultBodyIdleTimeout)
	cc := g.static.Connections
	maxConns := g.opts.MaxConns
	if maxConns == 0 {
		maxConns = cc.Max
	}
	if maxConns == 0 {
		maxConns = defaultMaxConns()
	}
	lim := newConnLimit(maxConns, cc.Reserved, cc.PerAddress, g.log)
	g.lim.Store(lim)
	headerTimeout := orDefault(cc.ReadHeaderTimeout, readHeaderTimeout)
	for i, l := range lns {
		// ReadTimeout is the body's idle bound: reqbody.Read renews it
		// before every read after the first, within BodyTimeout.
		srv := &http.Server{Handler: reserveGate(l.h), ReadHeaderTimeout: headerTimeout, ReadTimeout: max(bodyIdle, 0),
			IdleTimeout: idle, ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
			ConnState: lim.connState, ConnContext: connContext,
			BaseContext: func(net.Listener) context.Context {
				return reqbody.WithTimeout(context.Background(), cc.BodyTimeout)
			}}
		if idle < 0 {
			// Zero would fall back to ReadTimeout: a century is never.
			srv.IdleTimeout = 100 * 365 * 24 * time.Hour
		}
		l.ln = lim.listen(l.ln)
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
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("gateway: serve: %w", serveErr)
	}
	return nil
}

// guard rejects requests that could come from a DNS-rebinding page: a Host
// that is not allowed (when listening on loopback or when allowed_hosts is
// set) or an Origin that is neither loopback nor allowed. Both get 403.
func (g *Gateway) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.state().guard.check(w, r, next)
	})
}

// guardPolicy is the Host and Origin allowlist of one config generation.
type guardPolicy struct {
	checkHost bool
	hosts     map[string]bool
	origins   map[string]bool
	anyOrigin bool
}

func newGuardPolicy(cfg *config.Config) guardPolicy {
	listenHost, _, _ := net.SplitHostPort(cfg.Listen)
	loopbackListen := isLoopbackHost(listenHost)
	hosts := map[string]bool{}
	anyHost := false
	for _, h := range cfg.AllowedHosts {
		if h == "*" {
			anyHost = true
		}
		hosts[strings.ToLower(h)] = true
	}
	if listenHost != "" {
		hosts[strings.ToLower(listenHost)] = true
	}
	origins := map[string]bool{}
	anyOrigin := false
	for _, o := range cfg.AllowedOrigins {
		if o == "*" {
			anyOrigin = true
		}
		origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return guardPolicy{checkHost: !anyHost && (loopbackListen || len(cfg.AllowedHosts) > 0),
		hosts: hosts, origins: origins, anyOrigin: anyOrigin}
}

// check serves r with next, or answers 403.
func (p *guardPolicy) check(w http.ResponseWriter, r *http.Request, next http.Handler) {
	hosts, origins, anyOrigin := p.hosts, p.origins, p.anyOrigin
	{
		if p.checkHost {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.Trim(strings.ToLower(host), "[]")
			if !isLoopbackHost(host) && !hosts[host] {
				forbid(w, "Host "+r.Host+" is not allowed (allowed_hosts)")
				return
			}
		}
		if o := canonicalHeader(r.Header, "Origin"); o != "" && !anyOrigin && !origins[strings.ToLower(o)] && !loopbackOrigin(o) {
			forbid(w, "Origin "+o+" is not allowed (allowed_origins)")
			return
		}
		next.ServeHTTP(w, r)
	}
}

func forbid(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": msg}})
}

func isLoopbackHost(h string) bool {
	h = strings.Trim(strings.ToLower(h), "[]")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func loopbackOrigin(o string) bool {
	rest, ok := strings.CutPrefix(strings.ToLower(o), "http://")
	if !ok {
		rest, ok = strings.CutPrefix(strings.ToLower(o), "https://")
	}
	if !ok {
		return false
	}
	host := rest
	if h, _, err := net.SplitHostPort(rest); err == nil {
		host = h
	}
	return isLoopbackHost(host)
}

// canonicalHeader is h.Get(key) for a key already in canonical form: the
// map is read directly, without canonicalising the key per request (net/http
// stores the keys it parses canonical).
func canonicalHeader(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
