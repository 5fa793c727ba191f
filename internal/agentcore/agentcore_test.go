package agentcore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/agentcore"
	"github.com/switchboard-mcp/switchboard/internal/peers"
	"github.com/switchboard-mcp/switchboard/internal/relay"
)

const testARN = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/echo_agent-AbC123"

// stubSigner stands in for sigv4.Signer until it lands: it marks each
// request and, like the real one, retries once on ExpiredTokenException.
type stubSigner struct{ refreshed atomic.Int32 }

func (s *stubSigner) Transport(base http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body.Close()
		}
		send := func() (*http.Response, error) {
			r := req.Clone(req.Context())
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			r.ContentLength = int64(len(body))
			r.Header.Set("X-Test-Signature", "ok")
			return base.RoundTrip(r)
		}
		resp, err := send()
		if err == nil && resp.StatusCode == http.StatusForbidden && resp.Header.Get("X-Amzn-ErrorType") == "ExpiredTokenException" {
			resp.Body.Close()
			s.refreshed.Add(1)
			return send()
		}
		return resp, err
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func verify(r *http.Request, _ []byte) error {
	if r.Header.Get("X-Test-Signature") != "ok" {
		return errors.New("unsigned")
	}
	return nil
}

// client is a go-sdk client that answers sampling and elicitation and
// records progress and log messages.
type client struct {
	*mcp.Client
	mu       sync.Mutex
	logs     []string
	progress atomic.Int32
}

func newClient() *client {
	c := &client{}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: "agentcore-test", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice"}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { c.progress.Add(1) },
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, req.Params.Logger+": "+strings.TrimSpace(stringOf(req.Params.Data)))
			c.mu.Unlock()
		},
	})
	return c
}

func stringOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func (c *client) logged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.logs...)
}

// startRelay runs relay.Run over an AgentCore runtime and connects a
// go-sdk client to it.
func startRelay(t *testing.T, opts agentcore.Options) (*client, *mcp.ClientSession) {
	return startRelayVersion(t, opts, "2025-11-25")
}

// startRelayVersion is startRelay with the protocol version the client
// asks for ("" is the go-sdk's latest).
func startRelayVersion(t testing.TB, opts agentcore.Options, version string) (*client, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	rt, err := agentcore.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- relay.Run(ctx, relay.Options{Dial: rt.Dialer(nil), Name: "agentcore"}, inR, outW)
		outW.Close()
	}()
	c := newClient()
	// A 2025-11-25 session: the stateful path, where sampling and
	// elicitation are server→client requests and restarts lose handshakes.
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay.Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("relay did not end")
		}
	})
	return c, cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if name == "progress" {
		p.Meta = mcp.Meta{"progressToken": "tok"}
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return peers.Text(res)
}

var sessionShape = map[string]*regexp.Regexp{
	agentcore.ModeSession:  regexp.MustCompile(`^session-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`),
	agentcore.ModeIdentity: regexp.MustCompile(`^identity-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
	agentcore.ModeRequest:  regexp.MustCompile(`^request-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`),
}

func TestRelayAgentCoreFeatures(t *testing.T) {
	emu := peers.NewAgentCore(t, peers.AgentCoreOptions{Verify: verify})
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
	signer := &stubSigner{}
	c, cs := startRelay(t, agentcore.Options{ARN: testARN, Qualifier: "prod", Signer: signer})
	if got := call(t, cs, "echo", map[string]any{"text": "hi"}); got != "agentcore echo: hi" {
		t.Errorf("echo = %q", got)
	}
	if got := call(t, cs, "progress", map[string]any{"steps": 3}); got != "3 steps done" {
		t.Errorf("progress = %q", got)
	}
	if got := call(t, cs, "sample", map[string]any{"prompt": "p"}); got != "model said: sampled" {
		t.Errorf("sample = %q", got)
	}
	if got := call(t, cs, "elicit", map[string]any{"message": "who?"}); got != "user said: accept alice" {
		t.Errorf("elicit = %q", got)
	}
	if n := c.progress.Load(); n != 3 {
		t.Errorf("progress notifications = %d, want 3", n)
	}
	// Expired credentials: refreshed once, the call succeeds.
	emu.ExpireNext(1)
	if got := call(t, cs, "echo", map[string]any{"text": "again"}); got != "agentcore echo: again" {
		t.Errorf("echo after expiry = %q", got)
	}
	if n := signer.refreshed.Load(); n != 1 {
		t.Errorf("refreshed %d times, want 1", n)
	}
	for _, call := range emu.Calls() {
		if call.Status == http.StatusForbidden && call.Header.Get("X-Test-Signature") == "ok" {
			continue // the expired one
		}
		if call.Status != 0 {
			t.Errorf("emulator refused %+v", call)
		}
		if call.ARN != testARN || call.Qualifier != "prod" {
			t.Errorf("ARN %q qualifier %q", call.ARN, call.Qualifier)
		}
		if !strings.Contains(call.RawPath, "%3A") || !strings.Contains(call.RawPath, "%2F") {
			t.Errorf("ARN not percent-encoded: %s", call.RawPath)
		}
	}
	if s := emu.Sessions(); len(s) != 1 || !sessionShape[agentcore.ModeSession].MatchString(s[0]) {
		t.Errorf("runtime sessions = %q, want one session-<uuid>", s)
	}
}

func TestRelayAgentCoreSessionModes(t *testing.T) {
	for _, mode := range []string{agentcore.ModeSession, agentcore.ModeIdentity, agentcore.ModeRequest} {
		t.Run(mode, func(t *testing.T) {
			emu := peers.NewAgentCore(t, peers.AgentCoreOptions{Verify: verify, Stateless: mode == agentcore.ModeRequest})
			t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
			opts := agentcore.Options{ARN: testARN, SessionMode: mode, Signer: &stubSigner{},
				Identity: func(context.Context) (string, string, string, error) {
					return "123456789012", "AIDAEXAMPLE", "arn:aws:iam::123456789012:user/alice", nil
				}}
			_, cs := startRelay(t, opts)
			for i := range 2 {
				if got := call(t, cs, "echo", map[string]any{"text": "x"}); got != "agentcore echo: x" {
					t.Errorf("call %d = %q", i, got)
				}
			}
			s := emu.Sessions()
			for _, id := range s {
				if !sessionShape[mode].MatchString(id) || len(id) < 33 || len(id) > 256 {
					t.Errorf("session id %q has the wrong shape", id)
				}
			}
			switch mode {
			case agentcore.ModeRequest:
				if len(s) != emu.Count("") {
					t.Errorf("%d ids for %d requests, want one each", len(s), emu.Count(""))
				}
			case agentcore.ModeIdentity:
				want := agentcore.IdentitySessionID("123456789012", "AIDAEXAMPLE", "arn:aws:iam::123456789012:user/alice")
				if len(s) != 1 || s[0] != want {
					t.Errorf("sessions %q, want [%s]", s, want)
				}
			default:
				if len(s) != 1 {
					t.Errorf("sessions %q, want one", s)
				}
			}
		})
	}
}

// A container restart (the emulator's child replaced, so it answers -32602
// until initialized) is replayed transparently, every time, and the client
// is told; a genuine -32602 from a healthy server comes back unchanged.
func TestRelayAgentCoreContainerRestart(t *testing.T) {
	emu := peers.NewAgentCore(t, peers.AgentCoreOptions{Verify: verify})
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
	c, cs := startRelay(t, agentcore.Options{ARN: testARN, Signer: &stubSigner{}})
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "echo", map[string]any{"text": "before"})
	for i := 1; i <= 2; i++ {
		if n := emu.Restart(); n != 1 {
			t.Fatalf("restart %d replaced %d containers, want 1", i, n)
		}
		if got := call(t, cs, "echo", map[string]any{"text": "after"}); got != "agentcore echo: after" {
			t.Errorf("echo after restart %d = %q", i, got)
		}
		if got := call(t, cs, "sample", map[string]any{"prompt": "p"}); got != "model said: sampled" {
			t.Errorf("sample after restart %d = %q", i, got)
		}
		if n := emu.Count("initialize"); n != 1+i {
			t.Errorf("initialize sent %d times after restart %d, want %d", n, i, 1+i)
		}
		if n := emu.Count("logging/setLevel"); n != 1+i {
			t.Errorf("logging/setLevel sent %d times after restart %d, want %d (restored)", n, i, 1+i)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(c.logged()) < 2 && time.Now().Before(deadline) {
		call(t, cs, "echo", map[string]any{"text": "wait"}) // the notice travels ahead of later answers
	}
	logs := c.logged()
	if len(logs) != 2 || !strings.HasPrefix(logs[0], "switchboard: ") || !strings.Contains(logs[0], "replayed the handshake") {
		t.Errorf("client log messages = %q, want two replay notices", logs)
	}

	// A genuine invalid-params error: one probe, no replay, answer unchanged.
	inits, pings := emu.Count("initialize"), emu.Count("ping")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no-such-tool"})
	if err == nil || !strings.Contains(err.Error(), "no-such-tool") {
		t.Errorf("bad params: err = %v, want the server's invalid-params error", err)
	}
	if n := emu.Count("initialize"); n != inits {
		t.Errorf("a genuine -32602 caused a replay (%d initializes, want %d)", n, inits)
	}
	if n := emu.Count("ping") - pings; n != 1 {
		t.Errorf("%d probes for one genuine -32602 (unknown tool), want 1", n)
	}
}

// TestRelayAgentCoreModern: a 2026-07-28 client's sessionless requests go
// through the relay and AgentCore too.
func TestRelayAgentCoreModern(t *testing.T) {
	emu := peers.NewAgentCore(t, peers.AgentCoreOptions{Verify: verify})
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
	_, cs := startRelayVersion(t, agentcore.Options{ARN: testARN, Signer: &stubSigner{}}, "")
	if v := cs.InitializeResult().ProtocolVersion; v < "2026" {
		t.Skipf("negotiated %s", v)
	}
	if got := call(t, cs, "echo", map[string]any{"text": "m"}); got != "agentcore echo: m" {
		t.Errorf("echo = %q", got)
	}
	for _, c := range emu.Calls() {
		if c.Header.Get("Mcp-Protocol-Version") < "2026" || c.McpSession != "" || c.Status != 0 {
			t.Errorf("invocation %+v: want a sessionless 2026-07-28 request", c)
		}
	}
}
