package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// Interop: real MCP clients (the TypeScript inspector-cli, the go-sdk client) through Switchboard
// to real MCP servers over stdio (the TypeScript reference server-everything, the go-sdk
// conformance everything-server), over Streamable HTTP (/{d}/mcp) and legacy HTTP+SSE (/{d}/sse).

func skipInteropShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real MCP peers; skipped with -short")
	}
}

// TestInteropInspectorCLI drives @modelcontextprotocol/inspector-cli against the TypeScript
// server-everything behind Switchboard, over Streamable HTTP and over legacy SSE.
func TestInteropInspectorCLI(t *testing.T) {
	skipInteropShort(t)
	cli, dir := peertest.InspectorCLI(t)
	h := start(t, "max_sessions: 50\n", dest{name: "ts", command: peertest.ServerEverythingTS(t)})

	for _, tr := range []struct{ name, path, transport string }{
		{"streamable", "/ts/mcp", "http"},
		{"sse", "/ts/sse", "sse"},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			base := append(append([]string{}, cli...), h.url(tr.path), "--transport", tr.transport)

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
			if !slices.Contains(names, "echo") {
				t.Fatalf("tools/list = %v, want echo among them", names)
			}

			out, errOut, err = peertest.Run(ctx, t, dir, append(slices.Clip(base),
				"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"))
			if err != nil {
				t.Fatalf("inspector-cli tools/call echo: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("tools/call output is not a CallToolResult: %v\n%s", err, out)
			}
			if got := peertest.Text(&res); got != "Echo: hi" || res.IsError {
				t.Fatalf("tools/call echo = %q (isError %v), want \"Echo: hi\"\n%s", got, res.IsError, out)
			}
		})
	}
}

// interopRoute is one way for the go-sdk client to reach a destination through Switchboard.
type interopRoute struct {
	name    string
	path    string // "mcp" or "sse"
	version string // ClientSessionOptions.ProtocolVersion; "" = the SDK's latest (2026-07-28 first)
}

func (r interopRoute) transport(base, dest string) mcp.Transport {
	url := base + "/" + dest + "/" + r.path
	if r.path == "sse" {
		return &mcp.SSEClientTransport{Endpoint: url}
	}
	return &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
}

var interopRoutes = []interopRoute{
	{name: "streamable", path: "mcp"},                                   // the SDK's default: 2026-07-28 when offered
	{name: "streamable-2025-11-25", path: "mcp", version: "2025-11-25"}, // a session-era client
	{name: "sse", path: "sse"},
}

// interopClient is a go-sdk client whose handlers record what Switchboard delivered to it.
type interopClient struct {
	*mcp.Client
	progressed chan struct{} // signalled (buffer 1) after each progress notification
	mu         sync.Mutex
	progress   []*mcp.ProgressNotificationParams
	prompts    []string // sampling requests' text
	elicits    []string // elicitation requests' messages
}

func newInteropClient() *interopClient {
	c := &interopClient{progressed: make(chan struct{}, 1)}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: "switchboard-interop", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params)
			c.mu.Unlock()
			select {
			case c.progressed <- struct{}{}:
			default:
			}
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var text string
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			c.mu.Lock()
			c.prompts = append(c.prompts, text)
			c.mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "interop-model",
				Content: &mcp.TextContent{Text: "sampled(" + text + ")"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			c.elicits = append(c.elicits, req.Params.Message)
			c.mu.Unlock()
			// Answer "alice" to every property the requested schema asks for.
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if b, err := json.Marshal(req.Params.RequestedSchema); err == nil {
				_ = json.Unmarshal(b, &schema)
			}
			content := map[string]any{}
			for name := range schema.Properties {
				content[name] = "alice"
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
	})
	return c
}

// progressFor waits until want progress notifications carrying token have arrived (the
// go-sdk client may handle them just after the result), or 10 s, and returns them.
func (c *interopClient) progressFor(token any, want int) []*mcp.ProgressNotificationParams {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		var got []*mcp.ProgressNotificationParams
		c.mu.Lock()
		for _, p := range c.progress {
			if fmt.Sprint(p.ProgressToken) == fmt.Sprint(token) {
				got = append(got, p)
			}
		}
		c.mu.Unlock()
		if len(got) >= want {
			return got
		}
		select {
		case <-c.progressed:
		case <-deadline.C:
			return got
		}
	}
}

func (c *interopClient) recorded() (prompts, elicits []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.prompts), slices.Clone(c.elicits)
}

// connect opens a session through Switchboard and closes it at cleanup.
func (c *interopClient) connect(ctx context.Context, t *testing.T, h *harness, dest string, r interopRoute) *mcp.ClientSession {
	t.Helper()
	cs, err := c.Connect(ctx, r.transport(h.url(""), dest), &mcp.ClientSessionOptions{ProtocolVersion: r.version})
	if err != nil {
		t.Fatalf("go-sdk client: connect to %s/%s/%s: %v", h.url(""), dest, r.path, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	t.Logf("connected over /%s/%s, protocol %s", dest, r.path, cs.InitializeResult().ProtocolVersion)
	if r.version != "" && cs.InitializeResult().ProtocolVersion != r.version {
		t.Errorf("negotiated protocol %s, want %s", cs.InitializeResult().ProtocolVersion, r.version)
	}
	return cs
}

func interopToolNames(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// TestInteropGoSDKClientTS drives the go-sdk client against the TypeScript server-everything
// behind Switchboard: list tools, call echo, and a progress-emitting long-running tool.
func TestInteropGoSDKClientTS(t *testing.T) {
	skipInteropShort(t)
	h := start(t, "max_sessions: 50\n", dest{name: "ts", command: peertest.ServerEverythingTS(t)})
	for _, r := range interopRoutes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := newInteropClient()
			cs := c.connect(ctx, t, h, "ts", r)

			names := interopToolNames(ctx, t, cs)
			for _, want := range []string{"echo", "trigger-long-running-operation"} {
				if !slices.Contains(names, want) {
					t.Fatalf("tools/list = %v, want %s among them", names, want)
				}
			}
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "echo",
				Arguments: map[string]any{"message": "hi from go-sdk"}}); got != "Echo: hi from go-sdk" {
				t.Errorf("echo = %q, want %q", got, "Echo: hi from go-sdk")
			}

			token := "ts-progress-" + r.name
			params := &mcp.CallToolParams{Name: "trigger-long-running-operation",
				Arguments: map[string]any{"duration": 0.3, "steps": 3}}
			params.SetProgressToken(token)
			if got := peertest.CallText(ctx, t, cs, params); !strings.Contains(got, "Long running operation completed") {
				t.Errorf("trigger-long-running-operation = %q", got)
			}
			interopCheckProgress(t, c.progressFor(token, 3), []float64{1, 2, 3}, 3)
		})
	}
}

func interopCheckProgress(t *testing.T, got []*mcp.ProgressNotificationParams, want []float64, total float64) {
	t.Helper()
	var steps []float64
	for _, p := range got {
		steps = append(steps, p.Progress)
		if p.Total != total {
			t.Errorf("progress notification %+v: total %v, want %v", p, p.Total, total)
		}
	}
	if !slices.Equal(steps, want) {
		t.Errorf("progress notifications: progress %v, want %v", steps, want)
	}
}

// TestInteropGoSDKClientEverything drives the go-sdk client against the go-sdk conformance
// everything-server behind Switchboard, with isolation shared and session: tools, progress,
// and the server→client requests (sampling, elicitation) answered by the client's handlers —
// as legacy server→client requests for a session-era client, as input_required results (multi
// round-trip requests) for a 2026-07-28 client.
//
// With isolation shared, one process serves every session and a server→client request carries
// nothing that names the session it belongs to: Switchboard can route it only while a single
// session has calls in flight, so there the routes run one after another. With isolation
// session they run concurrently, each session on its own process.
func TestInteropGoSDKClientEverything(t *testing.T) {
	skipInteropShort(t)
	bin := peertest.EverythingServer(t)
	for _, isolation := range []string{"shared", "session"} {
		t.Run("isolation="+isolation, func(t *testing.T) {
			t.Parallel()
			h := start(t, "max_sessions: 50\n", dest{name: "everything", command: []string{bin}, isolation: isolation})
			for _, r := range interopRoutes {
				t.Run(r.name, func(t *testing.T) {
					if isolation == "session" {
						t.Parallel()
					}
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					c := newInteropClient()
					cs := c.connect(ctx, t, h, "everything", r)
					modern := cs.InitializeResult().ProtocolVersion >= "2026-07-28"
					if r.version == "" && r.path == "mcp" && !modern {
						t.Errorf("the go-sdk client's default connection over /mcp negotiated %s, want 2026-07-28 (Switchboard serves both eras)",
							cs.InitializeResult().ProtocolVersion)
					}

					names := interopToolNames(ctx, t, cs)
					for _, want := range []string{"test_simple_text", "test_tool_with_progress", "test_sampling", "test_elicitation",
						"test_input_required_result_sampling", "test_input_required_result_elicitation"} {
						if !slices.Contains(names, want) {
							t.Fatalf("tools/list = %v, want %s among them", names, want)
						}
					}
					if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_simple_text"}); got != "This is a simple text response for testing." {
						t.Errorf("test_simple_text = %q", got)
					}

					// The tool returns the token it received. Switchboard gives the upstream its own
					// token (so tokens of different sessions never collide on a shared process) and
					// maps the notifications back to the client's.
					token := "everything-progress-" + isolation + "-" + r.name
					params := &mcp.CallToolParams{Name: "test_tool_with_progress"}
					params.SetProgressToken(token)
					if got := peertest.CallText(ctx, t, cs, params); got == "" || got == "<nil>" {
						t.Errorf("test_tool_with_progress = %q: the upstream received no progress token", got)
					}
					interopCheckProgress(t, c.progressFor(token, 3), []float64{0, 50, 100}, 100)

					if modern {
						// 2026-07-28: the tool answers input_required; the client's multi round-trip
						// middleware runs the handlers and retries with the responses.
						if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_input_required_result_sampling"}),
							"Sampling response: sampled(What is the capital of France?)"; got != want {
							t.Errorf("test_input_required_result_sampling = %q, want %q", got, want)
						}
						if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"}),
							"Hello, alice!"; got != want {
							t.Errorf("test_input_required_result_elicitation = %q, want %q", got, want)
						}
						prompts, elicits := c.recorded()
						if !slices.Contains(prompts, "What is the capital of France?") || !slices.Contains(elicits, "What is your name?") {
							t.Errorf("the client's handlers saw sampling %q and elicitation %q", prompts, elicits)
						}
						return
					}
					prompt := "what is 2+2 (" + r.name + ")"
					if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_sampling",
						Arguments: map[string]any{"prompt": prompt}}), "LLM response: sampled("+prompt+")"; got != want {
						t.Errorf("test_sampling = %q, want %q", got, want)
					}
					msg := "pick a username (" + r.name + ")"
					if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "test_elicitation",
						Arguments: map[string]any{"message": msg}}), "Elicitation result: action=accept, content=map[username:alice]"; got != want {
						t.Errorf("test_elicitation = %q, want %q", got, want)
					}
					prompts, elicits := c.recorded()
					if !slices.Contains(prompts, prompt) {
						t.Errorf("sampling requests seen by the client = %q, want %q among them", prompts, prompt)
					}
					if !slices.Contains(elicits, msg) {
						t.Errorf("elicitation requests seen by the client = %q, want %q among them", elicits, msg)
					}
				})
			}
		})
	}
}
