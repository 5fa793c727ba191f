// Package metrics provides Switchboard's Prometheus metrics and the handler
// that serves them.
//
// Two sources feed it, and neither instruments the layers of the data path:
//
//   - Traffic is observed once per HTTP request, from the request's audit
//     record when the gateway logs it ([Metrics.Observe]), under the
//     destination that served it. Observing allocates nothing.
//   - State is read when Prometheus scrapes, from the structures /healthz
//     reads ([Options.Status]): destination state, sessions, members,
//     per-session processes, calls in flight, restarts, reloads. Between
//     scrapes it costs nothing.
//
// Label values are bounded: destinations and views are the configured ones
// (a name a client made up never becomes one), MCP methods are the ones the protocol defines
// (anything else is "other"), HTTP methods the standard ones, tool names
// only up to a cap (Options.ToolLabels). No session id, argument or header
// value ever becomes a label.
//
// Every metric is named switchboard_*; see [Metrics] for the list.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// Options configure Metrics. The zero value counts traffic only.
type Options struct {
	// ToolLabels is how many tool names per destination get series of their
	// own in switchboard_mcp_tool_calls_total; a name is admitted by the
	// first call to it that succeeds, later names count as "other". Zero
	// disables the per-tool metric. SetToolLabels changes it later.
	ToolLabels int
	// Status returns the gateway's state; it is called on every scrape
	// (never on the request path), possibly concurrently. Nil reports no
	// state metrics.
	Status func() Status
	// Version is the build's version for switchboard_build_info; "" means
	// "unknown".
	Version string
}

// Status is the gateway's state at one scrape.
type Status struct {
	Destinations []Destination
	// Reloads and ReloadFailures count the config reloads applied and
	// rejected since the gateway started.
	Reloads, ReloadFailures uint64
	// LastReloadOK is the outcome of the last reload (true before any).
	LastReloadOK bool
	// LastReload is when the last reload was tried, or the start.
	LastReload time.Time
	// ConfigLoaded is when the configuration in use was loaded.
	ConfigLoaded time.Time
	// AuditWriteErrors counts audit lines that could not be written.
	AuditWriteErrors uint64
	// Stalled counts the calls held on Switchboard's own path, by stage
	// (upstream.StalledTotal: every stage, zeros included).
	Stalled map[string]uint64
}

// Destination is one destination's state, as /healthz reports it.
type Destination struct {
	Name, Type string
	// State is one of States.
	State string
	// Sessions counts the client sessions of /{Name}/…; Members the client
	// sessions the destination serves, directly or through aggregated
	// endpoints; Children its per-session processes (isolation: session).
	Sessions, Members, Children int
	// InFlight counts requests sent to the server and not answered yet.
	InFlight int
	// Restarts counts connections restarted after they ended unexpectedly.
	Restarts uint64
}

// States are the values of Destination.State; switchboard_destination_state
// has one series per state, 1 for the current one.
var States = []string{"idle", "starting", "ready", "restarting", "failed", "closed", "unreachable", "needs_login"}

// Outcomes of an MCP request (the outcome label).
const (
	OutcomeOK          = "ok"          // answered with a result (or accepted: a notification)
	OutcomeError       = "error"       // answered with a JSON-RPC error, by the server or on its behalf
	OutcomeRejected    = "rejected"    // refused before reaching a server (4xx: bad request, unknown session, too large, Origin)
	OutcomeTimeout     = "timeout"     // no answer in time (504)
	OutcomeUnavailable = "unavailable" // the server is down, restarting or failed (502, 503)
	OutcomeCancelled   = "cancelled"   // the client went away (499)
	OutcomeInternal    = "internal"    // any other 5xx
)

// Outcome classifies a finished request's record. An error the server
// answered with is OutcomeError whatever HTTP status carried it (2026-07-28
// maps some to 4xx).
func Outcome(r *audit.Record) string {
	switch s := r.Status; {
	case s < 400 && r.Error == "":
		return OutcomeOK
	case s < 400 || r.Upstream > 0:
		return OutcomeError
	case s == 499:
		return OutcomeCancelled
	case s == http.StatusGatewayTimeout:
		return OutcomeTimeout
	case s == http.StatusBadGateway || s == http.StatusServiceUnavailable:
		return OutcomeUnavailable
	case s < 500:
		return OutcomeRejected
	}
	return OutcomeInternal
}

// Metrics holds Switchboard's metrics and their registry. Its methods are
// safe for concurrent use; a nil *Metrics ignores every call, so "metrics
// off" needs no special case.
//
// A request is counted under the destination that served it (the audit
// record's Destination): through an aggregated endpoint, the member a call
// was routed to, with the endpoint in the view label ("mcp" for /mcp,
// "mcp/{name}" for a namespace or group; "" for a destination's own
// endpoint). What a view answers itself (initialize, merged lists) has
// destination "".
//
// Traffic, observed from audit records:
//
//	switchboard_http_requests_total{destination,view,method,code}
//	switchboard_http_requests_in_flight
//	switchboard_http_request_bytes_total{destination}     request bodies read
//	switchboard_http_response_bytes_total{destination}    response bytes written
//	switchboard_open_streams{destination,view}            SSE responses open
//	switchboard_mcp_requests_total{destination,view,method,outcome}
//	switchboard_mcp_request_duration_seconds{destination,view,method}      arrival to answer
//	switchboard_mcp_upstream_duration_seconds{destination,method}          the server's share
//	switchboard_mcp_gateway_added_duration_seconds{destination}            total − upstream, per call
//	switchboard_mcp_tool_calls_total{destination,tool,outcome}             only with ToolLabels > 0
//	switchboard_queue_drops_total{destination}            messages dropped from full session queues
//
// State, read at scrape time:
//
//	switchboard_destination_info{destination,type}
//	switchboard_destination_state{destination,state}
//	switchboard_sessions{destination}
//	switchboard_destination_members{destination}
//	switchboard_destination_children{destination}
//	switchboard_mcp_calls_in_flight{destination}
//	switchboard_upstream_restarts_total{destination}
//	switchboard_config_reloads_total{result}
//	switchboard_config_last_reload_successful
//	switchboard_config_last_reload_timestamp_seconds
//	switchboard_config_loaded_timestamp_seconds
//	switchboard_audit_write_errors_total
//	switchboard_calls_stalled_total{stage}
//	switchboard_build_info{version,goversion}
//
// plus the Go runtime's and the process's standard metrics.
//
// The durations are observed for MCP requests answered on their own HTTP
// response (notifications, subscriptions/listen streams and legacy SSE
// requests, whose POST gets 202 and whose answer goes to the stream, are
// counted, not timed); the upstream and gateway-added ones only for calls a
// server answered.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	httpRequests *prometheus.CounterVec
	inFlight     prometheus.Gauge
	bytesIn      *prometheus.CounterVec
	bytesOut     *prometheus.CounterVec
	streams      *prometheus.GaugeVec
	mcpRequests  *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	upstream     *prometheus.HistogramVec
	added        *prometheus.HistogramVec
	toolCalls    *prometheus.CounterVec
	queueDrops   *prometheus.CounterVec
	guardHits    *prometheus.CounterVec

	// series caches, by label values, the children of the vectors above
	// that Observe updates: a request costs one map lookup instead of a
	// label hash and a vector lookup per series. A child is made when it
	// is first updated, as WithLabelValues would, so the exposition is the
	// same. Series are never deleted, so a cached child stays the
	// registered one. The keys are bounded as the labels are.
	series sync.Map // seriesKey → *requestSeries

	toolCap atomic.Int64
	toolsMu sync.Mutex
	tools   map[string]map[string]bool // guarded by toolsMu: admitted tool names by destination
}

// Latency buckets, in seconds. Tool calls can run for minutes; the time
// Switchboard adds is usually well under a millisecond.
var (
	durationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	addedBuckets    = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}
)

// New returns Metrics registered in a registry of their own.
func New(opts Options) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_http_requests_total",
			Help: "HTTP requests served, by the destination that served them (\"\" when none did), the aggregated endpoint they came through (view, \"\" for none), HTTP method and status code."},
			[]string{"destination", "view", "method", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_http_requests_in_flight",
			Help: "HTTP requests being served, open streams included."}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_http_request_bytes_total",
			Help: "Request body bytes read from clients."}, []string{"destination"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_http_response_bytes_total",
			Help: "Response body bytes written to clients, streams included (counted when they end)."}, []string{"destination"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_open_streams",
			Help: "Server-sent event responses open: GET listen streams, legacy SSE streams and calls answered as streams."},
			[]string{"destination", "view"}),
		mcpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_mcp_requests_total",
			Help: "MCP requests and notifications from clients, by the destination that served them, view, method (known MCP methods, else \"other\") and outcome."},
			[]string{"destination", "view", "method", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_mcp_request_duration_seconds",
			Help: "Time from a request's arrival to the end of its answer.", Buckets: durationBuckets},
			[]string{"destination", "view", "method"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_mcp_upstream_duration_seconds",
			Help: "Time the upstream server took to answer a request: from writing it to reading its response.", Buckets: durationBuckets},
			[]string{"destination", "method"}),
		added: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_mcp_gateway_added_duration_seconds",
			Help: "Time Switchboard added to a request a server answered: total minus upstream.", Buckets: addedBuckets},
			[]string{"destination"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_mcp_tool_calls_total",
			Help: "tools/call requests by tool name (the first names per destination that succeeded, up to metrics.tool_labels; the rest \"other\")."},
			[]string{"destination", "tool", "outcome"}),
		queueDrops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_queue_drops_total",
			Help: "Messages dropped because a session's listen queue was full."}, []string{"destination"}),
		guardHits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_guard_detections_total",
			Help: "Guard detections, by rule (detector/rule as the rule set names it: secret/aws-access-token, pii/email, hidden/tag, markup/image, pin/changed, pin/new, shadowing/collision, ...) and action (monitor, strip, redact, block)."},
			[]string{"rule", "action"}),
		tools: map[string]map[string]bool{},
	}
	m.toolCap.Store(int64(opts.ToolLabels))
	m.reg.MustRegister(m.httpRequests, m.inFlight, m.bytesIn, m.bytesOut, m.streams, m.mcpRequests,
		m.duration, m.upstream, m.added, m.toolCalls, m.queueDrops, m.guardHits,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newStateCollector(opts.Status, opts.Version))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// GuardDetected counts one guard detection (switchboard_guard_detections_total).
// rule must come from a rule set (a detector's rule ids, the pin
// standings), never from content, so that the series stay bounded.
func (m *Metrics) GuardDetected(rule, action string) {
	if m == nil {
		return
	}
	m.guardHits.WithLabelValues(rule, action).Inc()
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return m.handler
}

// SetToolLabels changes the cap on tool names (a reload). Names already
// admitted keep their series.
func (m *Metrics) SetToolLabels(n int) {
	if m != nil {
		m.toolCap.Store(int64(n))
	}
}

// RequestStarted and RequestDone bracket every HTTP request
// (switchboard_http_requests_in_flight).
func (m *Metrics) RequestStarted() {
	if m != nil {
		m.inFlight.Inc()
	}
}

// RequestDone: see RequestStarted.
func (m *Metrics) RequestDone() {
	if m != nil {
		m.inFlight.Dec()
	}
}

// StreamOpened and StreamClosed bracket an SSE response of destination
// through view ("" for a destination's own endpoint).
func (m *Metrics) StreamOpened(destination, view string) {
	if m != nil {
		m.streams.WithLabelValues(destination, view).Inc()
	}
}

// StreamClosed: see StreamOpened.
func (m *Metrics) StreamClosed(destination, view string) {
	if m != nil {
		m.streams.WithLabelValues(destination, view).Dec()
	}
}

// QueueDropped counts a message dropped from a full session queue.
func (m *Metrics) QueueDropped(destination string) {
	if m != nil {
		m.queueDrops.WithLabelValues(destination).Inc()
	}
}

// Observe counts one finished HTTP request from its audit record (see the
// list on [Metrics]). It does not keep r and allocates nothing, unless
// tool labels are on and r is a tools/call.
func (m *Metrics) Observe(r *audit.Record) {
	if m == nil || r == nil {
		return
	}
	dest := r.Destination
	var method, outcome string
	if r.MCPMethod != "" {
		method, outcome = MCPMethod(r.MCPMethod), Outcome(r)
	}
	s := m.seriesOf(seriesKey{dest, r.View, httpMethod(r.HTTPMethod), statusCode(r.Status), method, outcome})
	s.http.Inc()
	if n := len(r.RequestBody); n > 0 {
		lazyCounter(&s.bytesIn, m.bytesIn, dest).Add(float64(n))
	}
	if r.BytesOut > 0 {
		lazyCounter(&s.bytesOut, m.bytesOut, dest).Add(float64(r.BytesOut))
	}
	if r.MCPMethod == "" {
		return // a GET stream, a client's response, a request that did not parse
	}
	s.mcp.Inc()
	if r.MCPMethod == "tools/call" && m.toolCap.Load() > 0 {
		m.toolCalls.WithLabelValues(dest, m.toolLabel(dest, r, outcome), outcome).Inc()
	}
	if r.RPCID == nil || r.MCPMethod == "subscriptions/listen" || r.Status == http.StatusAccepted {
		// A notification; a subscription stream lasts as long as it is
		// wanted; a legacy SSE request is answered on its stream, after
		// its POST got 202.
		return
	}
	lazyObserver(&s.duration, m.duration, [3]string{dest, r.View, method}, 3).Observe(r.Latency.Seconds())
	if r.Upstream > 0 {
		lazyObserver(&s.upstream, m.upstream, [3]string{dest, method}, 2).Observe(r.Upstream.Seconds())
		lazyObserver(&s.added, m.added, [3]string{dest}, 1).Observe(max(r.Latency-r.Upstream, 0).Seconds())
	}
}

// seriesKey is the label values of one request's series: destination,
// view, HTTP method, status code, MCP method and outcome ("" for a request
// that is not an MCP request).
type seriesKey struct{ dest, view, httpMethod, status, method, outcome string }

// requestSeries holds the children Observe updates for one seriesKey:
// http (and mcp, for an MCP method) made with the entry, since every
// request of the key counts in them; the others on first use.
type requestSeries struct {
	http, mcp                 prometheus.Counter
	bytesIn, bytesOut         atomic.Pointer[prometheus.Counter]
	duration, upstream, added atomic.Pointer[prometheus.Observer]
}

func (m *Metrics) seriesOf(k seriesKey) *requestSeries {
	if s, ok := m.series.Load(k); ok {
		return s.(*requestSeries)
	}
	s := &requestSeries{http: m.httpRequests.WithLabelValues(k.dest, k.view, k.httpMethod, k.status)}
	if k.method != "" {
		s.mcp = m.mcpRequests.WithLabelValues(k.dest, k.view, k.method, k.outcome)
	}
	v, _ := m.series.LoadOrStore(k, s)
	return v.(*requestSeries)
}

// lazyCounter returns *p, made from v's child for dest the first time.
func lazyCounter(p *atomic.Pointer[prometheus.Counter], v *prometheus.CounterVec, dest string) prometheus.Counter {
	if c := p.Load(); c != nil {
		return *c
	}
	c := v.WithLabelValues(dest)
	p.CompareAndSwap(nil, &c)
	return *p.Load()
}

// lazyObserver returns *p, made from v's child for the first n of labels
// the first time. The labels are an array, not a slice, so that the common
// case (made already) allocates nothing.
func lazyObserver(p *atomic.Pointer[prometheus.Observer], v *prometheus.HistogramVec, labels [3]string, n int) prometheus.Observer {
	if o := p.Load(); o != nil {
		return *o
	}
	return makeObserver(p, v, labels, n)
}

func makeObserver(p *atomic.Pointer[prometheus.Observer], v *prometheus.HistogramVec, labels [3]string, n int) prometheus.Observer {
	o := v.WithLabelValues(labels[:n]...)
	p.CompareAndSwap(nil, &o)
	return *p.Load()
}

// toolLabel is the tool label of a tools/call: its name once admitted, else
// "other". A name is admitted by a successful call while the destination
// has fewer than the cap.
func (m *Metrics) toolLabel(dest string, r *audit.Record, outcome string) string {
	name := r.Tool
	if name == "" || len(name) > 128 || !utf8.ValidString(name) {
		return "other"
	}
	m.toolsMu.Lock()
	defer m.toolsMu.Unlock()
	admitted := m.tools[dest]
	if admitted[name] {
		return name
	}
	if outcome != OutcomeOK || int64(len(admitted)) >= m.toolCap.Load() {
		return "other"
	}
	if admitted == nil {
		admitted = map[string]bool{}
		m.tools[dest] = admitted
	}
	admitted[name] = true
	return name
}

// mcpMethods are the methods a client sends to a server (2025-11-25 and
// 2026-07-28), the values of the method label besides "other".
var mcpMethods = map[string]string{}

func init() {
	for _, s := range []string{
		"initialize", "ping", "server/discover",
		"tools/list", "tools/call",
		"prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe", "subscriptions/listen",
		"logging/setLevel", "completion/complete",
		"tasks/get", "tasks/list", "tasks/result", "tasks/cancel",
		"notifications/initialized", "notifications/cancelled", "notifications/progress",
		"notifications/roots/list_changed", "notifications/tasks/status",
	} {
		mcpMethods[s] = s
	}
}

// MCPMethod returns the method label of an MCP method: the method itself
// when the protocol defines it, else "other".
func MCPMethod(method string) string {
	if s, ok := mcpMethods[method]; ok {
		return s
	}
	return "other"
}

// httpMethod bounds the method label to the standard methods.
func httpMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodHead,
		http.MethodPut, http.MethodPatch, http.MethodOptions:
		return m
	}
	return "other"
}

// codes holds the code label of every status 100–599, so none is
// formatted (and allocated) per request.
var codes [500]string

func init() {
	for i := range codes {
		codes[i] = strconv.Itoa(i + 100)
	}
}

func statusCode(s int) string {
	if s >= 100 && s < 600 {
		return codes[s-100]
	}
	return "other"
}
