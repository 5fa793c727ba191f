// Command example-server is a small MCP server over stdio, written with the
// official Go SDK, so Switchboard can be tried with nothing but Go: the
// bundled examples/switchboard.yaml runs it with "go run ./cmd/example-server"
// from the repository root.
//
// It offers the tools echo, add, countdown (progress notifications and log
// messages) and whoami (the client's roots), the resource example://readme,
// and the prompt greet. Stdout carries the protocol; logs go to stderr only.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type addArgs struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

type addResult struct {
	Sum float64 `json:"sum"`
}

type countdownArgs struct {
	N int `json:"n" jsonschema:"how many steps to count down, 0 to 60"`
}

// tick is the pause between countdown steps, long enough to watch progress
// stream through the gateway.
const tick = 100 * time.Millisecond

const readme = "This is Switchboard's example MCP server. Try the tools echo, add, countdown and whoami, and the prompt greet.\n"

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s := mcp.NewServer(&mcp.Implementation{Name: "switchboard-example", Version: "0.1.0"},
		&mcp.ServerOptions{Logger: log})

	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Return the text unchanged."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, addResult, error) {
			return nil, addResult{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "countdown", Description: "Count down from n, reporting progress, then return \"liftoff\"."}, countdown)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "List the roots the client exposes."}, whoami)

	s.AddResource(&mcp.Resource{URI: "example://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: req.Params.URI, MIMEType: "text/plain", Text: readme},
			}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Ask for a greeting.",
		Arguments: []*mcp.PromptArgument{{Name: "name", Description: "who to greet", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			text := fmt.Sprintf("Please greet %s warmly, in one sentence.", req.Params.Arguments["name"])
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: text}},
			}}, nil
		})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		log.Error("example-server: run", "err", err)
		os.Exit(1)
	}
}

// countdown sends one progress notification per step when the caller asked
// for progress, and one log message per step (delivered only if the client
// has set a log level).
func countdown(ctx context.Context, req *mcp.CallToolRequest, in countdownArgs) (*mcp.CallToolResult, any, error) {
	if in.N < 0 || in.N > 60 {
		return nil, nil, fmt.Errorf("countdown: n must be 0 to 60, got %d", in.N)
	}
	token := req.Params.GetProgressToken()
	for i := in.N; i > 0; i-- {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(tick):
		}
		if token != nil {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: float64(in.N - i + 1), Total: float64(in.N), Message: fmt.Sprint(i),
			})
			if err != nil {
				return nil, nil, fmt.Errorf("countdown: notify progress: %w", err)
			}
		}
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "countdown", Data: fmt.Sprintf("T-%d", i)})
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "liftoff"}}}, nil, nil
}

// whoami asks the client for its roots. It returns an input request; for a
// 2026-07-28 client that is sent back in the result, and for an older client
// the SDK turns it into a server-to-client roots/list call and calls whoami
// again with the answer.
func whoami(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	if roots, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult); ok && roots != nil {
		uris := make([]string, 0, len(roots.Roots))
		for _, r := range roots.Roots {
			uris = append(uris, r.URI)
		}
		text := "The client lists no roots."
		if len(uris) > 0 {
			text = "The client's roots: " + strings.Join(uris, ", ")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	}
	if caps := req.ClientCapabilities(); caps == nil || caps.RootsV2 == nil {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: "The client does not support roots (it declared no roots capability), so there is nothing to list.",
		}}}, nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
}
