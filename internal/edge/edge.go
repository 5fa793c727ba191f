// Package edge is Switchboard's HTTP edge: every request's audit record,
// trace and metrics, the Host/Origin guard, authentication and the
// per-client bounds, then the routing to the fronts of the destinations
// and of the aggregated views. It serves the Table the gateway last
// stored and never calls back into the gateway: what a request needs is
// in the Table or the Options.
//
//	client ─HTTP─▶ audit ─▶ guard ─▶ authenticate ─▶ per-client bound ─▶ route
//	                                                                      │
//	           front (streamable | legacy sse) of a destination or a view ◀┘
package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/metrics"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/statusui"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
)

// Options are the parts of an Edge that live as long as it does.
type Options struct {
	// Audit receives one record per request; nil writes none.
	Audit *audit.Logger
	// Metrics count requests and open streams and are fed every record
	// while the Table says so; nil never.
	Metrics *metrics.Metrics
	// StatusPage is fed every record while the Table says so; nil never.
	StatusPage *statusui.Page
	// Tracer traces requests; nil when tracing is off.
	Tracer *tracing.Tracer
	// Sessions is the fronts' session table (a legacy POST names its
	// session's destination). Required.
	Sessions *session.Table
	// Owners maps each session opened by an authenticated caller to its
	// name: anyone else naming it gets 404. Required.
	Owners *policy.Owners
	// PerClient bounds the requests in progress of one authenticated
	// client (429 beyond); zero means no bound.
	PerClient int
	// Done is closed when shutdown begins: /readyz answers 503 from then.
	// Nil never.
	Done <-chan struct{}
	// Draining, when not nil, is closed when a cluster replica begins to
	// drain: /readyz answers 503 (the load balancer sends no more) while
	// requests are still served; the edge then counts the requests in
	// progress (Idle). Nil: no drain phase, nothing counted.
	Draining <-chan struct{}
	// Cluster forwards a request whose session another live replica owns
	// to it, and tells the requests other replicas forwarded here
	// (*replica.Replica). Nil (a single replica): neither.
	Cluster Cluster
	// Routes registers the gateway's own status routes (/healthz,
	// /metrics, /ui…) on the edge's mux; nil registers none.
	Routes func(mux *http.ServeMux)
}

// Cluster is what the edge needs of a cluster.
type Cluster interface {
	// Hop reports whether r was forwarded by another replica; an error
	// when its signature does not verify (403).
	Hop(r *http.Request) (bool, error)
	// Forward serves r at the replica owning its session (or, for a
	// 2026-07-28 retry, holding its parked call) when that is another
	// live one, and reports whether it did; r still carries the
	// caller's credentials and id is the caller (nil without auth).
	Forward(w http.ResponseWriter, r *http.Request, id *auth.Identity) bool
}

// Table is what the edge serves for one configuration generation. It is
// immutable once stored.
type Table struct {
	// Fronts are the destinations' handlers, by "{name}/mcp",
	// "{name}/sse" and "{name}/message".
	Fronts map[string]http.Handler
	// MCP, Stream and Message are the aggregated views' handlers of
	// /mcp, GET /sse and POST /message, by view name ("" the default).
	MCP, Stream, Message map[string]http.Handler
	// Guard is the Host and Origin allowlist (NewGuard).
	Guard Guard
	// Auth authenticates callers; nil means authentication is off.
	Auth *auth.Authenticator
	// Authority says what each caller may reach. Required.
	Authority *policy.Authority
	// IdentityHeader, when not "", carries the caller's name to the
	// upstreams; a client's own is removed.
	IdentityHeader string
	// Metrics and UI feed the Options' metrics and status page.
	Metrics, UI bool
	// HealthStatus is /health's status word; "" means "ok".
	HealthStatus string
	// OAuthCallbacks serve GET /oauth/callback/{name}: the redirects of
	// the logins the gateway starts for the OAuth destinations that
	// allow it, by destination name. They need no credentials (a
	// browser brings none): the login's state is checked instead.
	OAuthCallbacks map[string]http.Handler
}

// Edge serves the HTTP routes of the current Table. Its methods are safe
// for concurrent use.
type Edge struct {
	opts       Options
	cur        atomic.Pointer[Table]
	clientReqs clientRequests // requests in progress by client (PerClient)
	// busy counts the audited requests in progress and last is when the
	// last one began (unix nanoseconds); kept only with Options.Draining.
	busy, last atomic.Int64
}

// Idle reports whether no request is in progress and none began within
// quiet (Options.Draining set; always true without it).
func (e *Edge) Idle(quiet time.Duration) bool {
	return e.busy.Load() == 0 && time.Since(time.Unix(0, e.last.Load())) >= quiet
}

// New returns an Edge serving t.
func New(t *Table, opts Options) *Edge {
	e := &Edge{opts: opts}
	e.cur.Store(t)
	return e
}

// Store makes t what requests see from now on.
func (e *Edge) Store(t *Table) { e.cur.Store(t) }

// table returns the current Table.
func (e *Edge) table() *Table { return e.cur.Load() }

// Handler returns the edge's HTTP handler: audit, guard, authentication,
// per-client bound, routes.
func (e *Edge) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", e.health) // liveness, as mithril-proxy and MCProxy answer it; HEAD too, others 405
	mux.HandleFunc("GET /readyz", e.readyz) // readiness; HEAD too, others 405
	if e.opts.Routes != nil {
		e.opts.Routes(mux) // /healthz, /metrics, /ui… (the gateway's; PermitStatus guards them)
	}
	mux.HandleFunc("GET "+auth.MetadataPath, e.serveMetadata) // RFC 9728 (auth.go); 404 without oauth
	mux.HandleFunc("GET "+auth.MetadataPath+"/", e.serveMetadata)
	mux.HandleFunc("GET "+callbackPrefix+"{dest}", func(w http.ResponseWriter, r *http.Request) {
		h := e.table().OAuthCallbacks[r.PathValue("dest")]
		if h == nil {
			http.Error(w, "no login callback for this destination", http.StatusNotFound)
			return
		}
		if rec := audit.FromContext(r.Context()); rec != nil {
			rec.Destination = r.PathValue("dest")
		}
		h.ServeHTTP(w, r)
	})
	atView := e.viewRoutes() // /{ns}/mcp, /{ns}/sse, /{ns}/message (views.go)
	mux.HandleFunc("/{dest}/{endpoint}", func(w http.ResponseWriter, r *http.Request) {
		h := e.table().Fronts[r.PathValue("dest")+"/"+r.PathValue("endpoint")]
		if h == nil {
			if v := atView[r.PathValue("endpoint")]; v != nil && e.table().MCP[r.PathValue("dest")] != nil {
				r.SetPathValue("name", r.PathValue("dest"))
				v(w, r)
				return
			}
			http.Error(w, "no such destination, namespace or endpoint: "+r.URL.Path, http.StatusNotFound)
			return
		}
		if !e.permitDestination(w, r, r.PathValue("dest")) {
			return
		}
		h.ServeHTTP(w, r)
	})
	e.routeViews(mux)
	return e.audited(e.guard(e.authenticate(e.clientBound(e.directFront(mux))))) // refused requests are audited too
}

// callbackPrefix is the path of the OAuth login redirects
// (config.CallbackPath).
const callbackPrefix = "/oauth/callback/"

// directFront serves /{dest}/mcp, the path of nearly every request, by one
// map lookup, and everything else through mux (whose pattern matching
// costs a routing walk and two allocations per request). It is exactly
// mux's "/{dest}/{endpoint}" route for these paths: a destination name is
// [a-zA-Z0-9_-]+ (so the path is clean), a path with escapes goes to mux
// (which matches escaped segments), and the names whose first segment
// other routes share (mcp, sse, message) go through mux.
func (e *Edge) directFront(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawPath == "" && r.Method != http.MethodConnect {
			if dest, h := e.mcpFront(r.URL.Path); h != nil {
				if e.permitDestination(w, r, dest) {
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
func (e *Edge) mcpFront(path string) (dest string, h http.Handler) {
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
	return dest, e.table().Fronts[path[1:]]
}

// audited is the one call site of the audit log: every request gets a
// record, filled in by the handlers, written when the handler returns
// (for a stream, when it closes).
func (e *Edge) audited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unaudited(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		if e.opts.Draining != nil {
			e.busy.Add(1)
			e.last.Store(start.UnixNano())
			defer e.busy.Add(-1)
		}
		a := &auditedRequest{Context: r.Context(), header: r.Header}
		rec := &a.rec
		*rec = audit.Record{Time: start, SourceIP: audit.SourceIP(r), HTTPMethod: r.Method, Path: r.URL.Path}
		sw := &a.sw
		*sw = statusWriter{ResponseWriter: w, rec: rec}
		if e.table().Metrics {
			sw.m = e.opts.Metrics
		}
		q := e.opts.Tracer.Start(r, start) // nil when tracing is off
		a.trace = q
		sw.m.RequestStarted()
		next.ServeHTTP(sw, r.WithContext(a))
		sw.m.RequestDone()
		sw.endStream()
		rec.Status = int(sw.status)
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
		rec.Latency = time.Since(start)
		q.End(rec) // a no-op when tracing is off
		e.opts.Audit.Log(rec)
		e.observe(rec)
		rec.Release() // pooled buffers the bodies point into go back
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
	status int32 // the status written; int32, so that stream packs beside it
	stream bool  // the answer is an event stream, counted open in m
	rec    *audit.Record

	m          *metrics.Metrics
	streamDest string // its destination label
	streamView string // its view label
}

// Record gives the fronts' error writer the request's audit record.
func (w *statusWriter) Record() *audit.Record { return w.rec }

func (w *statusWriter) WriteHeader(code int) {
	w.noteStatus(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.noteStatus(http.StatusOK)
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

// unaudited reports the gateway's own read-only routes: probes, scrapes and
// the status page poll often and are not MCP traffic, so they get neither
// an audit line nor metrics.
func unaudited(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/health", "/metrics", "/ui":
		return true
	}
	return strings.HasPrefix(path, "/ui/")
}

// observe hands a finished request's record to the metrics and the status
// page, as the current config enables them.
func (e *Edge) observe(rec *audit.Record) {
	t := e.table()
	if t.Metrics && e.opts.Metrics != nil {
		e.opts.Metrics.Observe(rec)
	}
	if t.UI && e.opts.StatusPage != nil {
		e.opts.StatusPage.Observe(rec)
	}
}

// noteStatus records the status of the headers being written, the first
// time, and counts an answer that is an event stream in
// switchboard_open_streams.
func (w *statusWriter) noteStatus(code int) {
	if w.status != 0 {
		return
	}
	w.status = int32(code)
	if w.m == nil {
		return
	}
	if ct := w.ResponseWriter.Header()["Content-Type"]; len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream") {
		w.stream, w.streamDest, w.streamView = true, w.rec.Destination, w.rec.View
		w.m.StreamOpened(w.streamDest, w.streamView)
	}
}

// endStream uncounts what noteStatus counted; the request has ended.
func (w *statusWriter) endStream() {
	if w.stream {
		w.m.StreamClosed(w.streamDest, w.streamView)
	}
}

// health is the liveness probe of the projects Switchboard replaces: it
// answers 200 while the process serves, whatever the destinations' state
// (/healthz has that). Its body has the shape the configuration file's
// project used: MCProxy's {"status":"healthy","version":...} for an
// mcproxy.json, mithril-proxy's {"status":"ok"} otherwise (plus the
// version). It is routed for GET and HEAD only.
func (e *Edge) health(w http.ResponseWriter, r *http.Request) {
	status := e.table().HealthStatus
	if status == "" {
		status = "ok"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		Status  string `json:"status"`
		Version string `json:"version"`
	}{status, buildinfo.Version()})
}

// readyz is the readiness probe: 200 while the gateway serves, 503 once it
// has begun to shut down (connections still open get that answer while
// they drain). It needs no credentials and tells nothing of the
// destinations (/healthz has them).
func (e *Edge) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	select {
	case <-e.opts.Done:
	case <-e.opts.Draining: // nil: never
	default:
		_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"status":"shutting down"}` + "\n"))
}
