package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// buildServer compiles this command into a temporary directory, so the test
// drives the real binary over real pipes.
func buildServer(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	bin := filepath.Join(t.TempDir(), "example-server")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// recorder collects notifications the client receives.
type recorder struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func (r *recorder) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.progress = append(r.progress, req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.logs = append(r.logs, req.Params)
		},
	}
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %+v", res.Content)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

func TestExampleServer(t *testing.T) {
	bin := buildServer(t)
	// Both protocol eras: the default negotiates 2026-07-28 (server/discover),
	// and 2025-11-25 uses initialize and server-to-client requests.
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol="+version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var rec recorder
			client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "0"}, rec.options())
			client.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin)},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			t.Logf("negotiated %s", cs.InitializeResult().ProtocolVersion)

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if want := []string{"add", "countdown", "echo", "whoami"}; !slices.Equal(names, want) {
				t.Errorf("tools = %v; want %v", names, want)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello, switchboard"}})
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if got := text(t, res); got != "hello, switchboard" {
				t.Errorf("echo = %q", got)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 40.5}})
			if err != nil {
				t.Fatalf("add: %v", err)
			}
			if sc, _ := res.StructuredContent.(map[string]any); sc["sum"] != 42.5 {
				t.Errorf("add structured content = %v; want sum 42.5", res.StructuredContent)
			}

			if version != "" {
				// Log messages need a level; 2026-07-28 sets it per request.
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatalf("logging/setLevel: %v", err)
				}
			}
			params := &mcp.CallToolParams{Name: "countdown", Arguments: map[string]any{"n": 3}}
			params.SetProgressToken("countdown-1")
			res, err = cs.CallTool(ctx, params)
			if err != nil {
				t.Fatalf("countdown: %v", err)
			}
			if got := text(t, res); got != "liftoff" {
				t.Errorf("countdown = %q", got)
			}
			// Notifications and the response share one ordered pipe, but
			// handlers may run after CallTool returns; wait briefly.
			deadline := time.Now().Add(5 * time.Second)
			for {
				rec.mu.Lock()
				np, nl := len(rec.progress), len(rec.logs)
				rec.mu.Unlock()
				if np >= 3 && (version == "" || nl >= 3) || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			rec.mu.Lock()
			if len(rec.progress) != 3 {
				t.Errorf("got %d progress notifications; want 3", len(rec.progress))
			}
			for i, p := range rec.progress {
				if p.ProgressToken != "countdown-1" || p.Progress != float64(i+1) || p.Total != 3 {
					t.Errorf("progress[%d] = %+v", i, p)
				}
			}
			if version != "" && len(rec.logs) != 3 {
				t.Errorf("got %d log messages; want 3", len(rec.logs))
			}
			t.Logf("%d progress notifications, %d log messages", len(rec.progress), len(rec.logs))
			rec.mu.Unlock()

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
			if err != nil {
				t.Fatalf("whoami: %v", err)
			}
			if got := text(t, res); !strings.Contains(got, "file:///work/project") {
				t.Errorf("whoami = %q; want the client's root", got)
			}

			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "example://readme"})
			if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "example MCP server") {
				t.Errorf("resources/read = %+v, %v", rr, err)
			}
			pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
			if err != nil || len(pr.Messages) != 1 || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "Ada") {
				t.Errorf("prompts/get = %+v, %v", pr, err)
			}
		})
	}
}

func TestExampleServerWhoamiWithoutRoots(t *testing.T) {
	bin := buildServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "no-roots", Version: "0"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	if got := text(t, res); !strings.Contains(got, "does not support roots") {
		t.Errorf("whoami = %q", got)
	}
}
