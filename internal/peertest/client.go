package peertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RecordingClient is test support: a go-sdk client whose handlers answer
// sampling (model "e2e-model", the text "sampled(<prompt>)") and elicitation
// (accept, with username "alice"), record the prompts and messages they were
// asked, and pass every progress and tools/list_changed notification to a
// channel (dropping it when the channel is full).
type RecordingClient struct {
	*mcp.Client
	progress    chan *mcp.ProgressNotificationParams
	listChanged chan struct{}
	mu          sync.Mutex
	prompts     []string // sampling requests' text
	elicits     []string // elicitation requests' messages
}

// NewRecordingClient returns a RecordingClient that introduces itself as
// name, version 1.0.0.
func NewRecordingClient(name string) *RecordingClient {
	c := &RecordingClient{progress: make(chan *mcp.ProgressNotificationParams, 100), listChanged: make(chan struct{}, 10)}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.listChanged <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case c.progress <- req.Params:
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
			return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e-model", Content: &mcp.TextContent{Text: "sampled(" + text + ")"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			c.elicits = append(c.elicits, req.Params.Message)
			c.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice"}}, nil
		},
	})
	return c
}

// ListChanged receives a value for each notifications/tools/list_changed
// the client was sent.
func (c *RecordingClient) ListChanged() <-chan struct{} { return c.listChanged }

// Recorded returns copies of the sampling prompts and elicitation messages
// the client's handlers have seen so far.
func (c *RecordingClient) Recorded() (prompts, elicits []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.prompts), slices.Clone(c.elicits)
}

// WaitProgress returns the progress values of the next n notifications
// carrying token, failing t if they do not all arrive within d.
func (c *RecordingClient) WaitProgress(t testing.TB, token string, n int, d time.Duration) []float64 {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var got []float64
	for len(got) < n {
		select {
		case p := <-c.progress:
			if fmt.Sprint(p.ProgressToken) == token {
				got = append(got, p.Progress)
			}
		case <-timer.C:
			t.Fatalf("progress for %s: got %v within %s, want %d notifications", token, got, d, n)
		}
	}
	return got
}

// CallText calls a tool through cs and returns the text of its result,
// failing t if the call fails or the result is a tool error.
func CallText(ctx context.Context, t testing.TB, cs *mcp.ClientSession, p *mcp.CallToolParams) string {
	t.Helper()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("tools/call %s: %v", p.Name, err)
	}
	if res.IsError {
		t.Fatalf("tools/call %s: tool error: %s", p.Name, Text(res))
	}
	return Text(res)
}

// Text is the text content of a tool result, its parts joined by newlines.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
