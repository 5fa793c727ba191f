package peertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FeatureServer is test support: a go-sdk server (named "feature-<name>",
// version 1.0.0) with a tool for each feature that crosses Switchboard:
//
//   - echo {text}: "<name> echo: <text>";
//   - progress {steps}: one progress notification per step ("step <i>"),
//     then "<steps> steps done" (or "no progress token");
//   - sample {prompt}: asks the client's model, "model said: <text>";
//   - elicit {message}: asks the user for a username,
//     "user said: <action> <username>";
//   - reconnect: closes its response stream (SEP-1699, retry after 10ms),
//     sends one progress notification if the call carries a progress token,
//     and answers "answered after the stream closed" (or "no stream to
//     close");
//   - big {bytes}: a text of that many "b"s;
//   - slow {ms, tag}: waits ms milliseconds (a minute if ms is absent or 0)
//     and answers "slept", or fails when cancelled first. A call with a tag
//     sends it to Started as it starts and to Cancelled when cancelled;
//
// plus the resource remote://<name>/readme ("the readme of <name>") and the
// prompt greet {who} ("hello <who> from <name>").
type FeatureServer struct {
	*mcp.Server
	Started   chan string // the tag of each tagged slow call, as it starts
	Cancelled chan string // the tag of each tagged slow call cancelled early
}

// NewFeatureServer returns a FeatureServer whose texts carry name.
func NewFeatureServer(name string) *FeatureServer {
	f := &FeatureServer{Server: mcp.NewServer(&mcp.Implementation{Name: "feature-" + name, Version: "1.0.0"}, nil),
		Started: make(chan string, 16), Cancelled: make(chan string, 16)}
	s := f.Server
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(name + " echo: " + in.Text), nil, nil
		})
	type progressIn struct {
		Steps int `json:"steps"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "reports progress"},
		func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			if tok == nil {
				return text("no progress token"), nil, nil
			}
			for i := 1; i <= in.Steps; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, nil, err
				}
			}
			return text(fmt.Sprintf("%d steps done", in.Steps)), nil, nil
		})
	type promptIn struct {
		Prompt string `json:"prompt"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "asks the client's model"},
		func(ctx context.Context, req *mcp.CallToolRequest, in promptIn) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 50,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}}})
			if err != nil {
				return nil, nil, fmt.Errorf("sampling failed: %w", err)
			}
			tc, _ := res.Content.(*mcp.TextContent)
			if tc == nil {
				return nil, nil, fmt.Errorf("sampling result has no text: %+v", res)
			}
			return text("model said: " + tc.Text), nil, nil
		})
	type elicitIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "asks the user"},
		func(ctx context.Context, req *mcp.CallToolRequest, in elicitIn) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Message, RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"username": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, nil, fmt.Errorf("elicitation failed: %w", err)
			}
			return text(fmt.Sprintf("user said: %s %v", res.Action, res.Content["username"])), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "reconnect", Description: "closes its response stream before answering (SEP-1699)"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if req.Extra == nil || req.Extra.CloseSSEStream == nil {
				return text("no stream to close"), nil, nil
			}
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
			if tok := req.Params.GetProgressToken(); tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 1}); err != nil {
					return nil, nil, err
				}
			}
			return text("answered after the stream closed"), nil, nil
		})
	type bigIn struct {
		Bytes int `json:"bytes"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "returns a large text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("b", in.Bytes)), nil, nil
		})
	type slowIn struct {
		MS  int    `json:"ms,omitempty"`
		Tag string `json:"tag,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "waits ms milliseconds (at most a minute if absent), or until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			if in.Tag != "" {
				f.Started <- in.Tag
			}
			d := time.Minute
			if in.MS > 0 {
				d = time.Duration(in.MS) * time.Millisecond
			}
			select {
			case <-time.After(d):
				return text("slept"), nil, nil
			case <-ctx.Done():
				if in.Tag != "" {
					f.Cancelled <- in.Tag
				}
				return nil, nil, ctx.Err()
			}
		})
	s.AddResource(&mcp.Resource{URI: "remote://" + name + "/readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: req.Params.URI, MIMEType: "text/plain", Text: "the readme of " + name}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "a greeting", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"] + " from " + name}}}}, nil
		})
	return f
}

// RequestLog is test support: it counts the HTTP requests a test server
// receives (through Wrap), by method, as they start and as they end, and
// keeps their headers. The zero value is ready to use.
type RequestLog struct {
	mu      sync.Mutex
	started map[string]int // by method
	ended   map[string]int // by method
	headers []http.Header
	deleted []string      // Mcp-Session-Id of each DELETE
	signal  chan struct{} // closed and replaced whenever a request starts or ends
}

// Wrap returns next, logging each request it serves.
func (l *RequestLog) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		if l.started == nil {
			l.started = map[string]int{}
		}
		l.started[r.Method]++
		l.headers = append(l.headers, r.Header.Clone())
		if r.Method == http.MethodDelete {
			l.deleted = append(l.deleted, r.Header.Get("Mcp-Session-Id"))
		}
		l.notifyLocked()
		l.mu.Unlock()
		next.ServeHTTP(w, r)
		l.mu.Lock()
		if l.ended == nil {
			l.ended = map[string]int{}
		}
		l.ended[r.Method]++
		l.notifyLocked()
		l.mu.Unlock()
	})
}

func (l *RequestLog) notifyLocked() {
	if l.signal != nil {
		close(l.signal)
	}
	l.signal = make(chan struct{})
}

// Count is the number of requests with method that have started.
func (l *RequestLog) Count(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started[method]
}

// Total is the number of requests that have started, of any method.
func (l *RequestLog) Total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.started {
		n += c
	}
	return n
}

// AllHeaders returns a copy of the headers of every request so far, in the
// order they started.
func (l *RequestLog) AllHeaders() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.headers)
}

// Deleted returns the Mcp-Session-Id of each DELETE request so far.
func (l *RequestLog) Deleted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.deleted)
}

// WaitStarted waits (at most d, then fails t) until n requests with method
// have reached the server.
func (l *RequestLog) WaitStarted(t testing.TB, method string, n int, d time.Duration) {
	t.Helper()
	l.wait(t, false, method, n, d)
}

// WaitEnded waits (at most d, then fails t) until n requests with method
// have been answered (for a stream: until it closed).
func (l *RequestLog) WaitEnded(t testing.TB, method string, n int, d time.Duration) {
	t.Helper()
	l.wait(t, true, method, n, d)
}

// wait waits until n requests with method have started (or, if ended, have
// been answered).
func (l *RequestLog) wait(t testing.TB, ended bool, method string, n int, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		l.mu.Lock()
		got := l.started[method]
		if ended {
			got = l.ended[method]
		}
		if l.signal == nil {
			l.signal = make(chan struct{})
		}
		sig := l.signal
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-sig:
		case <-timer.C:
			if ended {
				t.Fatalf("%d %s requests ended within %s, want %d", got, method, d, n)
			}
			t.Fatalf("%d %s requests within %s, want %d", got, method, d, n)
		}
	}
}
