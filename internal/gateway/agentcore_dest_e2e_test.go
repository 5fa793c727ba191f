package gateway_test

// End-to-end tests of type agentcore destinations: the go-sdk client
// through the gateway to the AgentCore emulator (internal/peertest), SigV4
// signed for real (package sigv4) with the keys of peertest.NewAWSEnv and
// checked by the emulator's independent verifier.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
)

const gatewayTestARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/gw_runtime-Q1w2E3"

func startAgentCoreDest(t *testing.T, mode string) (*peertest.AgentCore, *harness) {
	t.Helper()
	env := peertest.NewAWSEnv(t)
	emu := peertest.NewAgentCore(t, peertest.AgentCoreOptions{Stateless: mode == agentcore.ModeRequest, Verify: env.Verify("bedrock-agentcore", "us-east-1")})
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
	yml := "  runtime:\n    type: agentcore\n    arn: " + gatewayTestARN + "\n    qualifier: live\n    session_mode: " + mode + "\n"
	return emu, startAgg(t, "", yml)
}

type logClient struct {
	*mcp.Client
	mu   sync.Mutex
	logs []string
}

func newLogClient() *logClient {
	c := &logClient{}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: "gw-agentcore", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "bob"}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			s, _ := req.Params.Data.(string)
			c.logs = append(c.logs, req.Params.Logger+": "+s)
			c.mu.Unlock()
		},
	})
	return c
}

func (c *logClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.logs)
}

func agentCoreCall(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return peertest.Text(res)
}

// TestAgentCoreDestination: tools, sampling and elicitation through both
// legacy fronts; one runtime session per client session; container
// restarts replayed transparently, twice, the client told each time.
func TestAgentCoreDestination(t *testing.T) {
	skipRemoteShort(t)
	emu, h := startAgentCoreDest(t, agentcore.ModeSession)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, f := range remoteFronts {
		t.Run(f.name, func(t *testing.T) {
			if f.version == "" && f.path == "mcp" {
				// 2026-07-28: sessionless, no handshake to lose.
				c := newLogClient()
				cs := f.connect(ctx, t, h, "runtime", c.Client)
				if v := cs.InitializeResult().ProtocolVersion; v < "2026" {
					t.Skipf("the go-sdk client negotiated %s", v)
				}
				if got := agentCoreCall(ctx, t, cs, "echo", map[string]any{"text": "modern"}); got != "agentcore echo: modern" {
					t.Errorf("echo = %q", got)
				}
				// (The feature server's sampling is the legacy kind, which a
				// 2026-07-28 request cannot carry; see SEP-2322.)
				if got := agentCoreCall(ctx, t, cs, "progress", map[string]any{"steps": 2}); got != "no progress token" {
					t.Errorf("progress = %q", got)
				}
				return
			}
			c := newLogClient()
			cs := f.connect(ctx, t, h, "runtime", c.Client)
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}
			if got := agentCoreCall(ctx, t, cs, "echo", map[string]any{"text": "gw"}); got != "agentcore echo: gw" {
				t.Errorf("echo = %q", got)
			}
			if got := agentCoreCall(ctx, t, cs, "sample", map[string]any{"prompt": "p"}); got != "model said: sampled" {
				t.Errorf("sample = %q", got)
			}
			if got := agentCoreCall(ctx, t, cs, "elicit", map[string]any{"message": "m"}); got != "user said: accept bob" {
				t.Errorf("elicit = %q", got)
			}
			for i := 1; i <= 2; i++ {
				emu.Restart()
				if got := agentCoreCall(ctx, t, cs, "echo", map[string]any{"text": "back"}); got != "agentcore echo: back" {
					t.Errorf("echo after restart %d = %q", i, got)
				}
			}
			for c.count() < 2 && ctx.Err() == nil {
				agentCoreCall(ctx, t, cs, "echo", map[string]any{"text": "wait"})
			}
			if n := c.count(); n != 2 {
				t.Errorf("%d replay notices, want 2", n)
			}
		})
	}
	sessions := emu.Sessions()
	if len(sessions) < 2 {
		t.Errorf("runtime sessions %q: want one per client session", sessions)
	}
	for _, s := range sessions {
		if !strings.HasPrefix(s, "session-") || len(s) != 44 {
			t.Errorf("runtime session %q: want session-<uuid>", s)
		}
	}
	for _, c := range emu.Calls() {
		if c.Status != 0 || c.ARN != gatewayTestARN || c.Qualifier != "live" {
			t.Errorf("invocation %+v", c)
		}
	}
}

// TestAgentCoreDestinationModes: identity mode gives every client session
// the caller's id; request mode a new id per request.
func TestAgentCoreDestinationModes(t *testing.T) {
	skipRemoteShort(t)
	for _, mode := range []string{agentcore.ModeIdentity, agentcore.ModeRequest} {
		t.Run(mode, func(t *testing.T) {
			emu, h := startAgentCoreDest(t, mode)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for range 2 {
				cs := remoteFronts[0].connect(ctx, t, h, "runtime", newLogClient().Client)
				if got := agentCoreCall(ctx, t, cs, "echo", map[string]any{"text": mode}); got != "agentcore echo: "+mode {
					t.Errorf("echo = %q", got)
				}
				cs.Close()
			}
			ids := emu.Sessions()
			switch mode {
			case agentcore.ModeIdentity:
				want := agentcore.IdentitySessionID(peertest.IAMUserIdentity(peertest.AWSEnvKeyID))
				if len(ids) != 1 || ids[0] != want {
					t.Errorf("runtime sessions %q, want [%s] for both clients", ids, want)
				}
			case agentcore.ModeRequest:
				if n := emu.Count(""); len(ids) != n || n < 4 {
					t.Errorf("%d runtime sessions for %d requests, want one each", len(ids), n)
				}
				for _, id := range ids {
					if !strings.HasPrefix(id, "request-") || len(id) != 44 {
						t.Errorf("runtime session %q: want request-<uuid>", id)
					}
				}
			}
		})
	}
}
