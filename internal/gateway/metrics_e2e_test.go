package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// scrapeMetrics fetches /metrics and parses its samples: "name{labels}" →
// value, labels as exposed (sorted by name, as client_golang writes them).
func (h *harness) scrapeMetrics() (string, map[string]float64) {
	h.t.Helper()
	r := h.do("GET", "/metrics", nil)
	if r.status != 200 {
		h.t.Fatalf("GET /metrics: %s", r)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		h.t.Fatalf("GET /metrics: Content-Type %q, want the text format", ct)
	}
	samples := map[string]float64{}
	for _, line := range strings.Split(string(r.body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			h.t.Fatalf("/metrics: bad sample %q", line)
		}
		samples[line[:i]] = v
	}
	return string(r.body), samples
}

// lintMetrics runs promtool check metrics on text when promtool is
// installed, and client_golang's promlint (the same checks) always.
func lintMetrics(t *testing.T, text string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		} else {
			t.Logf("promtool check metrics: ok")
		}
	}
}

// waitMetrics scrapes until every wanted sample has exactly its value, or
// fails after waitFor showing the differences. A request's metrics are
// counted when its handler returns, which may be just after the client has
// read the answer, hence the polling; a count that overshoots never
// matches.
func (h *harness) waitMetrics(want map[string]float64) (string, map[string]float64) {
	h.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		text, got := h.scrapeMetrics()
		var diffs []string
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				diffs = append(diffs, fmt.Sprintf("%s = %v (present %v); want %v", k, g, ok, v))
			}
		}
		if len(diffs) == 0 {
			return text, got
		}
		if time.Now().After(deadline) {
			sort.Strings(diffs)
			h.t.Fatalf("metrics after %s:\n%s\n\nscrape:\n%s", waitFor, strings.Join(diffs, "\n"), text)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// TestMetricsScrape: after known traffic (N tools/call through the go-sdk
// client, one call of an unknown tool, one unknown method), /metrics counts
// exactly that: requests by destination, method and outcome, per-tool
// calls, histogram counts of total, upstream and gateway-added time; the
// state gauges match /healthz; the output passes promlint (and promtool
// when installed). /metrics itself is not audited.
func TestMetricsScrape(t *testing.T) {
	h := start(t, "metrics: {tool_labels: 5}\nrestart: {delays: [0s]}\n",
		dest{name: "a", mode: "plain", env: map[string]string{"SWITCHBOARD_TEST_DEST": "a"}}, dest{name: "b", mode: "plain"})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	client := mcp.NewClient(&mcp.Implementation{Name: "metrics-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url("/a/mcp"), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 7
	for i := range n {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprint("hi ", i)}})
		if err != nil || res.IsError {
			t.Fatalf("tools/call echo: %v %+v", err, res)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil {
		t.Fatal("tools/call of an unknown tool succeeded")
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	s := h.initialize("a", "{}")
	if r := s.call("x/custom", nil); r.status != 200 || len(r.msgs) != 1 || r.msgs[0].Error == nil {
		t.Fatalf("x/custom: %s; want a JSON-RPC error", r)
	}

	a := func(name, labels string) string { return name + `{destination="a"` + labels + "}" }
	// The series of a destination's own endpoint have view "" (label
	// after method, names sorted).
	av := func(name, labels string) string { return name + `{destination="a"` + labels + `,view=""}` }
	want := map[string]float64{
		av("switchboard_mcp_requests_total", `,method="initialize",outcome="ok"`):                                2,
		av("switchboard_mcp_requests_total", `,method="notifications/initialized",outcome="ok"`):                 2,
		av("switchboard_mcp_requests_total", `,method="tools/call",outcome="ok"`):                                n,
		av("switchboard_mcp_requests_total", `,method="tools/call",outcome="error"`):                             1,
		av("switchboard_mcp_requests_total", `,method="other",outcome="error"`):                                  1,
		a("switchboard_mcp_tool_calls_total", `,outcome="ok",tool="echo"`):                                       n,
		a("switchboard_mcp_tool_calls_total", `,outcome="error",tool="other"`):                                   1, // "nope" never succeeded: not admitted
		av("switchboard_mcp_request_duration_seconds_count", `,method="tools/call"`):                             n + 1,
		`switchboard_mcp_request_duration_seconds_bucket{destination="a",method="tools/call",view="",le="+Inf"}`: n + 1,
		a("switchboard_mcp_upstream_duration_seconds_count", `,method="tools/call"`):                             n + 1,
		av("switchboard_mcp_request_duration_seconds_count", `,method="other"`):                                  1,
		a("switchboard_mcp_upstream_duration_seconds_count", `,method="other"`):                                  1,
		// initialize is answered from the cached handshake: no upstream time.
		av("switchboard_mcp_request_duration_seconds_count", `,method="initialize"`):          2,
		a("switchboard_mcp_gateway_added_duration_seconds_count", ""):                         n + 2,
		`switchboard_http_requests_total{code="202",destination="a",method="POST",view=""}`:   2,
		`switchboard_http_requests_total{code="200",destination="a",method="POST",view=""}`:   2 + n + 1 + 1,
		`switchboard_http_requests_total{code="204",destination="a",method="DELETE",view=""}`: 1,
		a("switchboard_destination_state", `,state="ready"`):                                  1,
		a("switchboard_destination_state", `,state="failed"`):                                 0,
		a("switchboard_sessions", ""):                                                         1, // the raw session; the go-sdk one was deleted
		a("switchboard_mcp_calls_in_flight", ""):                                              0,
		a("switchboard_upstream_restarts_total", ""):                                          0,
		av("switchboard_open_streams", ""):                                                    0,
		`switchboard_destination_info{destination="b",type="stdio"}`:                          1,
		`switchboard_config_reloads_total{result="ok"}`:                                       0,
		`switchboard_config_last_reload_successful`:                                           1,
	}
	text, got := h.waitMetrics(want)
	lintMetrics(t, text)

	// Upstream time is a share of the total, per call.
	for _, m := range []string{"tools/call", "other"} {
		total := got[av("switchboard_mcp_request_duration_seconds_sum", `,method="`+m+`"`)]
		up := got[a("switchboard_mcp_upstream_duration_seconds_sum", `,method="`+m+`"`)]
		if !(up > 0 && up <= total) {
			t.Errorf("%s: upstream time %v, total %v: want 0 < upstream ≤ total", m, up, total)
		}
	}
	if v := got[a("switchboard_http_request_bytes_total", "")]; v <= 0 {
		t.Errorf("request bytes = %v, want > 0", v)
	}
	if v := got[a("switchboard_http_response_bytes_total", "")]; v <= 0 {
		t.Errorf("response bytes = %v, want > 0", v)
	}
	for k := range got {
		if strings.Contains(k, s.id) {
			t.Errorf("a session id appears in a metric: %s", k)
		}
	}
	// Names a client makes up (unknown namespaces) never become labels:
	// they would make series without bound.
	for i := range 3 {
		if r := h.do("POST", fmt.Sprintf("/mcp/made-up-%d", i), []byte(`{}`)); r.status != 404 {
			t.Fatalf("unknown namespace: HTTP %d", r.status)
		}
	}
	if text, _ := h.scrapeMetrics(); strings.Contains(text, "made-up-") {
		t.Errorf("an unknown namespace's name appears in the metrics:\n%s", text)
	}
	for _, l := range h.audit.parsed(t) {
		if l.Path == "/metrics" {
			t.Errorf("/metrics was audited: %+v", l)
		}
	}

	// An open GET stream is counted while it is open.
	st := h.open("GET", "/a/mcp", nil, s.hdr()...)
	if st.status != 200 {
		t.Fatalf("GET stream: %d", st.status)
	}
	h.waitMetrics(map[string]float64{av("switchboard_open_streams", ""): 1, "switchboard_http_requests_in_flight": 1})
	st.close()
	h.waitMetrics(map[string]float64{av("switchboard_open_streams", ""): 0, "switchboard_http_requests_in_flight": 0})

	// A killed child is a restart, and the state shows it.
	pids := procsWithEnv("SWITCHBOARD_TEST_DEST=a")
	if len(pids) != 1 {
		t.Fatalf("destination a runs %v; want one process", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.waitMetrics(map[string]float64{
		a("switchboard_upstream_restarts_total", ""):         1,
		a("switchboard_destination_state", `,state="ready"`): 1, // restarted (restart delay 0)
	})
}

// TestMetricsReloadAndOff: reloads are counted by result, and a reload
// with metrics off makes /metrics answer 404 (and back).
func TestMetricsReloadAndOff(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchboard.yaml")
	tag := newTag(t)
	write := func(top string) *config.Config {
		yml := configYAML(t, tag, top, dest{name: "a", mode: "plain"})
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	h, g := serveConfig(t, tag, write(""), gateway.Options{ConfigPath: path, NoReload: true}, nil)

	if err := os.WriteFile(path, []byte("listen: [not, an, address]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadFile(); err == nil {
		t.Fatal("an invalid config reloaded")
	}
	h.waitMetrics(map[string]float64{
		`switchboard_config_reloads_total{result="ok"}`:     0,
		`switchboard_config_reloads_total{result="failed"}`: 1,
		`switchboard_config_last_reload_successful`:         0,
	})
	g.Reload(write("timeout: 20s\n"))
	h.waitMetrics(map[string]float64{
		`switchboard_config_reloads_total{result="ok"}`:     1,
		`switchboard_config_reloads_total{result="failed"}`: 1,
		`switchboard_config_last_reload_successful`:         1,
	})

	g.Reload(write("metrics: {enabled: false}\n"))
	if r := h.do("GET", "/metrics", nil); r.status != 404 {
		t.Fatalf("GET /metrics with metrics off: %s; want 404", r)
	}
	g.Reload(write(""))
	h.waitMetrics(map[string]float64{`switchboard_config_reloads_total{result="ok"}`: 3})
	// A Host that is not allowed is refused, as on every route.
	if r := h.do("GET", "/metrics", nil, "Host", "evil.example"); r.status != 403 {
		t.Fatalf("GET /metrics with a foreign Host: %s; want 403", r)
	}
}

// TestMetricsByMember: 500 calls through the aggregated /mcp over two
// members are counted under the member that served each, with the view as
// its own label, on /metrics (promlint clean), /ui/status.json and in the
// audit line; what /mcp answers itself (initialize, tools/list) has no
// destination. The status page also charts them and groups a repeated
// error.
func TestMetricsByMember(t *testing.T) {
	h := start(t, "", dest{name: "a", mode: "plain"}, dest{name: "b", mode: "plain"})
	s, r0 := h.initAt("/mcp")
	if s == nil {
		t.Fatalf("initialize /mcp: %s", r0)
	}
	if r := h.do("POST", "/mcp", rpc(1, "tools/list", nil), "Mcp-Session-Id", s.id); r.status != 200 {
		t.Fatalf("tools/list: %s", r)
	}
	const perMember = 250
	for i := range 2 * perMember {
		tool := "a__echo"
		if i%2 == 1 {
			tool = "b__echo"
		}
		s.echo(tool, fmt.Sprint("hi ", i))
	}
	for range 3 { // one error, three times
		r := h.do("POST", "/mcp", rpc(9, "tools/call", toolParams("a__no-such-tool", map[string]any{}, nil)), "Mcp-Session-Id", s.id)
		if r.status != 200 || r.last(t).Error == nil {
			t.Fatalf("unknown tool: %s", r)
		}
	}

	m := func(dest, labels string) string {
		return `switchboard_mcp_requests_total{destination="` + dest + `",method=` + labels + `,view="mcp"}`
	}
	text, got := h.waitMetrics(map[string]float64{
		m("a", `"tools/call",outcome="ok"`):   perMember,
		m("b", `"tools/call",outcome="ok"`):   perMember,
		m("", `"tools/list",outcome="ok"`):    1,
		m("", `"initialize",outcome="ok"`):    1,
		m("", `"tools/call",outcome="error"`): 3, // the view answered: no member has that tool
		`switchboard_mcp_request_duration_seconds_count{destination="a",method="tools/call",view="mcp"}`: perMember,
		`switchboard_mcp_upstream_duration_seconds_count{destination="b",method="tools/call"}`:           perMember,
	})
	lintMetrics(t, text)
	for k := range got {
		if strings.Contains(k, `destination="mcp"`) {
			t.Errorf("a series still names the view as the destination: %s", k)
		}
	}

	var st struct {
		Destinations []struct {
			Name    string
			Calls   uint64
			History []struct {
				CallsPerS float64 `json:"calls_per_s"`
			}
		}
		Errors []struct {
			View, Message string
			Count         int
		}
	}
	r := h.do("GET", "/ui/status.json", nil)
	if err := json.Unmarshal(r.body, &st); err != nil || len(st.Destinations) != 2 {
		t.Fatalf("/ui/status.json: %v %s", err, r)
	}
	for _, d := range st.Destinations {
		charted := 0.0
		for _, p := range d.History {
			charted += p.CallsPerS * 10
		}
		if d.Calls != perMember || math.Round(charted) != perMember {
			t.Errorf("/ui/status.json: %s has %d calls, %v charted; want %d", d.Name, d.Calls, charted, perMember)
		}
	}
	if len(st.Errors) != 1 || st.Errors[0].Count != 3 || st.Errors[0].View != "mcp" {
		t.Errorf("/ui/status.json errors %+v; want one group of 3 through mcp", st.Errors)
	}

	byDest := map[string]int{}
	for _, l := range h.audit.parsed(t) {
		if l.MCPMethod == "tools/call" && l.Error == "" {
			if l.View != "mcp" {
				t.Errorf("audit line through /mcp with view %q: %+v", l.View, l)
			}
			byDest[l.Destination]++
		}
	}
	if byDest["a"] != perMember || byDest["b"] != perMember || len(byDest) != 2 {
		t.Errorf("audit lines of successful calls by destination: %v; want %d each for a and b", byDest, perMember)
	}
}
