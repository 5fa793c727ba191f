package metrics

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

func call(dest, method, tool string, status int, errMsg string, total, up time.Duration) *audit.Record {
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"name":"` + tool + `"}}`
	return &audit.Record{Destination: dest, HTTPMethod: "POST", MCPMethod: method, Tool: tool, RPCID: json.RawMessage("1"),
		Status: status, Error: errMsg, Latency: total, Upstream: up, RequestBody: []byte(body), BytesOut: 10}
}

func TestMetricsObserve(t *testing.T) {
	m := New(Options{ToolLabels: 2, Version: "test", Status: func() Status {
		return Status{Destinations: []Destination{{Name: "a", Type: "stdio", State: "ready", Sessions: 2, Restarts: 3}},
			Reloads: 1, LastReloadOK: true, LastReload: time.Unix(100, 0), ConfigLoaded: time.Unix(100, 0),
			Stalled: map[string]uint64{"write": 0, "server": 2}}
	}})
	m.Observe(call("a", "tools/call", "echo", 200, "", 3*time.Millisecond, 2*time.Millisecond))
	m.Observe(call("a", "tools/call", "echo", 200, "", 3*time.Millisecond, 2*time.Millisecond))
	m.Observe(call("a", "tools/call", "nope", 200, "unknown tool", 3*time.Millisecond, 2*time.Millisecond)) // not admitted: failed
	m.Observe(call("a", "tools/call", "add", 200, "", time.Millisecond, time.Millisecond/2))
	m.Observe(call("a", "tools/call", "third", 200, "", time.Millisecond, time.Millisecond/2)) // over the cap
	m.Observe(call("a", "x/custom", "", 200, "Method not found", time.Millisecond, time.Millisecond/2))
	m.Observe(call("a", "tools/list", "", 503, "upstream a: down", time.Millisecond, 0))
	m.Observe(&audit.Record{Destination: "a", HTTPMethod: "GET", Status: 200})
	m.Observe(&audit.Record{Destination: "a", HTTPMethod: "POST", MCPMethod: "notifications/initialized", Status: 202})
	m.GuardDetected("secret/aws-access-token", "redact")
	m.GuardDetected("secret/aws-access-token", "redact")
	m.GuardDetected("pin/changed", "block")

	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"a", "", "tools/call", "ok"}, 4},
		{[]string{"a", "", "tools/call", "error"}, 1},
		{[]string{"a", "", "other", "error"}, 1},
		{[]string{"a", "", "tools/list", "unavailable"}, 1},
		{[]string{"a", "", "notifications/initialized", "ok"}, 1},
	} {
		if got := testutil.ToFloat64(m.mcpRequests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("mcp_requests_total%v = %v; want %v", c.labels, got, c.want)
		}
	}
	for _, c := range []struct {
		tool, outcome string
		want          float64
	}{{"echo", "ok", 2}, {"add", "ok", 1}, {"other", "ok", 1}, {"other", "error", 1}} {
		if got := testutil.ToFloat64(m.toolCalls.WithLabelValues("a", c.tool, c.outcome)); got != c.want {
			t.Errorf("tool_calls_total{%s,%s} = %v; want %v", c.tool, c.outcome, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.httpRequests.WithLabelValues("a", "", "POST", "200")); got != 6 {
		t.Errorf("http_requests_total{POST,200} = %v; want 6", got)
	}
	text := scrape(t, m)
	for _, want := range []string{
		`switchboard_mcp_request_duration_seconds_count{destination="a",method="tools/call",view=""} 5`,
		`switchboard_mcp_request_duration_seconds_count{destination="a",method="tools/list",view=""} 1`,
		`switchboard_mcp_upstream_duration_seconds_count{destination="a",method="tools/call"} 5`,
		`switchboard_mcp_gateway_added_duration_seconds_count{destination="a"} 6`,
		`switchboard_mcp_gateway_added_duration_seconds_sum{destination="a"} 0.0045`,
		`switchboard_guard_detections_total{action="redact",rule="secret/aws-access-token"} 2`,
		`switchboard_guard_detections_total{action="block",rule="pin/changed"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
	if strings.Contains(text, `upstream_duration_seconds_count{destination="a",method="tools/list"}`) {
		t.Errorf("an answer without a server has an upstream time:\n%s", text)
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	state := text
	for _, want := range []string{
		`switchboard_destination_state{destination="a",state="ready"} 1`,
		`switchboard_destination_state{destination="a",state="failed"} 0`,
		`switchboard_upstream_restarts_total{destination="a"} 3`,
		`switchboard_sessions{destination="a"} 2`,
		`switchboard_calls_stalled_total{stage="write"} 0`,
		`switchboard_calls_stalled_total{stage="server"} 2`,
	} {
		if !strings.Contains(state, want) {
			t.Errorf("missing %s in\n%s", want, state)
		}
	}
}

// TestMetricsObserveAllocs: observing a request allocates nothing once its
// series exist (tool labels off).
func TestMetricsObserveAllocs(t *testing.T) {
	m := New(Options{})
	r := call("a", "tools/call", "echo", 200, "", 3*time.Millisecond, 2*time.Millisecond)
	m.Observe(r)
	if n := testing.AllocsPerRun(1000, func() { m.Observe(r) }); n != 0 {
		t.Errorf("Observe allocates %v times per request; want 0", n)
	}
}

// scrape returns what the handler serves.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	if rr.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rr.Code, rr.Body)
	}
	return rr.Body.String()
}

func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.Observe(&audit.Record{})
	m.RequestStarted()
	m.RequestDone()
	m.StreamOpened("a", "")
	m.StreamClosed("a", "")
	m.QueueDropped("a")
	m.SetToolLabels(3)
}

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		status int
		err    string
		want   string
	}{
		{200, "", OutcomeOK}, {202, "", OutcomeOK}, {200, "boom", OutcomeError}, {400, "bad", OutcomeRejected},
		{404, "", OutcomeRejected}, {499, "", OutcomeCancelled}, {502, "", OutcomeUnavailable},
		{503, "", OutcomeUnavailable}, {504, "", OutcomeTimeout}, {500, "", OutcomeInternal},
	} {
		if got := Outcome(&audit.Record{Status: c.status, Error: c.err}); got != c.want {
			t.Errorf("Outcome(%d, %q) = %s; want %s", c.status, c.err, got, c.want)
		}
	}
	// A 2026-07-28 -32601 from the server travels with 404: still the
	// server's error, not a refusal.
	if got := Outcome(&audit.Record{Status: 404, Error: "method not found", Upstream: time.Millisecond}); got != OutcomeError {
		t.Errorf("a server's error with 404 = %s; want %s", got, OutcomeError)
	}
}

// BenchmarkObserve is the metrics' cost per request: one tools/call
// answered by its server (the counters and three histograms it touches).
func BenchmarkObserve(b *testing.B) {
	m := New(Options{})
	r := call("a", "tools/call", "echo", 200, "", 3*time.Millisecond, 2*time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(r)
	}
}

// TestMetricsLegacySSE: a legacy SSE request (its POST answered 202, the
// answer sent on the stream) is counted but not timed.
func TestMetricsLegacySSE(t *testing.T) {
	m := New(Options{})
	r := call("a", "tools/call", "echo", 202, "", time.Millisecond, 0)
	m.Observe(r)
	if got := testutil.ToFloat64(m.mcpRequests.WithLabelValues("a", "", "tools/call", "ok")); got != 1 {
		t.Errorf("counted %v; want 1", got)
	}
	if n := testutil.CollectAndCount(m.duration); n != 0 {
		t.Errorf("%d duration series; want none", n)
	}
}

// TestMetricsView: a call through an aggregated endpoint is counted under
// the member that served it, with the endpoint as the view label; what the
// view answered itself has destination "".
func TestMetricsView(t *testing.T) {
	m := New(Options{})
	for range 3 {
		r := call("a", "tools/call", "echo", 200, "", time.Millisecond, time.Millisecond/2)
		r.View = "mcp"
		m.Observe(r)
	}
	r := call("b", "tools/call", "echo", 200, "", time.Millisecond, time.Millisecond/2)
	r.View = "mcp/dev"
	m.Observe(r)
	list := call("", "tools/list", "", 200, "", time.Millisecond, 0)
	list.View = "mcp"
	m.Observe(list)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"a", "mcp", "tools/call", "ok"}, 3},
		{[]string{"b", "mcp/dev", "tools/call", "ok"}, 1},
		{[]string{"", "mcp", "tools/list", "ok"}, 1},
	} {
		if got := testutil.ToFloat64(m.mcpRequests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("mcp_requests_total%v = %v; want %v", c.labels, got, c.want)
		}
	}
	text := scrape(t, m)
	for _, want := range []string{
		`switchboard_http_requests_total{code="200",destination="a",method="POST",view="mcp"} 3`,
		`switchboard_mcp_request_duration_seconds_count{destination="a",method="tools/call",view="mcp"} 3`,
		`switchboard_mcp_upstream_duration_seconds_count{destination="a",method="tools/call"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
