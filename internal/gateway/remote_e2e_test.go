package gateway_test

// End-to-end tests of remote destinations: type streamable_http (the go-sdk
// everything-server over HTTP, and go-sdk servers on httptest) and type sse
// (a go-sdk legacy HTTP+SSE server on httptest), behind both fronts, driven
// by the official conformance suite, the go-sdk client, inspector-cli and raw
// HTTP. Servers listen on 127.0.0.1 only; every process is stopped at
// cleanup; waits are on channels and deadlines.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// remoteLegacy is the protocol version a session-era client pins.
const remoteLegacy = "2025-11-25"

// remoteDest is one streamable_http or sse destination of a test config.
type remoteDest struct {
	name, typ, url string
	extra          string // more YAML keys of the destination, unindented
}

func (d remoteDest) yaml() string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    type: %s\n    url: %s\n", d.name, d.typ, q(d.url))
	for _, l := range strings.Split(strings.TrimSpace(d.extra), "\n") {
		if l != "" {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	return b.String()
}

// startRemote serves a config of remote destinations (see start).
func startRemote(t *testing.T, top string, dests ...remoteDest) *harness {
	t.Helper()
	var b strings.Builder
	for _, d := range dests {
		b.WriteString(d.yaml())
	}
	return startAgg(t, top, b.String())
}

func skipRemoteShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real MCP servers; skipped with -short")
	}
}

// ---------------------------------------------------------------------------
// Conformance through a streamable_http destination.

// TestRemoteConformance runs the official conformance suite through
// Switchboard against the go-sdk everything-server served over Streamable
// HTTP with sessions, as a streamable_http destination. The figures are those
// of the suites against the server directly.
func TestRemoteConformance(t *testing.T) {
	skipRemoteShort(t)
	peertest.EverythingServer(t)
	peertest.Conformance(t, peertest.ConformanceStable)
	peertest.Conformance(t, peertest.ConformanceNext)
	for _, s := range []struct {
		name, version string
		extra         []string
		want          int
	}{
		{"0.1.16", peertest.ConformanceStable, nil, 40},
		{"0.2.0-alpha.12/2025-11-25", peertest.ConformanceNext, []string{"--requirements", "2025-11-25"}, 82},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			up, _ := peertest.StartEverythingServer(t, false)
			h := startRemote(t, "max_sessions: 500\n", remoteDest{name: "everything", typ: "streamable_http", url: up})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			began := time.Now()
			passed, failed, out, err := peertest.RunConformance(ctx, t, s.version, h.url("/everything/mcp"), s.extra...)
			t.Logf("conformance %s %s through a streamable_http destination: %d passed / %d failed in %v",
				s.version, strings.Join(s.extra, " "), passed, failed, time.Since(began).Round(time.Millisecond))
			if err != nil {
				t.Fatalf("RunConformance: %v\n%s", err, out)
			}
			if passed != s.want || failed != 0 {
				bad, _ := conformanceFailures(out)
				t.Errorf("got %d passed, %d failed; want exactly %d passed, 0 failed (failing scenarios: %v)", passed, failed, s.want, bad)
				t.Logf("conformance output:\n%s", out) // a failing run's only
			}
		})
	}
}

// ---------------------------------------------------------------------------
// go-sdk servers on httptest: the upstreams of the feature round trips.

// featureUpstream serves peertest.NewFeatureServer on 127.0.0.1 over Streamable HTTP
// (typ "streamable_http") or legacy HTTP+SSE (typ "sse").
func featureUpstream(t *testing.T, typ, name string) (*httptest.Server, *peertest.RequestLog) {
	t.Helper()
	ts, log, _ := featureUpstreamServer(t, typ, name)
	return ts, log
}

func featureUpstreamServer(t *testing.T, typ, name string) (*httptest.Server, *peertest.RequestLog, *mcp.Server) {
	t.Helper()
	srv := peertest.NewFeatureServer(name).Server
	var h http.Handler
	switch typ {
	case "sse":
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	default:
		// With an event store, streams are resumable (Last-Event-ID).
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	}
	log := &peertest.RequestLog{}
	ts := httptest.NewServer(log.Wrap(h))
	t.Cleanup(ts.Close)
	return ts, log, srv
}

// featureRoundTrips exercises every feature of peertest.NewFeatureServer(name)
// through cs: tools, progress, sampling, elicitation, resources, prompts.
func featureRoundTrips(ctx context.Context, t *testing.T, c *peertest.RecordingClient, cs *mcp.ClientSession, name, tag string) {
	t.Helper()
	var tools []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools = append(tools, tool.Name)
	}
	for _, want := range []string{"echo", "progress", "sample", "elicit"} {
		if !slices.Contains(tools, want) {
			t.Fatalf("tools/list = %v, want %s among them", tools, want)
		}
	}
	if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": tag}}), name+" echo: "+tag; got != want {
		t.Errorf("echo = %q, want %q", got, want)
	}

	token := "progress-" + tag
	p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
	p.SetProgressToken(token)
	if got := peertest.CallText(ctx, t, cs, p); got != "3 steps done" {
		t.Errorf("progress = %q", got)
	}
	if got := c.WaitProgress(t, token, 3, waitFor); !slices.Equal(got, []float64{1, 2, 3}) {
		t.Errorf("progress notifications %v, want [1 2 3]", got)
	}

	prompt := "what is 2+2 (" + tag + ")"
	if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"prompt": prompt}}),
		"model said: sampled("+prompt+")"; got != want {
		t.Errorf("sample = %q, want %q", got, want)
	}
	msg := "pick a username (" + tag + ")"
	if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "elicit", Arguments: map[string]any{"message": msg}}),
		"user said: accept alice"; got != want {
		t.Errorf("elicit = %q, want %q", got, want)
	}
	prompts, elicits := c.Recorded()
	if !slices.Contains(prompts, prompt) || !slices.Contains(elicits, msg) {
		t.Errorf("the client's handlers saw sampling %q and elicitation %q", prompts, elicits)
	}

	var uris []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		uris = append(uris, r.URI)
	}
	uri := "remote://" + name + "/readme"
	if !slices.Contains(uris, uri) {
		t.Fatalf("resources/list = %v, want %s", uris, uri)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	if len(rr.Contents) != 1 || rr.Contents[0].Text != "the readme of "+name {
		t.Errorf("resources/read = %+v", rr.Contents)
	}

	var prompts2 []string
	for pr, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		prompts2 = append(prompts2, pr.Name)
	}
	if !slices.Contains(prompts2, "greet") {
		t.Fatalf("prompts/list = %v, want greet", prompts2)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": tag}})
	if err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	if len(gp.Messages) != 1 {
		t.Fatalf("prompts/get = %+v", gp)
	}
	if tc, ok := gp.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "hello "+tag+" from "+name {
		t.Errorf("prompts/get message = %+v", gp.Messages[0].Content)
	}
}

// remoteFront is a way for the go-sdk client to reach a destination.
type remoteFront struct {
	name    string
	path    string // "mcp" or "sse"
	version string // ClientSessionOptions.ProtocolVersion
}

var remoteFronts = []remoteFront{
	{name: "mcp", path: "mcp", version: remoteLegacy},
	{name: "sse", path: "sse"},
	{name: "mcp-default", path: "mcp"},
}

func (f remoteFront) connect(ctx context.Context, t *testing.T, h *harness, dest string, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	url := h.url("/" + dest + "/" + f.path)
	var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
	if f.path == "sse" {
		tr = &mcp.SSEClientTransport{Endpoint: url}
	}
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: f.version})
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	t.Logf("connected to %s with protocol %s", url, cs.InitializeResult().ProtocolVersion)
	return cs
}

// TestRemoteFeatures reaches a legacy HTTP+SSE upstream (type sse) and a
// Streamable HTTP upstream (type streamable_http), both go-sdk servers,
// through both fronts with the go-sdk client: tools, progress, sampling,
// elicitation, resources and prompts.
func TestRemoteFeatures(t *testing.T) {
	skipRemoteShort(t)
	for _, typ := range []string{"sse", "streamable_http"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			up, _ := featureUpstream(t, typ, "up")
			h := startRemote(t, "", remoteDest{name: "r", typ: typ, url: up.URL})
			for _, f := range remoteFronts {
				t.Run(f.name, func(t *testing.T) {
					t.Parallel()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					c := peertest.NewRecordingClient("remote-e2e")
					cs := f.connect(ctx, t, h, "r", c.Client)
					featureRoundTrips(ctx, t, c, cs, "up", typ+"-"+f.name)
				})
			}
		})
	}
}

// TestRemoteSSEInspectorCLI drives inspector-cli through both fronts to a
// legacy HTTP+SSE upstream: tools/list and tools/call.
func TestRemoteSSEInspectorCLI(t *testing.T) {
	skipRemoteShort(t)
	cli, dir := peertest.InspectorCLI(t)
	up, _ := featureUpstream(t, "sse", "old")
	h := startRemote(t, "", remoteDest{name: "old", typ: "sse", url: up.URL})
	for _, tr := range []struct{ name, path, transport string }{
		{"streamable", "/old/mcp", "http"},
		{"sse", "/old/sse", "sse"},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			base := append(slices.Clone(cli), h.url(tr.path), "--transport", tr.transport)
			inspectorRoundTrip(ctx, t, dir, base, "old echo: hi")
		})
	}
}

// inspectorRoundTrip runs inspector-cli (argv base, which names the
// target) for tools/list and tools/call echo text=hi.
func inspectorRoundTrip(ctx context.Context, t *testing.T, dir string, base []string, want string) {
	t.Helper()
	out, errOut, err := peertest.Run(ctx, t, dir, append(slices.Clip(base), "--method", "tools/list"))
	if err != nil {
		t.Fatalf("inspector-cli tools/list: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("tools/list output is not JSON: %v\n%s", err, out)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "echo") || !slices.Contains(names, "sample") {
		t.Fatalf("tools/list = %v, want echo and sample among them", names)
	}
	out, errOut, err = peertest.Run(ctx, t, dir, append(slices.Clip(base), "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hi"))
	if err != nil {
		t.Fatalf("inspector-cli tools/call echo: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("tools/call output is not a CallToolResult: %v\n%s", err, out)
	}
	if got := peertest.Text(&res); got != want || res.IsError {
		t.Fatalf("tools/call echo = %q (isError %v), want %q\n%s", got, res.IsError, want, out)
	}
}

// headerClient returns an http.Client that adds hdr to every request.
func headerClient(hdr http.Header) *http.Client {
	return &http.Client{Transport: headerRT{hdr: hdr, next: http.DefaultTransport}}
}

// TestRemoteHeadersAndSessionLifecycle checks what an HTTP upstream sees:
// the configured headers with secrets substituted, the client headers named
// in forward_headers and no other (never the client's Authorization unless
// named), its own session per client session, the listen stream carried
// through (a list_changed notification reaches the client's GET stream) and
// the session ended (DELETE, or the legacy stream closed) when the client's
// ends.
func TestRemoteHeadersAndSessionLifecycle(t *testing.T) {
	skipRemoteShort(t)
	secrets := filepath.Join(t.TempDir(), "secrets.yml")
	if err := os.WriteFile(secrets, []byte("auth:\n  API_TOKEN: s3cret-upstream-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"streamable_http", "sse"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			authUp, authLog, authSrv := featureUpstreamServer(t, typ, "auth")
			fwdUp, fwdLog := featureUpstream(t, typ, "fwd")
			h := startRemote(t, "secrets_file: "+secrets+"\n",
				remoteDest{name: "auth", typ: typ, url: authUp.URL, extra: "headers:\n  Authorization: Bearer ${API_TOKEN}\n  X-Static: plain\nforward_headers: [X-Request-Id]\n"},
				remoteDest{name: "fwd", typ: typ, url: fwdUp.URL, extra: "forward_headers: [authorization]\n"})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			client := headerClient(http.Header{"Authorization": {"Bearer client-token"}, "X-Request-Id": {"req-42"}, "X-Other": {"nope"}})

			listChanged := make(chan struct{}, 10)
			c := mcp.NewClient(&mcp.Implementation{Name: "headers-e2e", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case listChanged <- struct{}{}:
					default:
					}
				}})
			connect := func(dest string) *mcp.ClientSession {
				cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url("/" + dest + "/mcp"), HTTPClient: client, MaxRetries: -1},
					&mcp.ClientSessionOptions{ProtocolVersion: remoteLegacy})
				if err != nil {
					t.Fatalf("connect to %s: %v", dest, err)
				}
				return cs
			}
			a1, a2, f := connect("auth"), connect("auth"), connect("fwd")
			for _, cs := range []*mcp.ClientSession{a1, a2, f} {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
					t.Fatalf("echo: %v", err)
				}
			}

			// Headers.
			for _, hd := range authLog.AllHeaders() {
				if got := hd.Get("Authorization"); got != "Bearer s3cret-upstream-token" {
					t.Errorf("auth upstream got Authorization %q, want the configured secret", got)
				}
				if got := hd.Get("X-Static"); got != "plain" {
					t.Errorf("auth upstream got X-Static %q", got)
				}
				if got := hd.Get("X-Request-Id"); got != "req-42" {
					t.Errorf("auth upstream got X-Request-Id %q, want the forwarded req-42", got)
				}
				if got := hd.Get("X-Other"); got != "" {
					t.Errorf("auth upstream got X-Other %q: not in forward_headers", got)
				}
			}
			for _, hd := range fwdLog.AllHeaders() {
				if got := hd.Get("Authorization"); got != "Bearer client-token" {
					t.Errorf("fwd upstream got Authorization %q, want the client's (forward_headers: [authorization])", got)
				}
				if got := hd.Get("X-Request-Id"); got != "" {
					t.Errorf("fwd upstream got X-Request-Id %q: not in its forward_headers", got)
				}
			}
			for _, r := range h.logs.all() {
				if strings.Contains(r.Msg+r.Attrs, "s3cret-upstream-token") {
					t.Errorf("the secret leaked into the log: %s %s", r.Msg, r.Attrs)
				}
			}

			// One upstream session per client session.
			var ids []string
			for ss := range authSrv.Sessions() {
				ids = append(ids, ss.ID())
			}
			if len(ids) != 2 {
				t.Errorf("auth upstream has %d sessions (%q), want 2: one per client session", len(ids), ids)
			}

			// The listen stream: a server notification outside any request.
			authSrv.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
			for i := 0; i < 2; i++ {
				select {
				case <-listChanged:
				case <-time.After(waitFor):
					t.Fatalf("notifications/tools/list_changed reached %d of 2 client sessions within %s", i, waitFor)
				}
			}

			// Ending the client session ends the upstream one.
			_ = a1.Close()
			if typ == "sse" {
				authLog.WaitEnded(t, http.MethodGet, 1, waitFor) // the legacy session's event stream closed
			} else {
				authLog.WaitEnded(t, http.MethodDelete, 1, waitFor)
				deleted := authLog.Deleted()
				if len(deleted) != 1 || !slices.Contains(ids, deleted[0]) {
					t.Errorf("upstream DELETEs for sessions %q, want one of %q", deleted, ids)
				}
			}
			if _, err := a2.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still"}}); err != nil {
				t.Errorf("the other session after one ended: %v", err)
			}
			_ = a2.Close()
			_ = f.Close()
		})
	}
}

// TestRemoteFrontParity checks that remote destinations get what stdio ones
// get, on both fronts: the Origin guard (403), the body limit (413), the
// upstream message limit (502), the request timeout (504), unknown sessions
// (404) and an audit record for each request past the guard.
func TestRemoteFrontParity(t *testing.T) {
	skipRemoteShort(t)
	for _, typ := range []string{"streamable_http", "sse"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			up, _ := featureUpstream(t, typ, "p")
			// timeout 2s: the 502 for a 300 KB answer must come before it
			// on a loaded machine too (a 1 s timeout won the race at load 38).
			h := startRemote(t, "max_body_bytes: 4096\nmax_message_bytes: 65536\n",
				remoteDest{name: "r", typ: typ, url: up.URL, extra: "timeout: 2s\n"})

			for _, path := range []string{"/r/mcp", "/r/sse"} {
				for _, method := range []string{"GET", "POST"} {
					r := h.do(method, path, rpc(1, "initialize", initParams("")), "Origin", "http://evil.example")
					expectRPCError(t, r, 403, -32600)
				}
			}
			expectRPCError(t, h.do("POST", "/r/mcp", rpc(1, "ping", nil), "Mcp-Session-Id", "3f0c9a2e-8f4e-4c59-9a53-0c3c1d2e4b5a"), 404, 0)

			s := h.initialize("r", "")
			if got := s.call("tools/call", toolParams("echo", map[string]any{"text": "hi"}, nil)); got.status != 200 || !strings.Contains(string(got.last(t).Result), "p echo: hi") {
				t.Fatalf("echo: %s", got)
			}
			expectRPCError(t, s.call("tools/call", toolParams("echo", map[string]any{"text": strings.Repeat("z", 8000)}, nil)), 413, 0)
			expectRPCError(t, s.call("tools/call", toolParams("big", map[string]any{"bytes": 300000}, nil)), 502, -32006)
			if got := s.call("tools/call", toolParams("big", map[string]any{"bytes": 3000}, nil)); got.status != 200 || got.last(t).Error != nil {
				t.Fatalf("big under the limit after a 502: %s", got)
			}
			t0 := time.Now()
			expectRPCError(t, s.call("tools/call", toolParams("slow", map[string]any{"ms": 60000}, nil)), 504, -32001)
			if el := time.Since(t0); el > 8*time.Second {
				t.Errorf("504 after %s, want about 2s", el)
			}
			if got := s.call("tools/call", toolParams("echo", map[string]any{"text": "after"}, nil)); got.status != 200 || got.last(t).Error != nil {
				t.Fatalf("echo after a 504: %s", got)
			}
			if r := s.delete(); r.status != 200 && r.status != 204 {
				t.Errorf("DELETE: %s", r)
			}

			// (The guard's 403s come before the audit log, for every type.)
			want := map[int]bool{404: false, 413: false, 502: false, 504: false, 200: false}
			h.audit.wait(t, "the 504", func(a auditLine) bool { return a.Status == 504 })
			for _, a := range h.audit.parsed(t) {
				if _, ok := want[a.Status]; ok {
					want[a.Status] = true
				}
				if a.Status == 504 && (a.Destination != "r" || a.MCPMethod != "tools/call" || a.Session != s.id) {
					t.Errorf("audit record of the 504: %+v", a)
				}
			}
			for st, seen := range want {
				if !seen {
					t.Errorf("no audit record with status %d", st)
				}
			}
		})
	}
}

// badUpstreams starts the broken servers of the bad-input tests and returns
// their URLs by case name, with a request log for each.
func badUpstreams(t *testing.T) (urls map[string]string, logs map[string]*peertest.RequestLog) {
	t.Helper()
	urls, logs = map[string]string{}, map[string]*peertest.RequestLog{}
	serve := func(name string, h http.HandlerFunc) {
		logs[name] = &peertest.RequestLog{}
		ts := httptest.NewServer(logs[name].Wrap(h))
		t.Cleanup(ts.Close)
		urls[name] = ts.URL + "/mcp"
	}
	serve("401", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="e2e"`)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
	})
	serve("403", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	})
	serve("html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><html><body><h1>Welcome</h1></body></html>"))
	})
	serve("json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","service":"not an MCP server"}`))
	})
	tlsLog := &peertest.RequestLog{}
	tlsSrv := httptest.NewTLSServer(tlsLog.Wrap(http.NotFoundHandler()))
	t.Cleanup(tlsSrv.Close)
	urls["tls"], logs["tls"] = tlsSrv.URL+"/mcp", tlsLog
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	urls["closed"] = "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	return urls, logs
}

// badCases are the bad upstreams and what the error must say.
var badCases = []struct {
	name string
	want []string // all of them, case-insensitively
}{
	{"closed", []string{"unreachable", "connection refused"}},
	{"401", []string{"401"}},
	{"403", []string{"403"}},
	{"html", []string{"not MCP", "text/html"}},
	{"json", []string{"not MCP"}},
	{"tls", []string{"certificate"}},
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(strings.ToLower(s), strings.ToLower(sub)) {
			return false
		}
	}
	return true
}

// TestRemoteBadUpstream puts broken upstreams behind both destination
// types: the client's initialize fails promptly with an error that says
// what is wrong, and an upstream that refuses the credentials (401, 403) is
// asked once, not in a loop.
func TestRemoteBadUpstream(t *testing.T) {
	skipRemoteShort(t)
	for _, typ := range []string{"streamable_http", "sse"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			urls, logs := badUpstreams(t)
			var dests []remoteDest
			for _, c := range badCases {
				dests = append(dests, remoteDest{name: "b" + c.name, typ: typ, url: urls[c.name]})
			}
			h := startRemote(t, "restart: {delays: [10ms], max_attempts: 2}\n", dests...)
			for _, c := range badCases {
				t.Run(c.name, func(t *testing.T) {
					before := 0
					if l := logs[c.name]; l != nil {
						before = l.Total()
					}
					t0 := time.Now()
					r := h.do("POST", "/b"+c.name+"/mcp", rpc(1, "initialize", initParams("")))
					if r.status < 400 || len(r.msgs) != 1 || r.msgs[0].Error == nil {
						t.Fatalf("initialize: %s, want an HTTP error status with a JSON-RPC error", r)
					}
					if msg := r.msgs[0].Error.Message; !containsAll(msg, c.want) {
						t.Errorf("initialize error %q (HTTP %d), want it to mention %q", msg, r.status, c.want)
					}
					t.Logf("HTTP %d: %s", r.status, r.msgs[0].Error.Message)
					if el := time.Since(t0); el > 5*time.Second {
						t.Errorf("the error took %s", el)
					}
					if c.name == "401" || c.name == "403" {
						if n := logs[c.name].Total() - before; n != 1 {
							t.Errorf("the upstream answering %s got %d requests for one initialize, want 1 (no retry loop)", c.name, n)
						}
					}
				})
			}
			// Nothing asks them again in the background either: once the
			// gateway has stopped, each got its one request.
			h.stop()
			for _, name := range []string{"401", "403"} {
				if n := logs[name].Total(); n != 1 {
					t.Errorf("the upstream answering %s got %d requests in all, want 1", name, n)
				}
			}
		})
	}
}

// dropUpstream is a minimal Streamable HTTP server whose tool calls answer
// with an event stream that ends before the response: "drop" after an
// event with an id (resumable, but a GET with Last-Event-ID is refused),
// "drop-noid" with no event id at all. It offers no listen stream.
func dropUpstream(t *testing.T) (*httptest.Server, *peertest.RequestLog) {
	t.Helper()
	log := &peertest.RequestLog{}
	ts := httptest.NewServer(log.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			http.Error(w, "no GET here", http.StatusMethodNotAllowed)
			return
		case http.MethodDelete:
			return
		}
		var m wireMsg
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "drop-session")
			_, _ = w.Write(rpcResult(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"drop","version":"1"}}`))
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "tools/call":
			var p struct{ Name string }
			_ = json.Unmarshal(m.Params, &p)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			if p.Name == "drop" {
				_, _ = fmt.Fprintf(w, "id: e1\nretry: 10\nevent: message\ndata: %s\n\n",
					`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`)
			} else {
				_, _ = fmt.Fprint(w, ": nothing to see\n\n")
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(rpcResult(m.ID, `{}`))
		}
	})))
	t.Cleanup(ts.Close)
	return ts, log
}

func rpcResult(id json.RawMessage, result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`)
}

// TestRemoteStreamableResumption: a response stream that the upstream
// closes mid-call (SEP-1699) is resumed with Last-Event-ID and the call
// completes; when it cannot be resumed (no event ids, or the GET refused)
// the call fails with an error that says so.
func TestRemoteStreamableResumption(t *testing.T) {
	skipRemoteShort(t)
	up, upLog := featureUpstream(t, "streamable_http", "res")
	drop, dropLog := dropUpstream(t)
	h := startRemote(t, "",
		remoteDest{name: "res", typ: "streamable_http", url: up.URL},
		remoteDest{name: "drop", typ: "streamable_http", url: drop.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, f := range remoteFronts[:2] {
		t.Run(f.name, func(t *testing.T) {
			c := peertest.NewRecordingClient("remote-e2e")
			cs := f.connect(ctx, t, h, "res", c.Client)
			gets := upLog.Count(http.MethodGet)
			p := &mcp.CallToolParams{Name: "reconnect"}
			p.SetProgressToken("resume-" + f.name)
			if got := peertest.CallText(ctx, t, cs, p); got != "answered after the stream closed" {
				t.Errorf("reconnect = %q", got)
			}
			c.WaitProgress(t, "resume-"+f.name, 1, waitFor)
			if upLog.Count(http.MethodGet) == gets {
				t.Errorf("no GET reached the upstream: the stream was not resumed")
			}
			resumed := false
			for _, hd := range upLog.AllHeaders() {
				resumed = resumed || hd.Get("Last-Event-ID") != ""
			}
			if !resumed {
				t.Errorf("no request carried Last-Event-ID")
			}
		})
	}

	s := h.initialize("drop", "")
	for _, tc := range []struct{ tool, want string }{
		{"drop", "could not be resumed: upstream returned 405"},
		{"drop-noid", "closed the response stream before answering"},
	} {
		r := s.call("tools/call", toolParams(tc.tool, map[string]any{}, nil))
		m := r.last(t)
		t.Logf("%s: %v", tc.tool, m.Error)
		if m.Error == nil || !strings.Contains(m.Error.Message, tc.want) {
			t.Errorf("tools/call %s: %s, want an error saying %q", tc.tool, r, tc.want)
		}
	}
	if n := dropLog.Count(http.MethodGet); n > 1+3 {
		t.Errorf("%d GETs: more resumption attempts than the client's limit", n)
	}
}

// restartable serves peertest.NewFeatureServer over typ on a fixed 127.0.0.1 port;
// kill stops it at once (streams included) and restart serves a fresh one
// (new sessions, new state) on the same port.
type restartable struct {
	t    *testing.T
	typ  string
	addr string
	mu   sync.Mutex
	srv  *http.Server
	log  *peertest.RequestLog
}

func startRestartable(t *testing.T, typ string) *restartable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &restartable{t: t, typ: typ, addr: ln.Addr().String()}
	r.serve(ln, "first")
	t.Cleanup(r.kill)
	return r
}

func (r *restartable) url() string { return "http://" + r.addr + "/mcp" }

func (r *restartable) serve(ln net.Listener, name string) {
	srv := peertest.NewFeatureServer(name).Server
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if r.typ == "sse" {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	log := &peertest.RequestLog{}
	hs := &http.Server{Handler: log.Wrap(h)}
	r.mu.Lock()
	r.srv, r.log = hs, log
	r.mu.Unlock()
	go func() { _ = hs.Serve(ln) }()
}

func (r *restartable) kill() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	_ = srv.Close()
}

func (r *restartable) restart(name string) *peertest.RequestLog {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("listening on %s again: %v", r.addr, err)
	}
	r.serve(ln, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log
}

// TestRemoteUpstreamRestart kills a remote upstream and starts a fresh one
// on the same port between two calls of a client session, on both fronts:
// an sse destination re-dials the event stream (with backoff) and replays
// the handshake; a streamable_http one re-initializes on the 404 and
// retries the call. The client sees nothing.
func TestRemoteUpstreamRestart(t *testing.T) {
	skipRemoteShort(t)
	for _, typ := range []string{"sse", "streamable_http"} {
		for _, f := range remoteFronts[:2] {
			t.Run(typ+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				up := startRestartable(t, typ)
				h := startRemote(t, fastRestart, remoteDest{name: "r", typ: typ, url: up.url()})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				c := peertest.NewRecordingClient("remote-e2e")
				cs := f.connect(ctx, t, h, "r", c.Client)
				featureRoundTrips(ctx, t, c, cs, "first", "before")

				up.kill()
				log := up.restart("second")
				if typ == "sse" {
					log.WaitStarted(t, http.MethodGet, 1, waitFor) // Switchboard re-dialled the event stream
				}
				if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "after"}}); got != "second echo: after" {
					t.Errorf("echo after the restart = %q", got)
				}
				featureRoundTrips(ctx, t, c, cs, "second", "after")
			})
		}
	}
}
