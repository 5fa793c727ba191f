package main

// In-process tests of `switchboard relay --agentcore-arn`: the seed's
// environment, flags over environment, usage errors. SigV4 is stubbed (see
// agentcore.NewSigner); internal/agentcore tests the protocol in depth.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/agentcore"
	"github.com/switchboard-mcp/switchboard/internal/peers"
)

const relayTestARN = "arn:aws:bedrock-agentcore:eu-central-1:123456789012:runtime/relay_test-XyZ"

type markSigner struct{}

func (markSigner) Transport(base http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Test-Signature", "ok")
		return base.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// stubAgentCoreSigner installs a signer that marks requests, recording what
// the relay asked for.
func stubAgentCoreSigner(t *testing.T, got *[]string) {
	t.Helper()
	prev := agentcore.NewSigner
	agentcore.NewSigner = func(_ context.Context, region, role, session string, _ *slog.Logger) (agentcore.Signer, agentcore.IdentityFunc, error) {
		*got = []string{region, role, session}
		return markSigner{}, func(context.Context) (string, string, string, error) {
			return "123456789012", "AROAEXAMPLE:s", "arn:aws:sts::123456789012:assumed-role/r/s", nil
		}, nil
	}
	t.Cleanup(func() { agentcore.NewSigner = prev })
}

func TestRelayAgentCoreEnv(t *testing.T) {
	emu := peers.NewAgentCore(t, peers.AgentCoreOptions{Verify: func(r *http.Request, _ []byte) error {
		if r.Header.Get("X-Test-Signature") != "ok" {
			return errors.New("unsigned")
		}
		return nil
	}})
	var signerArgs []string
	stubAgentCoreSigner(t, &signerArgs)
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", "")
	t.Setenv("AWS_ENDPOINT_URL", emu.URL)
	t.Setenv("AGENTCORE_AGENT_ARN", "")
	t.Setenv("AGENT_ARN", relayTestARN)
	t.Setenv("RUNTIME_SESSION_MODE", "identity")
	t.Setenv("AGENTCORE_ASSUME_ROLE_ARN", "arn:aws:iam::123456789012:role/r")
	t.Setenv("AGENTCORE_ASSUME_ROLE_SESSION_NAME", "")
	t.Setenv("MCP_PROXY_DEBUG", "1")

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr lockedBuf
	done := make(chan int, 1)
	go func() {
		done <- runRelay([]string{"--qualifier", "canary"}, inR, outW, &stderr)
		outW.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "env"}})
	if err != nil || peers.Text(res) != "agentcore echo: env" {
		t.Fatalf("echo: %v %v", res, err)
	}
	cs.Close()
	inW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("relay exit %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("relay did not end")
	}
	if want := []string{"eu-central-1", "arn:aws:iam::123456789012:role/r", "mcpAgentCoreProxy"}; strings.Join(signerArgs, " ") != strings.Join(want, " ") {
		t.Errorf("signer built with %q, want %q", signerArgs, want)
	}
	wantID := agentcore.IdentitySessionID("123456789012", "AROAEXAMPLE:s", "arn:aws:sts::123456789012:assumed-role/r/s")
	for _, c := range emu.Calls() {
		if c.ARN != relayTestARN || c.Qualifier != "canary" || c.Session != wantID || c.Status != 0 {
			t.Errorf("invocation %+v; want ARN %s, qualifier canary, session %s", c, relayTestARN, wantID)
		}
	}
	if !strings.Contains(stderr.String(), "level=DEBUG") {
		t.Errorf("MCP_PROXY_DEBUG=1 did not turn on debug logging: %q", stderr.String())
	}
}

func TestRelayAgentCoreUsageErrors(t *testing.T) {
	var signerArgs []string
	stubAgentCoreSigner(t, &signerArgs)
	t.Setenv("AGENTCORE_AGENT_ARN", "")
	t.Setenv("AGENT_ARN", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"both", []string{"--url", "http://127.0.0.1:9/mcp", "--agentcore-arn", relayTestARN}, "not both"},
		{"bad arn", []string{"--agentcore-arn", "arn:aws:lambda:us-east-1:123456789012:function/f"}, "not a runtime ARN"},
		{"bad mode", []string{"--agentcore-arn", relayTestARN, "--session-mode", "forever"}, "session, identity or request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runRelay(tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}

// lockedBuf is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
