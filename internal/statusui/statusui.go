// Package statusui serves Switchboard's live status page: /ui, a page
// embedded in the binary (HTML, CSS and a little JavaScript, no CDN, works
// offline), and /ui/status.json, the data it polls every second.
//
// The page is read-only. It shows each destination's state, restarts,
// sessions, calls per second and p50/p99 latency, a small chart of its
// calls/s and p99 over the last minutes (inline SVG), the last errors
// (identical ones grouped, with a count), the last reload's outcome, and
// the tools each aggregated view exposes.
//
// What the gateway already knows comes from the Status function, read on
// each poll. What only traffic shows is kept here, fed by [Page.Observe]
// with every request's audit record: a small ring of recent calls per
// destination (for rates and percentiles), a per-destination history of
// HistoryPoints steps of HistoryStep (calls and a latency histogram each),
// the last error groups, and the last tools/list answer of each endpoint.
// A call through an aggregated endpoint counts for the destination that
// served it (the record's Destination, not its View). All of it is bounded.
package statusui

import (
	"cmp"
	"embed"
	"encoding/json"
	"math"
	"math/bits"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

//go:embed static
var static embed.FS

// Sizes of what the page keeps.
const (
	// RecentCalls is how many calls per endpoint the rates and percentiles
	// are computed from (those of the last RateWindow / LatencyWindow).
	RecentCalls = 1024
	// MaxErrors is how many of the last error groups are kept (errors
	// identical in destination, view, method, status and message are one
	// group, with a count).
	MaxErrors = 20
	// HistoryStep and HistoryPoints shape the per-destination chart: calls/s
	// and p99 for each HistoryStep of the last HistoryPoints steps.
	HistoryStep   = 10 * time.Second
	HistoryPoints = 30
	// MaxTools caps a remembered tools/list answer.
	MaxTools = 2000
	// RateWindow is the span calls/s is averaged over.
	RateWindow = 10 * time.Second
	// LatencyWindow is the span p50 and p99 are taken over.
	LatencyWindow = 60 * time.Second
)

// Options configure a Page.
type Options struct {
	// Status returns the gateway's state; it is called for every poll of
	// /ui/status.json. Required.
	Status func(r *http.Request) Status
	// Redact removes secrets from error messages before they are kept.
	// Nil keeps them as they are.
	Redact func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Status is what the gateway tells the page on each poll; the page adds
// what it observed (Destination.Calls…, Errors) before sending it.
type Status struct {
	Version      string        `json:"version"`
	ConfigLoaded time.Time     `json:"config_loaded_at"`
	LastReload   Reload        `json:"last_reload"`
	Destinations []Destination `json:"destinations"`
	Views        []View        `json:"views"`
	// Pins are the destinations with pinning on, each with what it lists
	// that is not approved (nil: none).
	Pins []PinStanding `json:"pins"`
	// Admin says whether the viewer may approve tools (POST
	// /ui/pins/approve): an authenticated client with admin: true.
	Admin bool `json:"admin"`
	// Filled in by the page.
	Now    time.Time `json:"now"`
	Errors []Error   `json:"errors"`
}

// PinStanding is a destination's tools against its pins (guards
// pinning), as its gate last saw them listed.
type PinStanding struct {
	Destination string `json:"destination"`
	Mode        string `json:"mode"`   // monitor or block
	Listed      bool   `json:"listed"` // false: nothing listed through the gate yet
	// Tools are the tools not approved: changed (with the diff `switchboard
	// pin` prints), new or removed.
	Tools []PinTool `json:"tools"`
	// Instructions is the server's instructions' standing ("" approved or
	// none), with their digest and diff.
	Instructions       string `json:"instructions,omitempty"`
	InstructionsDigest string `json:"instructions_digest,omitempty"`
	InstructionsDiff   string `json:"instructions_diff,omitempty"`
}

// PinTool is one tool that is not approved.
type PinTool struct {
	Name   string `json:"name"`
	Status string `json:"status"` // changed, new or removed
	Digest string `json:"digest"` // what an approval must name (the listed definition's)
	Diff   string `json:"diff,omitempty"`
}

// Reload is a reload's outcome.
type Reload struct {
	Time  time.Time `json:"time"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// Destination is one destination's row.
type Destination struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	Restarts uint64 `json:"restarts"`
	Sessions int    `json:"sessions"`
	Members  int    `json:"members"`
	InFlight int    `json:"in_flight"`
	// Filled in by the page from the calls it observed.
	CallsPerSecond float64 `json:"calls_per_s"`
	P50MS          float64 `json:"p50_ms"`
	P99MS          float64 `json:"p99_ms"`
	Calls          uint64  `json:"calls"`
	Errors         uint64  `json:"errors"`
	// History is the chart's data, oldest first: HistoryPoints steps ending
	// with the current one; empty before the destination's first call.
	History []Point `json:"history"`
}

// Point is one HistoryStep of a destination's chart.
type Point struct {
	// Time is the step's start.
	Time time.Time `json:"t"`
	// CallsPerSecond is the calls that ended in the step, per second.
	CallsPerSecond float64 `json:"calls_per_s"`
	// P99MS is their p99 latency, to within a quarter (from a log-scale
	// histogram), 0 without calls.
	P99MS float64 `json:"p99_ms"`
}

// View is one aggregated endpoint and the tools it exposes.
type View struct {
	Name    string   `json:"name"` // "" for the default view
	Path    string   `json:"path"` // "/mcp", "/mcp/{name}"
	Servers []string `json:"servers"`
	// Prefix is the view's tool_prefix policy ("" means always);
	// ServerPrefixes the servers that set their own (a namespace's prefix:
	// always, conflict, never or a custom prefix), by server.
	Prefix         string            `json:"tool_prefix"`
	ServerPrefixes map[string]string `json:"server_prefixes,omitempty"`
	// Tools are the exposed tools; Source says where they come from:
	// "listed" (the view's own last tools/list answer to a client),
	// "derived" (computed from its servers' last tools/list answers) or
	// "" (nothing listed yet).
	Tools  []Tool `json:"tools"`
	Source string `json:"source"`
	Error  string `json:"error,omitempty"`
}

// Tool is one exposed tool of a view.
type Tool struct {
	Name   string `json:"name"`
	Server string `json:"server,omitempty"`
}

// Error is a group of identical failed requests: same destination, view,
// method, status and message.
type Error struct {
	// Time is the group's last error; First its first.
	Time        time.Time `json:"time"`
	First       time.Time `json:"first"`
	Destination string    `json:"destination"`
	View        string    `json:"view,omitempty"`
	Method      string    `json:"method"`
	Status      int       `json:"status"`
	Message     string    `json:"message"`
	// Count is how many errors the group holds (at least 1).
	Count uint64 `json:"count"`
}

// errorKey identifies an error group.
type errorKey struct {
	dest, view, method string
	status             int
	msg                string
}

// Page is the status page. Its methods are safe for concurrent use; a nil
// *Page ignores Observe.
type Page struct {
	opts Options
	now  func() time.Time

	mu    sync.Mutex
	dests map[string]*destStats   // guarded by mu: by destination (audit Destination)
	errs  []*Error                // guarded by mu: error groups, most recent last; at most MaxErrors
	tools map[string]*listedTools // guarded by mu: by endpoint (audit View, else Destination)
}

// destStats is what the page observed of one destination's calls.
type destStats struct {
	recent        ring
	history       history
	calls, errors uint64
}

// history is a destination's chart data: a ring of HistoryPoints steps.
type history struct {
	steps [HistoryPoints]step
}

// step is one HistoryStep: its number (unix time / HistoryStep; a slot
// holding an older number is stale), its calls, and their latencies in
// latencyBins.
type step struct {
	n     int64
	calls uint32
	bins  [latencyBins]uint32
}

// latencyBins is the size of a step's latency histogram: log-linear, four
// bins per power of two of microseconds (about ±12 %), up to 2^40 µs.
const latencyBins = 41 * 4

// latencyBin is the bin of latency d.
func latencyBin(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	if us < 4 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // ≥ 2
	if e >= 41 {
		return latencyBins - 1
	}
	return e*4 + int(us>>(e-2)&3)
}

// binUpper is the largest latency of bin i, in milliseconds.
func binUpper(i int) float64 {
	if i < 4 {
		return float64(i) / 1000
	}
	e, m := i/4, i%4
	return float64(uint64(5+m)<<(e-2)-1) / 1000
}

// ring holds the last RecentCalls calls of one endpoint.
type ring struct {
	at  [RecentCalls]int64 // unix nanoseconds of each call's end
	lat [RecentCalls]time.Duration
	n   int // calls ever recorded
}

// listedTools is an endpoint's last tools/list answer.
type listedTools struct {
	names []string
	at    time.Time
}

// New returns a Page.
func New(opts Options) *Page {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Page{opts: opts, now: now, dests: map[string]*destStats{}, tools: map[string]*listedTools{}}
}

// Observe takes in one finished request's record. Calls are MCP requests
// answered on their own response; errors are any request with an error or a
// status ≥ 400.
// It does not keep r.
func (p *Page) Observe(r *audit.Record) {
	if p == nil || r == nil {
		return
	}
	failed := r.Error != "" || r.Status >= 400
	// A call is a request answered on its own response: not a
	// subscription stream, nor a legacy SSE request (202, answered on the
	// session's stream).
	call := r.MCPMethod != "" && r.RPCID != nil && r.MCPMethod != "subscriptions/listen" && r.Status != http.StatusAccepted
	if !call && !failed {
		return
	}
	var listed []string
	if call && r.MCPMethod == "tools/list" && !failed {
		listed = toolNames(r.ResponseBody)
	}
	msg := ""
	if failed {
		msg = cmp.Or(r.Error, http.StatusText(r.Status))
		if p.opts.Redact != nil {
			msg = p.opts.Redact(msg)
		}
	}
	end := r.Time.Add(r.Latency)
	if r.Time.IsZero() {
		end = p.now()
	}
	endpoint := cmp.Or(r.View, r.Destination)
	p.mu.Lock()
	defer p.mu.Unlock()
	if call && r.Destination != "" {
		ds := p.dests[r.Destination]
		if ds == nil {
			ds = &destStats{}
			p.dests[r.Destination] = ds
		}
		rg := &ds.recent
		i := rg.n % RecentCalls
		rg.at[i], rg.lat[i] = end.UnixNano(), r.Latency
		rg.n++
		ds.calls++
		if failed {
			ds.errors++
		}
		ds.history.add(end, r.Latency)
	}
	if failed {
		p.addError(errorKey{r.Destination, r.View, r.MCPMethod, r.Status, msg}, end.UTC())
	}
	if listed != nil {
		lt := p.tools[endpoint]
		if lt == nil || !hasCursor(r.RequestBody) {
			lt = &listedTools{}
			p.tools[endpoint] = lt
		}
		for _, n := range listed {
			if len(lt.names) < MaxTools && !slices.Contains(lt.names, n) {
				lt.names = append(lt.names, n)
			}
		}
		lt.at = end
	}
}

// addError counts an error in its group, which becomes the most recent;
// a new group pushes out the least recent one past MaxErrors. p.mu is held.
func (p *Page) addError(k errorKey, at time.Time) {
	i := slices.IndexFunc(p.errs, func(e *Error) bool {
		return errorKey{e.Destination, e.View, e.Method, e.Status, e.Message} == k
	})
	var e *Error
	if i >= 0 {
		e = p.errs[i]
		p.errs = slices.Delete(p.errs, i, i+1)
	} else {
		if len(p.errs) == MaxErrors {
			p.errs = slices.Delete(p.errs, 0, 1)
		}
		e = &Error{First: at, Destination: k.dest, View: k.view, Method: k.method, Status: k.status, Message: k.msg}
	}
	e.Count++
	e.Time = at
	p.errs = append(p.errs, e)
}

// add counts a call that ended at end and took lat.
func (h *history) add(end time.Time, lat time.Duration) {
	n := end.UnixNano() / int64(HistoryStep)
	s := &h.steps[n%HistoryPoints]
	if s.n != n {
		if s.n > n { // older than the ring holds
			return
		}
		*s = step{n: n}
	}
	s.calls++
	s.bins[latencyBin(lat)]++
}

// points returns the chart's points: the HistoryPoints steps up to now's.
func (h *history) points(now time.Time) []Point {
	last := now.UnixNano() / int64(HistoryStep)
	out := make([]Point, 0, HistoryPoints)
	for n := last - HistoryPoints + 1; n <= last; n++ {
		pt := Point{Time: time.Unix(0, n*int64(HistoryStep)).UTC()}
		if s := &h.steps[((n%HistoryPoints)+HistoryPoints)%HistoryPoints]; s.n == n && s.calls > 0 {
			pt.CallsPerSecond = float64(s.calls) / HistoryStep.Seconds()
			rank := uint32(math.Ceil(0.99 * float64(s.calls))) // nearest rank, ≥ 1
			var seen uint32
			for i, c := range s.bins {
				if seen += c; seen >= rank {
					pt.P99MS = binUpper(i)
					break
				}
			}
		}
		out = append(out, pt)
	}
	return out
}

// toolNames reads the tool names of a tools/list response; nil if it is
// not one.
func toolNames(body []byte) []string {
	var m struct {
		Result *struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &m) != nil || m.Result == nil {
		return nil
	}
	names := make([]string, 0, len(m.Result.Tools))
	for _, t := range m.Result.Tools {
		names = append(names, t.Name)
	}
	return names
}

func hasCursor(req []byte) bool {
	c, ok := jsonrpc.StringMember(req, "params", "cursor")
	return ok && c != ""
}

// Tools returns the tool names of endpoint's last tools/list answer (its
// pages together) and whether there was one.
func (p *Page) Tools(endpoint string) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lt := p.tools[endpoint]
	if lt == nil {
		return nil, false
	}
	return slices.Clone(lt.names), true
}

// fill adds what the page observed to st.
func (p *Page) fill(st *Status) {
	now := p.now()
	st.Now = now.UTC()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range st.Destinations {
		d := &st.Destinations[i]
		ds := p.dests[d.Name]
		if ds == nil {
			d.History = []Point{}
			continue
		}
		d.Calls, d.Errors, d.History = ds.calls, ds.errors, ds.history.points(now)
		rg := &ds.recent
		rateFrom, latFrom := now.Add(-RateWindow).UnixNano(), now.Add(-LatencyWindow).UnixNano()
		var lats []time.Duration
		inRate := 0
		for i := range min(rg.n, RecentCalls) {
			if rg.at[i] >= rateFrom {
				inRate++
			}
			if rg.at[i] >= latFrom {
				lats = append(lats, rg.lat[i])
			}
		}
		d.CallsPerSecond = float64(inRate) / RateWindow.Seconds()
		if len(lats) > 0 {
			slices.Sort(lats)
			d.P50MS = ms(quantile(lats, 0.50))
			d.P99MS = ms(quantile(lats, 0.99))
		}
	}
	st.Errors = make([]Error, 0, len(p.errs))
	for _, e := range slices.Backward(p.errs) { // most recent first
		st.Errors = append(st.Errors, *e)
	}
}

// quantile is the nearest-rank q-quantile of sorted (non-empty) values.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Handler serves the page and its data:
//
//	GET /ui               the page
//	GET /ui/style.css     its style
//	GET /ui/app.js        its script
//	GET /ui/status.json   the data, polled every second
//
// Anything else under /ui is 404. Every answer forbids framing and
// sniffing; the page may load nothing but its own files.
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	serve := func(name, ctype string) http.HandlerFunc {
		body, err := static.ReadFile("static/" + name)
		if err != nil {
			panic(err) // embedded at build time
		}
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(body)
		}
	}
	mux.Handle("GET /ui", serve("index.html", "text/html; charset=utf-8"))
	mux.Handle("GET /ui/style.css", serve("style.css", "text/css; charset=utf-8"))
	mux.Handle("GET /ui/app.js", serve("app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /ui/status.json", p.serveStatus)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		mux.ServeHTTP(w, r)
	})
}

func (p *Page) serveStatus(w http.ResponseWriter, r *http.Request) {
	st := p.opts.Status(r)
	p.fill(&st)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(st)
}
