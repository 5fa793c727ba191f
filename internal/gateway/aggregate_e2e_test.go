package gateway_test

// End-to-end tests of the aggregated endpoints (/mcp, /mcp/{name}, /sse,
// /sse/{name}, /message…) and of `switchboard serve --stdio`: real
// processes behind one endpoint (the go-sdk conformance everything-server
// and small go-sdk servers run by re-executing this test binary), driven by
// the go-sdk client and by the official conformance suite.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// A go-sdk server run by re-executing the test binary with
// SWITCHBOARD_AGG_NAME=<name> and SWITCHBOARD_AGG_TOOLS=<comma list>. Each
// tool answers "<name>:<tool>:<arguments>"; every server also has the
// prompt greet, the resource <name>://readme and the template
// <name>://item/{id}.
const (
	envAggName  = "SWITCHBOARD_AGG_NAME"
	envAggTools = "SWITCHBOARD_AGG_TOOLS"
)

func init() {
	name := os.Getenv(envAggName)
	if name == "" || os.Getenv(envServerMode) != "" {
		return
	}
	s := newAggServer(name, strings.Split(os.Getenv(envAggTools), ","))
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "agg server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func newAggServer(name string, tools []string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "agg-" + name, Version: "1.0.0"},
		&mcp.ServerOptions{Instructions: "I am " + name + "."})
	for _, tool := range tools {
		if tool == "" {
			continue
		}
		t := &mcp.Tool{Name: tool, Description: name + "'s " + tool, InputSchema: map[string]any{"type": "object"}}
		if strings.HasPrefix(tool, "ro_") { // read-only by annotation (policy tests)
			t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		s.AddTool(t,
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := string(req.Params.Arguments)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + tool + ":" + args}}}, nil
			})
	}
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "a greeting from " + name},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "hello from " + name}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: name + "://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: req.Params.URI, MIMEType: "text/plain", Text: name + " readme"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: name + "://item/{id}", Name: "item", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: req.Params.URI, MIMEType: "text/plain", Text: name + " item " + req.Params.URI}}}, nil
		})
	return s
}

// aggDest is a stdio destination running newAggServer.
func aggDest(name string, tools ...string) dest {
	exe, _ := os.Executable()
	return dest{name: name, command: []string{exe}, env: map[string]string{envAggName: name, envAggTools: strings.Join(tools, ",")}}
}

// startAgg is start with extra destination YAML appended (remote
// destinations, indented two spaces under destinations:): it builds a
// Gateway from the YAML and serves it with serveConfig.
func startAgg(t *testing.T, top, extra string, dests ...dest) *harness {
	t.Helper()
	tag := newTag(t)
	yml := configYAML(t, tag, top, dests...) + extra
	cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yml, err)
	}
	h, _ := serveConfig(t, tag, cfg, gateway.Options{}, nil)
	return h
}

// headerRT adds headers to every request.
type headerRT struct {
	hdr  http.Header
	next http.RoundTripper
}

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.hdr {
		r.Header[k] = v
	}
	return rt.next.RoundTrip(r)
}

// aggConn says how to connect.
type aggConn struct {
	path      string // "/mcp/pair", "/sse", …
	namespace string // X-Namespace header; "" none
	version   string // "" = the SDK's latest (2026-07-28 first)
}

func (c aggConn) transport(base string) mcp.Transport {
	hc := &http.Client{Transport: http.DefaultTransport}
	if c.namespace != "" {
		hc.Transport = headerRT{hdr: http.Header{"X-Namespace": {c.namespace}}, next: http.DefaultTransport}
	}
	if strings.HasPrefix(c.path, "/sse") || strings.HasSuffix(c.path, "/sse") {
		return &mcp.SSEClientTransport{Endpoint: base + c.path, HTTPClient: hc}
	}
	return &mcp.StreamableClientTransport{Endpoint: base + c.path, HTTPClient: hc, MaxRetries: -1}
}

// aggConnect opens a go-sdk client session (legacy unless version is "").
func aggConnect(ctx context.Context, t *testing.T, base string, c aggConn, client *mcp.Client) *mcp.ClientSession {
	t.Helper()
	if client == nil {
		client = newInteropClient().Client
	}
	cs, err := client.Connect(ctx, c.transport(base), &mcp.ClientSessionOptions{ProtocolVersion: c.version})
	if err != nil {
		t.Fatalf("connect %s (X-Namespace %q): %v", c.path, c.namespace, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func aggTools(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	names := interopToolNames(ctx, t, cs)
	slices.Sort(names)
	return names
}

// withPrefix keeps the names that start with one of prefixes.
func withPrefix(names []string, prefixes ...string) []string {
	var out []string
	for _, n := range names {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

func wantNames(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

const legacy = "2025-11-25"

const aggTop = `max_sessions: 200
timeout: 20s
restart: {delays: [10ms], max_attempts: 1}
namespaces:
  conf:
    servers: [everything, alpha]
    tool_prefix: conflict
  pair:
    servers: [alpha, beta]
    tool_prefix: conflict
  strict:
    servers: [alpha, beta]
    tool_prefix: never
  strictok:
    servers: [alpha, gamma]
    tool_prefix: never
  filtered:
    servers: [alpha, beta]
    tools: {allow: ["alpha__*", "beta__echo"], deny: ["*add*"]}
  home:
    servers: [secret]
    isolated: true
  flaky:
    servers: [alpha, broken]
    isolated: true
groups:
  world:
    namespaces: [pair, "!home"]
`

// TestAggregateE2E serves several namespaces, groups and the default view
// of real servers and checks each behaviour through the go-sdk client.
func TestAggregateE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers; skipped with -short")
	}
	bin := peertest.EverythingServer(t)
	// isolation: session, so that server→client requests (sampling) of
	// parallel subtests can always be told apart (see README).
	h := startAgg(t, aggTop, "",
		dest{name: "everything", command: []string{bin}, isolation: "session"},
		aggDest("alpha", "echo", "add", "alpha_only"),
		aggDest("beta", "echo", "add", "beta_only"),
		aggDest("gamma", "gamma_only"),
		aggDest("secret", "secret_tool"),
		aggDest("message", "msg_tool"), // a destination whose routes /message/{x} shadow
		dest{name: "broken", command: []string{"/nonexistent/switchboard-test-server"}},
	)
	base := h.url("")

	t.Run("default view", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ic := newInteropClient()
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp", version: legacy}, ic.Client)
		ir := cs.InitializeResult()
		if ir.ServerInfo == nil || ir.ServerInfo.Name != "switchboard" {
			t.Errorf("serverInfo = %+v, want switchboard", ir.ServerInfo)
		}
		if ir.Capabilities.Tools == nil || !ir.Capabilities.Tools.ListChanged || ir.Capabilities.Prompts == nil ||
			ir.Capabilities.Resources == nil || !ir.Capabilities.Resources.Subscribe || ir.Capabilities.Logging == nil ||
			ir.Capabilities.Completions == nil {
			t.Errorf("capabilities = %+v, want the union (tools, prompts, resources+subscribe, logging, completions)", ir.Capabilities)
		}
		if !strings.Contains(ir.Instructions, "I am alpha.") {
			t.Errorf("instructions = %q, want the servers' instructions merged", ir.Instructions)
		}
		names := aggTools(ctx, t, cs)
		wantNames(t, "default view tools (ours)", withPrefix(names, "alpha__", "beta__", "gamma__", "secret__", "message__", "broken__"),
			"alpha__echo", "alpha__add", "alpha__alpha_only", "beta__echo", "beta__add", "beta__beta_only",
			"gamma__gamma_only", "message__msg_tool")
		if !slices.Contains(names, "everything__test_simple_text") {
			t.Errorf("tools = %v, want everything__test_simple_text", names)
		}
		for _, n := range names {
			if !strings.Contains(n, "__") {
				t.Errorf("tool %q is not prefixed in the default view", n)
			}
		}
		// Routing: one tool of each server.
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "everything__test_simple_text"}); got != "This is a simple text response for testing." {
			t.Errorf("everything__test_simple_text = %q", got)
		}
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"x": 1}}); got != `alpha:echo:{"x":1}` {
			t.Errorf("alpha__echo = %q", got)
		}
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "beta__echo"}); !strings.HasPrefix(got, "beta:echo:") {
			t.Errorf("beta__echo = %q", got)
		}
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "gamma__gamma_only"}); !strings.HasPrefix(got, "gamma:gamma_only:") {
			t.Errorf("gamma__gamma_only = %q", got)
		}
		// Progress reaches the client under its own token.
		params := &mcp.CallToolParams{Name: "everything__test_tool_with_progress"}
		params.SetProgressToken("agg-progress")
		peertest.CallText(ctx, t, cs, params)
		interopCheckProgress(t, ic.progressFor("agg-progress", 3), []float64{0, 50, 100}, 100)
		// An unknown tool is a JSON-RPC error, not a transport failure.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope__nothing"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("unknown tool: err = %v", err)
		}

		// Prompts: prefixed, routed by name.
		var prompts []string
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			prompts = append(prompts, p.Name)
		}
		for _, want := range []string{"alpha__greet", "beta__greet", "everything__test_simple_prompt"} {
			if !slices.Contains(prompts, want) {
				t.Errorf("prompts = %v, want %s", prompts, want)
			}
		}
		gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta__greet"})
		if err != nil || len(gp.Messages) == 0 || gp.Messages[0].Content.(*mcp.TextContent).Text != "hello from beta" {
			t.Errorf("prompts/get beta__greet = %+v, %v", gp, err)
		}

		// Resources by URI, templates by pattern.
		var uris []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			uris = append(uris, r.URI)
		}
		for _, want := range []string{"alpha://readme", "beta://readme", "test://static-text"} {
			if !slices.Contains(uris, want) {
				t.Errorf("resources = %v, want %s", uris, want)
			}
		}
		var templates []string
		for rt, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			templates = append(templates, rt.URITemplate)
		}
		for _, want := range []string{"alpha://item/{id}", "gamma://item/{id}", "test://template/{id}/data"} {
			if !slices.Contains(templates, want) {
				t.Errorf("resource templates = %v, want %s", templates, want)
			}
		}
		for uri, want := range map[string]string{
			"alpha://readme":         "alpha readme",
			"gamma://readme":         "gamma readme",
			"beta://item/7":          "beta item beta://item/7",
			"test://static-text":     "This is the content of the static text resource.",
			"test://template/9/data": `"id": "9"`,
		} {
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil || len(rr.Contents) == 0 || !strings.Contains(rr.Contents[0].Text, want) {
				t.Errorf("resources/read %s = %+v, %v; want %q", uri, rr, err, want)
			}
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
			t.Errorf("resources/subscribe: %v", err)
		}
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Errorf("logging/setLevel: %v", err)
		}
		comp, err := cs.Complete(ctx, &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "everything__test_prompt_with_arguments"},
			Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "x"},
		})
		if err != nil || comp == nil {
			t.Errorf("completion/complete (prompt ref): %v", err)
		}
		if err := cs.Ping(ctx, nil); err != nil {
			t.Errorf("ping: %v", err)
		}
	})

	t.Run("conflict policy", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/pair", version: legacy}, nil)
		wantNames(t, "pair tools", aggTools(ctx, t, cs),
			"alpha__echo", "beta__echo", "alpha__add", "beta__add", "alpha_only", "beta_only")
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "beta_only"}); !strings.HasPrefix(got, "beta:beta_only:") {
			t.Errorf("beta_only = %q", got)
		}
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "alpha__add"}); !strings.HasPrefix(got, "alpha:add:") {
			t.Errorf("alpha__add = %q", got)
		}
	})

	t.Run("never policy", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/strictok", version: legacy}, nil)
		wantNames(t, "strictok tools", aggTools(ctx, t, cs), "echo", "add", "alpha_only", "gamma_only")
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "gamma_only"}); !strings.HasPrefix(got, "gamma:gamma_only:") {
			t.Errorf("gamma_only = %q", got)
		}
		cs = aggConnect(ctx, t, base, aggConn{path: "/mcp/strict", version: legacy}, nil)
		_, err := cs.ListTools(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "beta") || !strings.Contains(err.Error(), "never") {
			t.Errorf("tools/list with a collision under never: err = %v, want an error naming alpha and beta", err)
		}
	})

	t.Run("allow deny", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/filtered", version: legacy}, nil)
		wantNames(t, "filtered tools", aggTools(ctx, t, cs), "alpha__echo", "alpha__alpha_only", "beta__echo")
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__add"}); err == nil {
			t.Error("a denied tool could be called")
		}
	})

	t.Run("isolation groups header", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/home", version: legacy}, nil)
		wantNames(t, "/mcp/home tools", aggTools(ctx, t, cs), "secret__secret_tool")
		// X-Namespace names the view on /mcp, and wins over the path.
		for _, c := range []aggConn{{path: "/mcp", namespace: "home"}, {path: "/mcp/pair", namespace: "home"}, {path: "/sse", namespace: "home"}} {
			c.version = legacy
			cs := aggConnect(ctx, t, base, c, nil)
			wantNames(t, fmt.Sprintf("%s with X-Namespace home", c.path), aggTools(ctx, t, cs), "secret__secret_tool")
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "secret__secret_tool"}); !strings.HasPrefix(got, "secret:secret_tool:") {
				t.Errorf("secret__secret_tool = %q", got)
			}
		}
		// A group: pair (conflict, but groups always prefix) and the forced isolated home.
		cs = aggConnect(ctx, t, base, aggConn{path: "/mcp/world", version: legacy}, nil)
		wantNames(t, "group world tools", aggTools(ctx, t, cs),
			"alpha__echo", "alpha__add", "alpha__alpha_only", "beta__echo", "beta__add", "beta__beta_only", "secret__secret_tool")
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "secret__secret_tool"}); !strings.HasPrefix(got, "secret:") {
			t.Errorf("group: secret__secret_tool = %q", got)
		}
		h.logs.wait(t, slog.LevelWarn, "group includes an isolated namespace (\"!\" in its namespaces)", "namespace=home")
	})

	// Issue 21: a namespace (or group) is served at /{ns}/mcp and
	// /{ns}/sse too, as at /mcp/{ns} and /sse/{ns}: inspector 0.15
	// rewrites any path not ending in /mcp.
	t.Run("view at /{ns}/mcp", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, c := range []aggConn{{path: "/pair/mcp", version: legacy}, {path: "/pair/mcp"}, {path: "/pair/sse"}} {
			cs := aggConnect(ctx, t, base, c, nil)
			wantNames(t, c.path+" tools", aggTools(ctx, t, cs),
				"alpha__echo", "beta__echo", "alpha__add", "beta__add", "alpha_only", "beta_only")
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "beta_only"}); !strings.HasPrefix(got, "beta:beta_only:") {
				t.Errorf("%s (%q) beta_only = %q", c.path, c.version, got)
			}
		}
		cs := aggConnect(ctx, t, base, aggConn{path: "/world/mcp", version: legacy}, nil) // a group
		if names := aggTools(ctx, t, cs); !slices.Contains(names, "secret__secret_tool") {
			t.Errorf("/world/mcp tools = %v, want the group's", names)
		}
		// A destination's own routes are untouched, and an unknown name
		// is 404 naming neither.
		init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if r := h.do("POST", "/alpha/mcp", init); r.status != http.StatusOK || len(r.msgs) == 0 || r.msgs[0].Result == nil {
			t.Errorf("POST /alpha/mcp initialize: %s", r)
		}
		if r := h.do("POST", "/nope/mcp", init); r.status != http.StatusNotFound {
			t.Errorf("POST /nope/mcp: %s, want 404", r)
		}
		// inspector 0.15's CLI, which reached no view before.
		cli, dir := peertest.InspectorCLI(t)
		out, errOut, err := peertest.Run(ctx, t, dir, append(slices.Clip(cli), h.url("/pair/mcp"), "--transport", "http",
			"--method", "tools/call", "--tool-name", "beta_only"))
		if err != nil || !strings.Contains(out, "beta:beta_only:") {
			t.Errorf("inspector-cli tools/call beta_only on /pair/mcp: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
	})

	t.Run("unknown names 404", func(t *testing.T) {
		t.Parallel()
		init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		for _, c := range []struct {
			method, path string
			hdr          []string
		}{
			{"POST", "/mcp/nope", nil},
			{"POST", "/mcp", []string{"X-Namespace", "nope"}},
			{"POST", "/mcp/pair", []string{"X-Namespace", "nope"}},
			{"GET", "/sse/nope", nil},
			{"GET", "/sse", []string{"X-Namespace", "nope"}},
			{"POST", "/message/nope", nil},
		} {
			var body []byte
			if c.method == "POST" {
				body = init
			}
			r := h.do(c.method, c.path, body, c.hdr...)
			if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "nope") {
				t.Errorf("%s %s %v: %s, want 404 naming the view", c.method, c.path, c.hdr, r)
			}
		}
		// The per-destination routes stay, including those of a destination
		// called "message" (whose paths /message/{x} the views share).
		for _, path := range []string{"/alpha/mcp", "/message/mcp"} {
			r := h.do("POST", path, init)
			if r.status != http.StatusOK || len(r.msgs) == 0 || r.msgs[0].Result == nil {
				t.Errorf("POST %s initialize: %s", path, r)
			}
		}
	})

	t.Run("legacy sse", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, path := range []string{"/sse/pair", "/sse"} {
			cs := aggConnect(ctx, t, base, aggConn{path: path}, nil)
			names := aggTools(ctx, t, cs)
			tool := "beta_only"
			if path == "/sse" {
				tool = "beta__beta_only"
			}
			if !slices.Contains(names, tool) {
				t.Errorf("%s tools = %v, want %s", path, names, tool)
			}
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: tool}); !strings.HasPrefix(got, "beta:beta_only:") {
				t.Errorf("%s %s = %q", path, tool, got)
			}
		}
		// The destination "message" is still served on its own legacy routes.
		cs := aggConnect(ctx, t, base, aggConn{path: "/message/sse"}, nil)
		wantNames(t, "/message/sse tools", aggTools(ctx, t, cs), "msg_tool")
	})

	t.Run("sampling and elicitation", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, path := range []string{"/mcp/conf", "/sse/conf"} {
			c := newInteropClient()
			version := legacy
			if strings.HasPrefix(path, "/sse") {
				version = ""
			}
			cs := aggConnect(ctx, t, base, aggConn{path: path, version: version}, c.Client)
			prompt := "what is 2+2 via " + path
			if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_sampling",
				Arguments: map[string]any{"prompt": prompt}}), "LLM response: sampled("+prompt+")"; got != want {
				t.Errorf("%s test_sampling = %q, want %q", path, got, want)
			}
			msg := "pick a username via " + path
			if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_elicitation",
				Arguments: map[string]any{"message": msg}}), "Elicitation result: action=accept, content=map[username:alice]"; got != want {
				t.Errorf("%s test_elicitation = %q, want %q", path, got, want)
			}
			prompts, elicits := c.recorded()
			if !slices.Contains(prompts, prompt) || !slices.Contains(elicits, msg) {
				t.Errorf("%s: the client saw sampling %q and elicitation %q", path, prompts, elicits)
			}
		}
	})

	t.Run("list changed", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		changed := make(chan struct{}, 10)
		client := mcp.NewClient(&mcp.Implementation{Name: "agg-list-changed", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/conf", version: legacy}, client)
		if slices.Contains(aggTools(ctx, t, cs), "__transient_tool_for_list_changed") {
			t.Fatal("the transient tool is there before it was added")
		}
		peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_trigger_tool_change"})
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("no notifications/tools/list_changed reached the client")
		}
		if !slices.Contains(aggTools(ctx, t, cs), "__transient_tool_for_list_changed") {
			t.Error("tools/list after list_changed lacks the new tool")
		}

		// 2026-07-28: the client opens subscriptions/listen (merged over
		// every server) and gets list_changed on it.
		modernChanged := make(chan struct{}, 10)
		modern := mcp.NewClient(&mcp.Implementation{Name: "agg-list-changed-modern", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { modernChanged <- struct{}{} },
		})
		ms := aggConnect(ctx, t, base, aggConn{path: "/mcp/conf"}, modern)
		if v := ms.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("modern client negotiated %s", v)
		}
		peertest.CallText(ctx, t, ms, &mcp.CallToolParams{Name: "test_trigger_tool_change"})
		select {
		case <-modernChanged:
		case <-ctx.Done():
			t.Fatal("no tools/list_changed on the merged subscriptions/listen stream")
		}
	})

	t.Run("unavailable server", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/flaky", version: legacy}, nil)
		wantNames(t, "flaky tools", aggTools(ctx, t, cs), "alpha__echo", "alpha__add", "alpha__alpha_only")
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "alpha__echo"}); !strings.HasPrefix(got, "alpha:echo:") {
			t.Errorf("alpha__echo = %q", got)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "broken__anything"}); err == nil {
			t.Error("a tool of the unavailable server answered")
		}
		// The answer is the server's own endpoint's (503, -32000), naming
		// the server; the go-sdk shows no body of a 503: raw HTTP reads it.
		s, r := h.initAt("/mcp/flaky")
		if s == nil {
			t.Fatalf("initialize /mcp/flaky: %s", r)
		}
		r = h.do("POST", s.path, rpc(2, "tools/call", toolParams("broken__anything", nil, nil)), "Mcp-Session-Id", s.id)
		if m := r.last(t); r.status != 503 || m.Error == nil || m.Error.Code != -32000 || !strings.Contains(m.Error.Message, "broken") ||
			!strings.Contains(m.Error.Message, "unavailable") || string(jsonrpc.Member(m.Error.Data, "server")) != `"broken"` {
			t.Errorf("a tool of the unavailable server: %s, want 503, -32000 naming broken (data.server)", r)
		}
		h.logs.wait(t, slog.LevelWarn, "server unavailable; the session goes on without it", "server=broken")
	})

	t.Run("modern client", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/pair"}, nil)
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Errorf("the go-sdk client negotiated %s, want 2026-07-28 (merged server/discover)", v)
		}
		if si := cs.InitializeResult().ServerInfo; si == nil || si.Name != "switchboard" {
			t.Errorf("server/discover serverInfo = %+v", si)
		}
		wantNames(t, "modern pair tools", aggTools(ctx, t, cs),
			"alpha__echo", "beta__echo", "alpha__add", "beta__add", "alpha_only", "beta_only")
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "beta__echo"}); !strings.HasPrefix(got, "beta:echo:") {
			t.Errorf("modern beta__echo = %q", got)
		}
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "alpha_only"}); !strings.HasPrefix(got, "alpha:alpha_only:") {
			t.Errorf("modern alpha_only = %q", got)
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "beta://readme"})
		if err != nil || len(rr.Contents) == 0 || rr.Contents[0].Text != "beta readme" {
			t.Errorf("modern resources/read = %+v, %v", rr, err)
		}
	})
}

// TestAggregateConformance runs the official conformance suites against a
// namespace holding the everything-server next to a second server, with
// tool_prefix: conflict (so the suite sees the everything-server's own
// names).
func TestAggregateConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real conformance suite; skipped with -short")
	}
	bin := peertest.EverythingServer(t)
	peertest.Conformance(t, peertest.ConformanceStable)
	peertest.Conformance(t, peertest.ConformanceNext)
	suites := []struct {
		name, version string
		extra         []string
		want          int
		exact         bool // else: >= want, and only tasks-* (extension) scenarios may fail
	}{
		{"0.1.16", peertest.ConformanceStable, nil, 40, true},
		{"0.2.0-alpha.12/2025-11-25", peertest.ConformanceNext, []string{"--requirements", "2025-11-25"}, 82, true},
		{"0.2.0-alpha.12/2026-07-28", peertest.ConformanceNext, []string{"--requirements", "2026-07-28"}, 165, false},
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			h := startAgg(t, "max_sessions: 500\nnamespaces:\n  conf:\n    servers: [everything, alpha]\n    tool_prefix: conflict\n", "",
				dest{name: "everything", command: []string{bin}}, aggDest("alpha", "alpha_echo", "alpha_add"))
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			passed, failed, out, err := peertest.RunConformance(ctx, t, s.version, h.url("/mcp/conf"), s.extra...)
			t.Logf("conformance %s against /mcp/conf: %d passed / %d failed", s.name, passed, failed)
			if err != nil {
				t.Fatalf("RunConformance: %v\n%s", err, out)
			}
			bad, _ := conformanceFailures(out)
			if s.exact && (passed != s.want || failed != 0) {
				t.Errorf("got %d passed, %d failed; want %d passed, 0 failed (failing: %v)\n%s", passed, failed, s.want, bad, out)
			}
			if !s.exact {
				if passed < s.want {
					t.Errorf("got %d passed, want >= %d", passed, s.want)
				}
				for _, name := range bad {
					if !strings.HasPrefix(name, "tasks-") {
						t.Errorf("scenario %s failed; only tasks-* (extension) scenarios may fail", name)
					}
				}
				if t.Failed() {
					t.Logf("conformance output:\n%s", out)
				}
			}
		})
	}
}

// TestAggregateStdioFront runs `switchboard serve --stdio` and drives it
// with the go-sdk client over its stdin/stdout.
func TestAggregateStdioFront(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := peertest.EverythingServer(t)
	dir := t.TempDir()
	sb := filepath.Join(dir, "switchboard")
	build := exec.Command("go", "build", "-o", sb, "github.com/switchboard-mcp/switchboard/cmd/switchboard")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tag := newTag(t)
	logFile := filepath.Join(dir, "switchboard.log")
	top := "log: {file: " + logFile + ", level: debug}\naudit: {path: " + filepath.Join(dir, "audit.log") + "}\n" +
		"namespaces:\n  both:\n    servers: [everything, alpha]\n    tool_prefix: conflict\n"
	yml := configYAML(t, tag, top, dest{name: "everything", command: []string{bin}}, aggDest("alpha", "echo", "add"))
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name      string
		args      []string
		echo      string // the tool name of alpha's echo
		simple    string // the everything-server's test_simple_text
		version   string
		stderrLog bool
	}{
		{"namespace", []string{"--namespace", "both"}, "echo", "test_simple_text", legacy, false},
		{"default view", nil, "alpha__echo", "everything__test_simple_text", legacy, false},
		{"modern", []string{"--namespace", "both"}, "echo", "test_simple_text", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.Command(sb, append([]string{"serve", "--config", cfgPath, "--stdio"}, c.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &lockedWriter{w: &stderr}
			ic := newInteropClient()
			cs, err := ic.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: c.version})
			if err != nil {
				t.Fatalf("connect to switchboard --stdio: %v\nstderr:\n%s", err, stderr.String())
			}
			if si := cs.InitializeResult().ServerInfo; si == nil || si.Name != "switchboard" {
				t.Errorf("serverInfo = %+v", si)
			}
			if c.version == "" && cs.InitializeResult().ProtocolVersion != "2026-07-28" {
				t.Errorf("protocol %s, want 2026-07-28", cs.InitializeResult().ProtocolVersion)
			}
			names := interopToolNames(ctx, t, cs)
			for _, want := range []string{c.echo, c.simple} {
				if !slices.Contains(names, want) {
					t.Errorf("tools = %v, want %s", names, want)
				}
			}
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: c.echo, Arguments: map[string]any{"a": "b"}}); got != `alpha:echo:{"a":"b"}` {
				t.Errorf("%s = %q", c.echo, got)
			}
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: c.simple}); got != "This is a simple text response for testing." {
				t.Errorf("%s = %q", c.simple, got)
			}
			// Concurrent calls on the one stdio session.
			var wg sync.WaitGroup
			var bad atomic.Int32
			for i := range 8 {
				wg.Go(func() {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.echo, Arguments: map[string]any{"i": i}})
					if err != nil || peertest.Text(res) != fmt.Sprintf(`alpha:echo:{"i":%d}`, i) {
						bad.Add(1)
					}
				})
			}
			wg.Wait()
			if bad.Load() > 0 {
				t.Errorf("%d of 8 concurrent calls failed", bad.Load())
			}
			if c.version != "" {
				prompt := "stdio sampling"
				sampling := "test_sampling"
				if !slices.Contains(names, sampling) {
					sampling = "everything__test_sampling"
				}
				if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: sampling,
					Arguments: map[string]any{"prompt": prompt}}), "LLM response: sampled("+prompt+")"; got != want {
					t.Errorf("sampling through the stdio front = %q, want %q", got, want)
				}
			}
			if err := cs.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				t.Error("switchboard --stdio did not exit after stdin closed")
			}
			if strings.Contains(stderr.String(), "level=") {
				t.Errorf("logs went to stderr although log.file is set:\n%s", stderr.String())
			}
			logs, _ := os.ReadFile(logFile)
			if !strings.Contains(string(logs), "switchboard serving on stdio") {
				t.Errorf("log file lacks the start line:\n%s", logs)
			}
		})
	}
	waitGone(t, 5*time.Second, procsWithEnv(envServerTag+"="+tag)...)
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAggregateRemoteDestinations puts a stdio server, a Streamable HTTP
// server and a legacy SSE server (go-sdk servers started here) behind one
// endpoint.
func TestAggregateRemoteDestinations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers; skipped with -short")
	}
	bin := peertest.EverythingServer(t)
	httpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return newAggServer("web", []string{"echo", "web_only"})
	}, nil))
	defer httpSrv.Close()
	sseSrv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server {
		return newAggServer("old", []string{"echo", "old_only"})
	}, nil))
	defer sseSrv.Close()
	extra := fmt.Sprintf("  web:\n    type: streamable_http\n    url: %s\n  old:\n    type: sse\n    url: %s\n", httpSrv.URL, sseSrv.URL)
	h := startAgg(t, "max_sessions: 50\nrestart: {delays: [10ms], max_attempts: 1}\nnamespaces:\n  mixed:\n    servers: [everything, web, old]\n    tool_prefix: conflict\n", extra,
		dest{name: "everything", command: []string{bin}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	probe, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: h.url("/web/mcp"), MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		t.Fatalf("connect to /web/mcp: %v", err)
	}
	_ = probe.Close()

	for _, path := range []string{"/mcp/mixed", "/sse/mixed"} {
		t.Run(strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
			version := legacy
			if strings.HasPrefix(path, "/sse") {
				version = ""
			}
			c := newInteropClient()
			cs := aggConnect(ctx, t, h.url(""), aggConn{path: path, version: version}, c.Client)
			names := aggTools(ctx, t, cs)
			for _, want := range []string{"web__echo", "old__echo", "web_only", "old_only", "test_simple_text"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools = %v, want %s", names, want)
				}
			}
			for tool, want := range map[string]string{"web__echo": "web:echo:", "old__echo": "old:echo:", "web_only": "web:web_only:", "old_only": "old:old_only:"} {
				if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: tool}); !strings.HasPrefix(got, want) {
					t.Errorf("%s = %q, want %s…", tool, got, want)
				}
			}
			prompt := "sampling next to remote servers"
			if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_sampling",
				Arguments: map[string]any{"prompt": prompt}}), "LLM response: sampled("+prompt+")"; got != want {
				t.Errorf("test_sampling = %q, want %q", got, want)
			}
		})
	}
}
