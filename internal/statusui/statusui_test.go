package statusui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func rec(dest, method string, at time.Time, lat time.Duration, status int, errMsg string) *audit.Record {
	return &audit.Record{Time: at, Destination: dest, MCPMethod: method, RPCID: json.RawMessage("1"),
		Latency: lat, Status: status, Error: errMsg}
}

func newPage(now *time.Time) *Page {
	return New(Options{
		Status: func(*http.Request) Status {
			return Status{Destinations: []Destination{{Name: "a"}, {Name: "b"}}, Views: []View{}}
		},
		Redact: func(s string) string { return strings.ReplaceAll(s, "hunter2", "[REDACTED]") },
		Now:    func() time.Time { return *now },
	})
}

// TestPageRatesAndPercentiles: calls/s over the last 10 s, p50/p99 over the
// last minute, totals over everything.
func TestStatusUIPageRatesAndPercentiles(t *testing.T) {
	now := t0.Add(2 * time.Minute)
	p := newPage(&now)
	// 100 calls a minute and a half ago (out of both windows), then 100
	// calls of 1..100 ms in the last 5 s.
	for i := range 100 {
		p.Observe(rec("a", "tools/call", t0.Add(30*time.Second), time.Second, 200, ""))
		p.Observe(rec("a", "tools/call", now.Add(-5*time.Second), time.Duration(i+1)*time.Millisecond, 200, ""))
	}
	note := rec("a", "notifications/initialized", now, 0, 202, "")
	note.RPCID = nil
	p.Observe(note) // a notification: not a call
	p.Observe(&audit.Record{Destination: "a", HTTPMethod: "GET", Status: 200})
	st := Status{Destinations: []Destination{{Name: "a"}, {Name: "b"}}}
	p.fill(&st)
	a := st.Destinations[0]
	if a.Calls != 200 || a.Errors != 0 {
		t.Errorf("calls %d errors %d; want 200, 0", a.Calls, a.Errors)
	}
	if a.CallsPerSecond != 10 {
		t.Errorf("calls/s = %v; want 10 (100 calls in the 10 s window)", a.CallsPerSecond)
	}
	if a.P50MS != 50 || a.P99MS != 99 {
		t.Errorf("p50 %v p99 %v; want 50, 99", a.P50MS, a.P99MS)
	}
	if b := st.Destinations[1]; b.Calls != 0 || b.P50MS != 0 {
		t.Errorf("b: %+v; want nothing", b)
	}
}

// TestPageErrors: the last MaxErrors errors, newest first, redacted.
func TestStatusUIPageErrors(t *testing.T) {
	now := t0
	p := newPage(&now)
	for i := range MaxErrors + 5 {
		p.Observe(rec("a", "tools/call", t0.Add(time.Duration(i)*time.Second), time.Millisecond, 200, fmt.Sprint("boom ", i, " hunter2")))
	}
	p.Observe(&audit.Record{Time: t0.Add(time.Hour), Destination: "", HTTPMethod: "GET", Status: 404})
	st := Status{}
	p.fill(&st)
	if len(st.Errors) != MaxErrors {
		t.Fatalf("%d errors kept; want %d", len(st.Errors), MaxErrors)
	}
	if e := st.Errors[0]; e.Status != 404 || e.Message != "Not Found" {
		t.Errorf("newest error %+v; want the 404", e)
	}
	if e := st.Errors[1]; e.Message != fmt.Sprint("boom ", MaxErrors+4, " [REDACTED]") || e.Method != "tools/call" {
		t.Errorf("second newest %+v", e)
	}
	if e := st.Errors[MaxErrors-1]; e.Message != "boom 6 [REDACTED]" {
		t.Errorf("oldest kept %+v; want boom 6", e)
	}
}

// TestPageTools: the last tools/list answer per endpoint, pages together.
func TestStatusUIPageTools(t *testing.T) {
	now := t0
	p := newPage(&now)
	list := func(cursor string, names ...string) *audit.Record {
		r := rec("mcp/dev", "tools/list", t0, time.Millisecond, 200, "")
		params := "{}"
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		r.RequestBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + params + `}`)
		var tools []string
		for _, n := range names {
			tools = append(tools, `{"name":"`+n+`","inputSchema":{}}`)
		}
		r.ResponseBody = []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Join(tools, ",") + `]}}`)
		return r
	}
	if _, ok := p.Tools("mcp/dev"); ok {
		t.Fatal("tools before any list")
	}
	p.Observe(list("", "a", "b"))
	p.Observe(list("c2", "c", "a"))
	if got, _ := p.Tools("mcp/dev"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("two pages: %v; want [a b c]", got)
	}
	p.Observe(list("", "x"))
	if got, _ := p.Tools("mcp/dev"); !slices.Equal(got, []string{"x"}) {
		t.Errorf("a new first page: %v; want [x]", got)
	}
	failed := list("", "y")
	failed.Error = "nope"
	p.Observe(failed)
	if got, _ := p.Tools("mcp/dev"); !slices.Equal(got, []string{"x"}) {
		t.Errorf("after a failed list: %v; want [x]", got)
	}
}

// TestPageObserveAllocs: a successful call costs no allocation.
func TestStatusUIPageObserveAllocs(t *testing.T) {
	now := t0
	p := newPage(&now)
	r := rec("a", "tools/call", t0, time.Millisecond, 200, "")
	p.Observe(r)
	if n := testing.AllocsPerRun(1000, func() { p.Observe(r) }); n != 0 {
		t.Errorf("Observe allocates %v times per call; want 0", n)
	}
}

// TestPageHandler: the page, its files and its data are served with a
// strict CSP; anything else under /ui is 404.
func TestStatusUIPageHandler(t *testing.T) {
	now := t0
	p := newPage(&now)
	h := p.Handler()
	get := func(path string) *httptest.ResponseRecorder {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest("GET", path, nil))
		return rr
	}
	for path, ctype := range map[string]string{"/ui": "text/html", "/ui/app.js": "text/javascript",
		"/ui/style.css": "text/css", "/ui/status.json": "application/json"} {
		rr := get(path)
		if rr.Code != 200 || !strings.HasPrefix(rr.Header().Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %d %s", path, rr.Code, rr.Header().Get("Content-Type"))
		}
		if csp := rr.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	if rr := get("/ui/other.js"); rr.Code != 404 {
		t.Errorf("GET /ui/other.js: %d; want 404", rr.Code)
	}
	var st Status
	if err := json.Unmarshal(get("/ui/status.json").Body.Bytes(), &st); err != nil || len(st.Destinations) != 2 || !st.Now.Equal(t0) {
		t.Errorf("status.json: %v %+v", err, st)
	}
	// The page loads nothing from elsewhere (the SVG namespace is a name,
	// not something loaded).
	for _, f := range []string{"index.html", "app.js", "style.css"} {
		b, _ := static.ReadFile("static/" + f)
		text := strings.ReplaceAll(string(b), `"http://www.w3.org/2000/svg"`, "")
		if strings.Contains(text, "http://") || strings.Contains(text, "https://") {
			t.Errorf("%s refers to another origin", f)
		}
	}
}

// BenchmarkPageObserve is the status page's cost per call.
func BenchmarkPageObserve(b *testing.B) {
	now := t0
	p := newPage(&now)
	r := rec("a", "tools/call", t0, time.Millisecond, 200, "")
	b.ReportAllocs()
	for b.Loop() {
		p.Observe(r)
	}
}

// TestStatusUIPageErrorGroups: identical errors are one group with a
// count, moved to the top by each repeat; groups differ by destination,
// view, method, status and message.
func TestStatusUIPageErrorGroups(t *testing.T) {
	now := t0
	p := newPage(&now)
	for i := range 20 {
		p.Observe(rec("a", "tools/call", t0.Add(time.Duration(i)*time.Second), time.Millisecond, 200, "unknown tool x"))
	}
	p.Observe(rec("b", "tools/call", t0.Add(time.Minute), time.Millisecond, 200, "unknown tool x"))
	viaView := rec("a", "tools/call", t0.Add(2*time.Minute), time.Millisecond, 200, "unknown tool x")
	viaView.View = "mcp"
	p.Observe(viaView)
	p.Observe(rec("a", "tools/call", t0.Add(3*time.Minute), time.Millisecond, 200, "unknown tool x"))
	st := Status{}
	p.fill(&st)
	if len(st.Errors) != 3 {
		t.Fatalf("%d groups: %+v; want 3", len(st.Errors), st.Errors)
	}
	if e := st.Errors[0]; e.Destination != "a" || e.View != "" || e.Count != 21 ||
		!e.Time.Equal(t0.Add(3*time.Minute+time.Millisecond)) || !e.First.Equal(t0.Add(time.Millisecond)) {
		t.Errorf("most recent group %+v; want a's 21 errors, ending at +3m and +0 (plus their 1 ms)", e)
	}
	if e := st.Errors[1]; e.View != "mcp" || e.Count != 1 {
		t.Errorf("second group %+v; want the one through mcp", e)
	}
	if e := st.Errors[2]; e.Destination != "b" || e.Count != 1 {
		t.Errorf("third group %+v; want b's", e)
	}
	// More distinct groups than MaxErrors: the least recent go.
	for i := range MaxErrors {
		p.Observe(rec("a", "tools/call", t0.Add(time.Hour), time.Millisecond, 200, fmt.Sprint("other ", i)))
	}
	st = Status{}
	p.fill(&st)
	if len(st.Errors) != MaxErrors || st.Errors[0].Message != fmt.Sprint("other ", MaxErrors-1) {
		t.Errorf("%d groups, first %+v; want %d, the last one added first", len(st.Errors), st.Errors[0], MaxErrors)
	}
}

// TestStatusUIPageHistory: the chart's points are the last HistoryPoints
// steps, oldest first, with calls/s and p99 per step; steps without calls
// are zero, steps older than the window are forgotten.
func TestStatusUIPageHistory(t *testing.T) {
	now := t0.Truncate(HistoryStep).Add(HistoryStep / 2)
	p := newPage(&now)
	p.Observe(rec("a", "tools/call", now.Add(-time.Hour), time.Millisecond, 200, "")) // long gone
	// The current step: 100 calls of 1..100 ms; three steps back: 20 calls of 5 ms.
	for i := range 100 {
		p.Observe(rec("a", "tools/call", now.Add(-time.Second), time.Duration(i+1)*time.Millisecond, 200, ""))
	}
	for range 20 {
		p.Observe(rec("a", "tools/call", now.Add(-3*HistoryStep), 5*time.Millisecond, 200, ""))
	}
	st := Status{Destinations: []Destination{{Name: "a"}, {Name: "b"}}}
	p.fill(&st)
	h := st.Destinations[0].History
	if len(h) != HistoryPoints {
		t.Fatalf("%d points; want %d", len(h), HistoryPoints)
	}
	last := h[HistoryPoints-1]
	if !last.Time.Equal(now.Truncate(HistoryStep)) || last.CallsPerSecond != 100/HistoryStep.Seconds() {
		t.Errorf("current step %+v; want 100 calls at %v", last, now.Truncate(HistoryStep))
	}
	if last.P99MS < 99 || last.P99MS > 99*1.25 {
		t.Errorf("current step's p99 = %v ms; want 99 ms within a quarter", last.P99MS)
	}
	if pt := h[HistoryPoints-4]; pt.CallsPerSecond != 20/HistoryStep.Seconds() || pt.P99MS < 5 || pt.P99MS > 5*1.25 {
		t.Errorf("three steps back %+v; want 20 calls of 5 ms", pt)
	}
	calls := 0.0
	for _, pt := range h {
		calls += pt.CallsPerSecond * HistoryStep.Seconds()
	}
	if calls != 120 {
		t.Errorf("%v calls in the chart; want 120 (the hour-old one out of it)", calls)
	}
	if b := st.Destinations[1].History; b == nil || len(b) != 0 {
		t.Errorf("b's history %v; want empty (not null)", b)
	}
	// A call through a view is the serving destination's.
	r := rec("b", "tools/call", now, time.Millisecond, 200, "")
	r.View = "mcp"
	p.Observe(r)
	st = Status{Destinations: []Destination{{Name: "a"}, {Name: "b"}}}
	p.fill(&st)
	if b := st.Destinations[1]; b.Calls != 1 || len(b.History) != HistoryPoints {
		t.Errorf("b after a call through mcp: %+v", b)
	}
}

func TestStatusUILatencyBins(t *testing.T) {
	prev := -1
	for us := int64(0); us < 1<<22; us = us*9/8 + 1 {
		d := time.Duration(us) * time.Microsecond
		i := latencyBin(d)
		if i < prev {
			t.Fatalf("bin(%v) = %d < %d: not monotonic", d, i, prev)
		}
		prev = i
		if up := binUpper(i); up < float64(us)/1000 || (us >= 4 && up > float64(us)/1000*1.25+0.001) {
			t.Fatalf("bin(%v) = %d, upper %v ms: not within a quarter above", d, i, up)
		}
	}
	if latencyBin(time.Duration(1<<62)) != latencyBins-1 {
		t.Error("a huge latency is not in the last bin")
	}
}
