package main

// In-process tests of `switchboard relay --agentcore-arn` and of SigV4 on
// `switchboard relay --url`: requests signed for real (package sigv4) with
// the keys of an isolated AWS environment (peertest.NewAWSEnv: static keys, an
// STS emulator), every signature checked by the emulator's independent
// verifier; the seed's environment, flags over environment, usage errors.
// internal/upstream/agentcore tests the AgentCore protocol in more depth.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
)

const relayTestARN = "arn:aws:bedrock-agentcore:eu-central-1:123456789012:runtime/relay_test-XyZ"

// relayRun is `switchboard relay ARGS` run in-process with a go-sdk client
// (2025-11-25: the stateful path) on its stdio.
type relayRun struct {
	cs       *mcp.ClientSession
	stderr   *peertest.Buffer
	progress atomic.Int32
	mu       sync.Mutex
	logs     []string
}

func startRunRelay(t *testing.T, args ...string) *relayRun {
	t.Helper()
	r := &relayRun{stderr: &peertest.Buffer{}}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- runRelay(args, inR, outW, r.stderr)
		outW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "relay-test", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "carol"}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { r.progress.Add(1) },
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			s, _ := req.Params.Data.(string)
			r.mu.Lock()
			r.logs = append(r.logs, s)
			r.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		inW.Close()
		t.Fatalf("connect: %v; relay stderr: %s", err, r.stderr.String())
	}
	r.cs = cs
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("relay exit %d: %s", code, r.stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("relay did not end")
		}
	})
	return r
}

func (r *relayRun) call(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if name == "progress" {
		p.Meta = mcp.Meta{"progressToken": "p"}
	}
	res, err := r.cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return peertest.Text(res)
}

// features calls echo and progress, and (unless stateless: a request-mode
// runtime serves each request statelessly, so the server cannot ask the
// client anything) sample and elicit.
func (r *relayRun) features(t *testing.T, stateless bool) {
	t.Helper()
	for i, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"echo", map[string]any{"text": "hi"}, "agentcore echo: hi"},
		{"progress", map[string]any{"steps": 2}, "2 steps done"},
		{"sample", map[string]any{"prompt": "p"}, "model said: sampled"},
		{"elicit", map[string]any{"message": "who?"}, "user said: accept carol"},
	} {
		if stateless && i >= 2 {
			break
		}
		if got := r.call(t, c.tool, c.args); got != c.want {
			t.Errorf("%s = %q, want %q", c.tool, got, c.want)
		}
	}
}

// agentCoreEnv isolates AWS, clears the seed's variables and starts a
// verifying emulator reached through AWS_ENDPOINT_URL_BEDROCK_AGENTCORE.
func agentCoreEnv(t *testing.T, stateless bool) (*peertest.AgentCore, *peertest.AWSEnv) {
	t.Helper()
	env := peertest.NewAWSEnv(t)
	emu := peertest.NewAgentCore(t, peertest.AgentCoreOptions{Stateless: stateless, Verify: env.Verify(agentcore.Service, "eu-central-1")})
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_BEDROCK_AGENTCORE": emu.URL, "AGENTCORE_AGENT_ARN": "", "AGENT_ARN": "",
		"RUNTIME_SESSION_MODE": "", "AGENTCORE_ASSUME_ROLE_ARN": "", "AGENTCORE_ASSUME_ROLE_SESSION_NAME": "", "MCP_PROXY_DEBUG": ""} {
		t.Setenv(k, v)
	}
	return emu, env
}

// signedBy returns the access key ids that signed the emulator's
// invocations, and fails the test on any refused for another reason than
// expiry.
func signedBy(t *testing.T, emu *peertest.AgentCore) map[string]int {
	t.Helper()
	keys := map[string]int{}
	for _, c := range emu.Calls() {
		if c.Status != 0 && c.Status != http.StatusForbidden {
			t.Errorf("emulator refused %+v", c)
		}
		key, _, _ := strings.Cut(strings.TrimPrefix(c.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="), "/")
		keys[key]++
	}
	return keys
}

// TestRelayAgentCoreSigned: the go-sdk client through `switchboard relay
// --agentcore-arn` in each session mode: tools, progress, sampling and
// elicitation round trips, every request signed with the environment's
// key; identity mode asks the STS emulator who the caller is, once.
func TestRelayAgentCoreSigned(t *testing.T) {
	for _, mode := range []string{agentcore.ModeSession, agentcore.ModeIdentity, agentcore.ModeRequest} {
		t.Run(mode, func(t *testing.T) {
			emu, env := agentCoreEnv(t, mode == agentcore.ModeRequest)
			r := startRunRelay(t, "--agentcore-arn", relayTestARN, "--session-mode", mode)
			r.features(t, mode == agentcore.ModeRequest)
			// The go-sdk client handles notifications apart from the
			// answers: give the last one a few round trips to land.
			for deadline := time.Now().Add(10 * time.Second); r.progress.Load() < 2 && time.Now().Before(deadline); {
				r.call(t, "echo", map[string]any{"text": "wait"})
			}
			if n := r.progress.Load(); n != 2 {
				t.Errorf("%d progress notifications, want 2", n)
			}
			if keys := signedBy(t, emu); len(keys) != 1 || keys[env.KeyID] == 0 {
				t.Errorf("signed by %v, want %s alone", keys, env.KeyID)
			}
			ids := emu.Sessions()
			wantIdentity := 0
			switch mode {
			case agentcore.ModeSession:
				if len(ids) != 1 || !strings.HasPrefix(ids[0], "session-") {
					t.Errorf("runtime sessions %q, want one session-…", ids)
				}
			case agentcore.ModeIdentity:
				wantIdentity = 1
				if want := agentcore.IdentitySessionID(env.Identity()); len(ids) != 1 || ids[0] != want {
					t.Errorf("runtime sessions %q, want [%s]", ids, want)
				}
			case agentcore.ModeRequest:
				if n := emu.Count(""); len(ids) != n {
					t.Errorf("%d runtime sessions for %d requests, want one each", len(ids), n)
				}
			}
			if n := env.STS.Count("GetCallerIdentity"); n != wantIdentity {
				t.Errorf("GetCallerIdentity called %d times, want %d", n, wantIdentity)
			}
		})
	}
}

// TestRelayAgentCoreEnv: the seed's environment alone configures the
// relay (ARN, identity mode, role to assume with the seed's default
// session name, debug logging); the role is assumed through the STS
// emulator and refreshed exactly once on an expired-token answer; two
// container restarts in one run are replayed; secrets never reach the log.
func TestRelayAgentCoreEnv(t *testing.T) {
	emu, env := agentCoreEnv(t, false)
	role := "arn:aws:iam::123456789012:role/r"
	t.Setenv("AGENT_ARN", relayTestARN)
	t.Setenv("RUNTIME_SESSION_MODE", "identity")
	t.Setenv("AGENTCORE_ASSUME_ROLE_ARN", role)
	t.Setenv("MCP_PROXY_DEBUG", "1")
	r := startRunRelay(t, "--qualifier", "canary")
	r.features(t, false)
	if n := env.STS.Count("AssumeRole"); n != 1 {
		t.Errorf("AssumeRole called %d times, want 1", n)
	}

	before := emu.Count("tools/call")
	emu.ExpireNext(1)
	if got := r.call(t, "echo", map[string]any{"text": "expired"}); got != "agentcore echo: expired" {
		t.Errorf("echo after expiry = %q", got)
	}
	if n := env.STS.Count("AssumeRole"); n != 2 {
		t.Errorf("AssumeRole called %d times, want 2 (one refresh)", n)
	}
	if n := emu.Count("tools/call") - before; n != 2 {
		t.Errorf("the expired call reached the emulator %d times, want twice (expired, retried)", n)
	}

	for i := 1; i <= 2; i++ {
		if n := emu.Restart(); n != 1 {
			t.Fatalf("restart %d replaced %d containers", i, n)
		}
		if got := r.call(t, "echo", map[string]any{"text": "back"}); got != "agentcore echo: back" {
			t.Errorf("echo after restart %d = %q", i, got)
		}
		if n := emu.Count("initialize"); n != 1+i {
			t.Errorf("initialize sent %d times after restart %d, want %d", n, i, 1+i)
		}
	}

	for _, c := range env.STS.Calls() {
		if c.Action == "AssumeRole" && (c.RoleARN != role || c.RoleSessionName != "mcpAgentCoreProxy" || c.AccessKeyID != env.KeyID) {
			t.Errorf("AssumeRole %+v: want %s as mcpAgentCoreProxy with the base key", c, role)
		}
	}
	keys := signedBy(t, emu)
	if len(keys) != 2 || keys[env.KeyID] != 0 {
		t.Errorf("signed by %v, want the two role sessions' keys (before and after the refresh), never the base key", keys)
	}
	wantID := agentcore.IdentitySessionID(env.Identity())
	for _, c := range emu.Calls() {
		if c.Status == 0 && (c.ARN != relayTestARN || c.Qualifier != "canary" || c.Session != wantID) {
			t.Errorf("invocation %+v; want ARN %s, qualifier canary, session %s", c, relayTestARN, wantID)
		}
	}
	log := r.stderr.String()
	if !strings.Contains(log, "level=DEBUG") {
		t.Errorf("MCP_PROXY_DEBUG=1 did not turn on debug logging: %q", log)
	}
	secrets := []string{env.Secret}
	for _, c := range env.Creds {
		secrets = append(secrets, c.Secret, c.SessionToken)
	}
	for _, c := range emu.Calls() {
		_, sig, _ := strings.Cut(c.Header.Get("Authorization"), "Signature=")
		secrets = append(secrets, sig)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(log, s) {
			t.Errorf("the log holds a secret (%.6s…)", s)
		}
	}
}

// TestRelayAgentCoreFlags: --aws-region (which may only repeat the ARN's)
// and --aws-profile reach the signer (a profile's keys sign).
func TestRelayAgentCoreFlags(t *testing.T) {
	env := peertest.NewAWSEnv(t)
	emu := peertest.NewAgentCore(t, peertest.AgentCoreOptions{Verify: env.Verify(agentcore.Service, "eu-central-1")})
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
	for _, k := range []string{"AGENTCORE_AGENT_ARN", "AGENT_ARN", "RUNTIME_SESSION_MODE", "AGENTCORE_ASSUME_ROLE_ARN"} {
		t.Setenv(k, "")
	}
	// The profile's keys, not the environment's, must sign: the env keys
	// win over a profile in the SDK's chain, so clear them.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if err := os.WriteFile(filepath.Join(env.Dir, "credentials"), []byte("[relay-prof]\naws_access_key_id = AKIDPROFILEKEY\naws_secret_access_key = profile-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Creds["AKIDPROFILEKEY"] = peertest.Credentials{Secret: "profile-secret"}
	r := startRunRelay(t, "--agentcore-arn", relayTestARN, "--aws-region", "eu-central-1", "--aws-profile", "relay-prof")
	if got := r.call(t, "echo", map[string]any{"text": "p"}); got != "agentcore echo: p" {
		t.Errorf("echo = %q", got)
	}
	if keys := signedBy(t, emu); len(keys) != 1 || keys["AKIDPROFILEKEY"] == 0 {
		t.Errorf("signed by %v, want the profile's key", keys)
	}
}

// TestRelayURLSigV4: `relay --url` with --sigv4 (or any --aws-* flag)
// signs every request, the probe, POSTs and the GET stream included, with
// the inferred or given service and region, and an assumed role's keys
// when asked; without it the upstream refuses the relay.
func TestRelayURLSigV4(t *testing.T) {
	env := peertest.NewAWSEnv(t)
	for _, k := range []string{"AGENTCORE_AGENT_ARN", "AGENT_ARN", "RUNTIME_SESSION_MODE", "AGENTCORE_ASSUME_ROLE_ARN"} {
		t.Setenv(k, "")
	}
	server := peertest.NewFeatureServer("signed").Server
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	sseHandler := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var mu sync.Mutex
	var scope string // the service and region the upstream insists on
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		service, region, _ := strings.Cut(scope, "/")
		mu.Unlock()
		if err := env.Verify(service, region)(r, body); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		key, _, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="), "/")
		mu.Lock()
		seen[r.Method+" "+key[:4]]++
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.HasPrefix(r.URL.Path, "/sse") {
			sseHandler.ServeHTTP(w, r) // legacy HTTP+SSE: a GET stream, POSTs to /sse?sessionid=…
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, scope string
		args        []string
		key         string
	}{
		{"inferred", "127/us-east-2", []string{"--url", srv.URL + "/mcp", "--sigv4"}, "AKID"},
		{"service and region", "billing-mcp/ap-south-1", []string{"--url", srv.URL + "/mcp", "--aws-service", "billing-mcp", "--aws-region", "ap-south-1"}, "AKID"},
		{"assumed role", "127/us-east-2", []string{"--url", srv.URL + "/mcp", "--assume-role-arn", "arn:aws:iam::123456789012:role/url-relay"}, "ASIA"},
		{"legacy sse", "127/us-east-2", []string{"--url", srv.URL + "/sse", "--transport", "sse", "--sigv4"}, "AKID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_REGION", "us-east-2")
			mu.Lock()
			scope = tc.scope
			clear(seen)
			mu.Unlock()
			r := startRunRelay(t, tc.args...)
			if got := r.call(t, "echo", map[string]any{"text": "s"}); got != "signed echo: s" {
				t.Errorf("echo = %q", got)
			}
			if got := r.call(t, "sample", map[string]any{"prompt": "p"}); got != "model said: sampled" {
				t.Errorf("sample = %q", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen["POST "+tc.key] < 3 || tc.name == "legacy sse" && seen["GET "+tc.key] < 1 {
				t.Errorf("signed requests %v, want POSTs signed by %s…", seen, tc.key)
			}
			for k := range seen {
				if !strings.HasSuffix(k, " "+tc.key) {
					t.Errorf("request %q signed by the wrong key, want %s…", k, tc.key)
				}
			}
		})
	}
	t.Run("unsigned", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
		if code := runRelay([]string{"--url", srv.URL + "/mcp", "--transport", "http"}, in, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "403") {
			t.Errorf("an unsigned relay got %q, want the 403", stdout.String())
		}
	})
}

func TestRelayAWSUsageErrors(t *testing.T) {
	peertest.NewAWSEnv(t)
	for _, k := range []string{"AGENTCORE_AGENT_ARN", "AGENT_ARN", "RUNTIME_SESSION_MODE", "AGENTCORE_ASSUME_ROLE_ARN"} {
		t.Setenv(k, "")
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"both", []string{"--url", "http://127.0.0.1:9/mcp", "--agentcore-arn", relayTestARN}, "not both"},
		{"bad arn", []string{"--agentcore-arn", "arn:aws:lambda:us-east-1:123456789012:function/f"}, "not a runtime ARN"},
		{"bad mode", []string{"--agentcore-arn", relayTestARN, "--session-mode", "forever"}, "session, identity or request"},
		{"service with arn", []string{"--agentcore-arn", relayTestARN, "--aws-service", "x"}, "--aws-service applies to --url only"},
		{"qualifier with url", []string{"--url", "https://example.com/mcp", "--qualifier", "q"}, "--qualifier applies to --agentcore-arn only"},
		{"session mode with url", []string{"--url", "https://example.com/mcp", "--session-mode", "request"}, "--session-mode applies to --agentcore-arn only"},
		{"sigv4 over http", []string{"--url", "http://mcp.example.com/mcp", "--sigv4", "--aws-region", "us-east-1"}, "needs an https --url"},
		{"no region", []string{"--url", "https://mcp.example.com/mcp", "--sigv4"}, "no AWS region"},
		{"no profile", []string{"--url", "https://billing.us-east-1.api.aws/mcp", "--aws-profile", "absent"}, "absent"},
		{"no profile for arn", []string{"--agentcore-arn", relayTestARN, "--aws-profile", "absent"}, "absent"},
		{"region not the arn's", []string{"--agentcore-arn", relayTestARN, "--aws-region", "us-east-1"}, `region "us-east-1" is not the region of the runtime ARN (eu-central-1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runRelay(tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := runRelay([]string{"-h"}, strings.NewReader(""), &stdout, &stderr); code != 2 {
		t.Errorf("-h exit %d", code)
	}
	for _, flag := range []string{"--url", "--transport", "--header", "--log", "--debug", "--reconnect",
		"--sigv4", "--aws-service", "--aws-region", "--aws-profile", "--assume-role-arn", "--role-session-name", "--agentcore-arn", "--qualifier", "--session-mode"} {
		if !strings.Contains(stderr.String(), flag) {
			t.Errorf("relay -h does not document %s", flag)
		}
	}
}
