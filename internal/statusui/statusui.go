// Package statusui serves Switchboard's live status page: /ui, a page
// embedded in the binary (HTML, CSS and a little JavaScript, no CDN, works
// offline), and /ui/status.json, the data it polls every second.
//
// The page is read-only. It shows each destination's state, restarts,
// sessions, calls per second and p50/p99 latency, the last errors, the last
// reload's outcome, and the tools each aggregated view exposes.
//
// What the gateway already knows comes from the Status function, read on
// each poll. What only traffic shows is kept here, fed by [Page.Observe]
// with every request's audit record: a small ring of recent calls per
// destination (for rates and percentiles), a ring of the last errors, and
// the last tools/list answer of each endpoint. All of it is bounded.
package statusui

import (
	"embed"
	"encoding/json"
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
	// MaxErrors is how many of the last errors are kept.
	MaxErrors = 20
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
	// Filled in by the page.
	Now    time.Time `json:"now"`
	Errors []Error   `json:"errors"`
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
}

// View is one aggregated endpoint and the tools it exposes.
type View struct {
	Name    string   `json:"name"` // "" for the default view
	Path    string   `json:"path"` // "/mcp", "/mcp/{name}"
	Servers []string `json:"servers"`
	Prefix  string   `json:"tool_prefix"`
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

// Error is one failed request.
type Error struct {
	Time        time.Time `json:"time"`
	Destination string    `json:"destination"`
	Method      string    `json:"method"`
	Status      int       `json:"status"`
	Message     string    `json:"message"`
}

// Page is the status page. Its methods are safe for concurrent use; a nil
// *Page ignores Observe.
type Page struct {
	opts Options
	now  func() time.Time

	mu     sync.Mutex
	recent map[string]*ring        // guarded by mu: by endpoint (audit Destination)
	errs   [MaxErrors]Error        // guarded by mu: a ring
	nerrs  int                     // guarded by mu: errors ever recorded
	tools  map[string]*listedTools // guarded by mu: by endpoint
	totals map[string]*[2]uint64   // guarded by mu: calls and errors by endpoint
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
	return &Page{opts: opts, now: now, recent: map[string]*ring{}, tools: map[string]*listedTools{},
		totals: map[string]*[2]uint64{}}
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
		msg = r.Error
		if msg == "" {
			msg = http.StatusText(r.Status)
		}
		if p.opts.Redact != nil {
			msg = p.opts.Redact(msg)
		}
	}
	end := r.Time.Add(r.Latency)
	if r.Time.IsZero() {
		end = p.now()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if call {
		rg := p.recent[r.Destination]
		if rg == nil {
			rg = &ring{}
			p.recent[r.Destination] = rg
			p.totals[r.Destination] = &[2]uint64{}
		}
		i := rg.n % RecentCalls
		rg.at[i], rg.lat[i] = end.UnixNano(), r.Latency
		rg.n++
		t := p.totals[r.Destination]
		t[0]++
		if failed {
			t[1]++
		}
	}
	if failed {
		p.errs[p.nerrs%MaxErrors] = Error{Time: end.UTC(), Destination: r.Destination, Method: r.MCPMethod,
			Status: r.Status, Message: msg}
		p.nerrs++
	}
	if listed != nil {
		lt := p.tools[r.Destination]
		if lt == nil || !hasCursor(r.RequestBody) {
			lt = &listedTools{}
			p.tools[r.Destination] = lt
		}
		for _, n := range listed {
			if len(lt.names) < MaxTools && !slices.Contains(lt.names, n) {
				lt.names = append(lt.names, n)
			}
		}
		lt.at = end
	}
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
		if t := p.totals[d.Name]; t != nil {
			d.Calls, d.Errors = t[0], t[1]
		}
		rg := p.recent[d.Name]
		if rg == nil {
			continue
		}
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
	n := min(p.nerrs, MaxErrors)
	st.Errors = make([]Error, 0, n)
	for i := range n { // newest first
		st.Errors = append(st.Errors, p.errs[(p.nerrs-1-i)%MaxErrors])
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
