package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// One authorization decision for every path (issue 20, item 1): a client
// calls exactly what its grants and tool rules allow on a destination's
// endpoint, the merged views (path, X-Namespace, legacy SSE), the stdio
// front and from a code-mode script (call_tool, api.x, call_tool_raw,
// parallel, inside try); its rate limit holds across all of them, a
// script's calls included; every script call's audit line names it.

const (
	azAliceToken = "az-alice-token-0123456789"
	azBobToken   = "az-bob-token-0123456789"
)

func authzTop(is *issuer) string {
	return `max_sessions: 100
timeout: 20s
auth:
  resource: ` + gwResource + `
  oauth:
    issuer: ` + is.url + `
    jwks_url: ` + is.url + `/jwks
clients:
  alice:
    tokens: ["sha256:` + sha256Hex(azAliceToken) + `"]
    destinations: [log]
    namespaces: [mcp, ns1]
    tools: {deny: ["*secret_delete*"]}
  carol:
    subjects: [carol]
    destinations: [log]
    namespaces: [mcp, ns1]
    tools: {deny: ["*secret_delete*"]}
  bob:
    tokens: ["sha256:` + sha256Hex(azBobToken) + `"]
    destinations: [log]
    namespaces: [mcp, ns1]
    rate_limit: {rate: 0.001, burst: 30}
namespaces:
  ns1:
    servers: [log, other]
    code_mode: true
    sandbox: {timeout: 10s, max_calls: 200}
`
}

// authzGateway serves authzTop over HTTP and returns the harness, the
// YAML (for a stdio gateway of the same config) and carol's OAuth token.
func authzGateway(t *testing.T) (*harness, string, string) {
	t.Helper()
	is := startIssuer(t)
	tag := newTag(t)
	yml := configYAML(t, tag, authzTop(is), aggDest("log", "write", "secret_delete"), aggDest("other", "peek"))
	cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yml, err)
	}
	h, _ := serveConfig(t, tag, cfg, gateway.Options{}, nil)
	return h, yml, is.sign(is.claimsFor("carol", gwResource))
}

// stdioAs serves view of yml on the stdio front as client, with a go-sdk
// client session on it; audit lines go to sink.
func stdioAs(ctx context.Context, t *testing.T, yml, view, client string, sink io.Writer) *mcp.ClientSession {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: sink, StdioClient: client})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- g.ServeStdio(context.Background(), view, inR, outW); outW.Close() }()
	cs, err := newInteropClient().Client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect to the stdio front: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		inW.Close()
		go io.Copy(io.Discard, outR)
		if err := <-served; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return cs
}

// authzPath is one way in.
type authzPath struct {
	name    string
	skip    string // why the row is not run yet
	connect func(ctx context.Context, t *testing.T, tok string) *mcp.ClientSession
	prefix  string // "log__" on views
	script  bool   // code mode is on
}

func authzPaths(h *harness, yml string, sink io.Writer, clients map[string]string) []authzPath {
	// connect opens a go-sdk session at path (protocol 2025-11-25, or the
	// SDK's latest, 2026-07-28 stateless, when the headers name
	// "version" "modern"), with extra headers.
	streamable := func(path string, hdr ...string) func(context.Context, *testing.T, string) *mcp.ClientSession {
		return func(ctx context.Context, t *testing.T, tok string) *mcp.ClientSession {
			version := legacy
			hh := http.Header{"Authorization": {"Bearer " + tok}}
			for i := 0; i+1 < len(hdr); i += 2 {
				if hdr[i] == "version" {
					version = ""
					continue
				}
				hh.Set(hdr[i], hdr[i+1])
			}
			hc := &http.Client{Transport: headerRT{hdr: hh, next: http.DefaultTransport}}
			var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: h.url(path), HTTPClient: hc, MaxRetries: -1}
			if strings.HasSuffix(path, "/sse") || strings.HasPrefix(path, "/sse") {
				tr = &mcp.SSEClientTransport{Endpoint: h.url(path), HTTPClient: hc}
			}
			cs, err := newInteropClient().Client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect %s: %v", path, err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			return cs
		}
	}
	return []authzPath{
		{name: "/{d}/mcp", connect: streamable("/log/mcp")},
		{name: "/mcp", connect: streamable("/mcp"), prefix: "log__"},
		{name: "/mcp/{ns}", connect: streamable("/mcp/ns1"), prefix: "log__", script: true},
		{name: "/mcp/{ns} 2026-07-28", connect: streamable("/mcp/ns1", "version", "modern"), prefix: "log__", script: true},
		{name: "/{d}/mcp 2026-07-28", connect: streamable("/log/mcp", "version", "modern")},
		{name: "/{ns}/mcp", connect: streamable("/ns1/mcp"), prefix: "log__", script: true},
		{name: "/sse", connect: streamable("/sse"), prefix: "log__"},
		{name: "/sse/{ns}", connect: streamable("/sse/ns1"), prefix: "log__", script: true},
		{name: "X-Namespace", connect: streamable("/mcp", "X-Namespace", "ns1"), prefix: "log__", script: true},
		{name: "stdio front", prefix: "log__", script: true, connect: func(ctx context.Context, t *testing.T, tok string) *mcp.ClientSession {
			return stdioAs(ctx, t, yml, "ns1", clients[tok], sink)
		}},
	}
}

// callErr calls a tool: nil when it answered without isError.
func callErr(ctx context.Context, cs *mcp.ClientSession, name string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err == nil && res.IsError {
		return errString("tool error")
	}
	return err
}

// scripts are code mode's ways of calling a tool: server and tool's name
// in scripts.
var scripts = map[string]string{
	"call_tool":     `call_tool("%s", "%s", {})`,
	"api.x":         `api.%s.%s({})`,
	"call_tool_raw": `api.call_tool_raw("%s", "%s", {})`,
	"parallel":      `parallel([["%s", "%s", {}]])[0]`,
	"try":           `try { call_tool("%s", "%s", {}); "called" } catch (e) { throw e }`,
}

func script(how, server, tool string) string {
	return strings.Replace(strings.Replace(scripts[how], "%s", server, 1), "%s", tool, 1)
}

func TestAuthorizationEveryPath(t *testing.T) {
	h, yml, carolToken := authzGateway(t)
	stdioAudit := newLineSink()
	// alice has a static token, carol an OAuth one; the same rules.
	clients := map[string]string{azAliceToken: "alice", carolToken: "carol"}
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitFor)
	defer cancel()

	// A destination outside alice's grant: 403 before anything else.
	if r := h.do("POST", "/other/mcp", rpc(1, "ping", nil), bearer(azAliceToken)...); r.status != http.StatusForbidden {
		t.Errorf("alice on /other/mcp: %s, want 403", r)
	}

	for _, who := range []string{azAliceToken, carolToken} {
		for _, p := range authzPaths(h, yml, stdioAudit, clients) {
			authzRow(ctx, t, clients[who]+" "+p.name, p, who)
		}
	}
	// Every script call's audit line names the client, and no denied tool
	// reached a server.
	for what, lines := range map[string][]string{"HTTP": auditRaw(h), "stdio": stdioAudit.raw()} {
		n := map[string]int{}
		for _, l := range lines {
			var a map[string]any
			if json.Unmarshal([]byte(l), &a) != nil || a["via"] != "execute" {
				continue
			}
			client, _ := a["client"].(string)
			n[client]++
			if client != "alice" && client != "carol" {
				t.Errorf("%s: a script call's audit line without its client: %s", what, l)
			}
			tool, _ := a["tool"].(string)
			if errText, _ := a["error"].(string); (strings.Contains(tool, "secret_delete") || strings.Contains(tool, "peek")) && !strings.HasPrefix(errText, "PermissionError") {
				t.Errorf("%s: a denied tool was called: %s", what, l)
			}
		}
		if n["alice"] == 0 || n["carol"] == 0 {
			t.Errorf("%s: audit lines of script calls by client: %v, want some of alice's and carol's", what, n)
		}
	}
}

// authzRow checks one path for one caller (tok) with alice's rules.
func authzRow(ctx context.Context, t *testing.T, name string, p authzPath, tok string) {
	t.Run(name, func(t *testing.T) {
		if p.skip != "" {
			t.Skip(p.skip)
		}
		cs := p.connect(ctx, t, tok)
		want := []string{p.prefix + "write"}
		if p.script {
			want = append(want, "execute", "inspect", "search")
		}
		wantNames(t, "alice's tools", aggTools(ctx, t, cs), want...)
		if err := callErr(ctx, cs, p.prefix+"write"); err != nil {
			t.Errorf("alice calls %swrite: %v", p.prefix, err)
		}
		denied := []string{p.prefix + "secret_delete"}
		if p.prefix != "" {
			denied = append(denied, "other__peek") // a member outside her destinations
		}
		for _, n := range denied {
			if err := callErr(ctx, cs, n); err == nil {
				t.Errorf("alice called %s", n)
			}
		}
		if !p.script {
			return
		}
		// search and inspect show only what she may call.
		res := callTool(ctx, t, cs, "search", map[string]any{"query": "secret_delete peek write", "limit": 50})
		body, _ := json.Marshal(jsonMember(res.StructuredContent, "results"))
		if strings.Contains(string(body), "secret_delete") || strings.Contains(string(body), "peek") || !strings.Contains(string(body), "log__write") {
			t.Errorf("search as alice: %s", body)
		}
		res = callTool(ctx, t, cs, "inspect", map[string]any{"names": []string{"log__secret_delete", "other__peek", "log__write"}})
		body, _ = json.Marshal(res.StructuredContent)
		var insp struct {
			Tools   []struct{ Name string } `json:"tools"`
			Unknown []string                `json:"unknown"`
		}
		_ = json.Unmarshal(body, &insp)
		if len(insp.Tools) != 1 || insp.Tools[0].Name != "log__write" || !slices.Equal(insp.Unknown, []string{"log__secret_delete", "other__peek"}) {
			t.Errorf("inspect as alice: %s", body)
		}
		for how := range scripts {
			if r := execute(ctx, t, cs, script(how, "log", "write")); r.Status != "ok" {
				t.Errorf("%s of log.write: %+v", how, r)
			}
			for _, target := range [][2]string{{"log", "secret_delete"}, {"other", "peek"}} {
				r := execute(ctx, t, cs, script(how, target[0], target[1]))
				if r.Status != "error" || !strings.Contains(r.Error, "PermissionError") {
					t.Errorf("%s of %s.%s: %+v, want a PermissionError", how, target[0], target[1], r)
				}
			}
		}
		// Caught inside the script, the refusal still stops the call.
		r := execute(ctx, t, cs, `try { call_tool("log", "secret_delete", {}); "called" } catch (e) { e.name }`)
		if r.Status != "ok" || string(r.Result) != `"PermissionError"` {
			t.Errorf("try around a denied call: %+v", r)
		}
	})
}

// TestAuthorizationRateLimitEveryPath: one bucket per client, whatever the
// path; a script's calls take from it.
func TestAuthorizationRateLimitEveryPath(t *testing.T) {
	h, yml, _ := authzGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitFor)
	defer cancel()
	paths := authzPaths(h, yml, io.Discard, map[string]string{azBobToken: "bob"})

	// drain runs a script that calls log.write 100 times and returns how
	// many calls went through; the rest must have been refused by the rate
	// limit.
	drain := func(t *testing.T, cs *mcp.ClientSession) int {
		r := execute(ctx, t, cs, `let ok = 0, limited = 0;
for (let i = 0; i < 100; i++) {
  try { call_tool("log", "write", {}); ok++ } catch (e) { if (String(e.message).includes("rate limit")) limited++; else throw e }
}
({ok, limited})`)
		var got struct{ OK, Limited int }
		if r.Status != "ok" || json.Unmarshal(r.Result, &got) != nil {
			t.Fatalf("drain: %+v", r)
		}
		if got.OK+got.Limited != 100 || got.OK == 0 || got.Limited == 0 {
			t.Fatalf("a script's 100 calls with a burst of 30: %d went through, %d refused by the rate limit", got.OK, got.Limited)
		}
		return got.OK
	}

	// HTTP: bob's calls on the direct endpoint work, a script spends the
	// rest of his bucket, then every HTTP path answers 429.
	direct := paths[0].connect(ctx, t, azBobToken)
	if err := callErr(ctx, direct, "write"); err != nil {
		t.Fatalf("bob calls write: %v", err)
	}
	ns := paths[2].connect(ctx, t, azBobToken) // /mcp/ns1
	drain(t, ns)
	if err := callErr(ctx, direct, "write"); err == nil {
		t.Errorf("bob's direct call after a script spent his bucket went through")
	}
	for _, p := range []string{"/log/mcp", "/mcp", "/mcp/ns1", "/sse"} {
		if r := h.do("POST", p, rpc(1, "ping", nil), bearer(azBobToken)...); r.status != http.StatusTooManyRequests {
			t.Errorf("bob on %s after the script: %s, want 429", p, r)
		}
	}
	if r := h.do("POST", "/mcp", rpc(1, "ping", nil), append(bearer(azBobToken), "X-Namespace", "ns1")...); r.status != http.StatusTooManyRequests {
		t.Errorf("bob with X-Namespace after the script: %s, want 429", r)
	}
	// Another client's bucket is its own.
	if r := h.do("POST", "/log/mcp", rpc(1, "ping", nil), bearer(azAliceToken)...); r.status == http.StatusTooManyRequests {
		t.Errorf("alice limited by bob's bucket: %s", r)
	}

	// The stdio front: each request takes a token, a script's calls too.
	st := paths[len(paths)-1].connect(ctx, t, azBobToken)
	if err := callErr(ctx, st, "log__write"); err != nil {
		t.Fatalf("bob calls log__write on stdio: %v", err)
	}
	drain(t, st)
	if err := callErr(ctx, st, "log__write"); err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("bob's stdio call after the script: %v, want the rate limit", err)
	}
}

// raw returns the lines written so far.
func (s *lineSink) raw() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.lines))
	for _, l := range s.lines {
		out = append(out, string(l))
	}
	return out
}

// jsonMember is v's member key, when v is an object.
func jsonMember(v any, key string) any {
	if m, ok := v.(map[string]any); ok {
		return m[key]
	}
	return nil
}
