package agentcore_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/relay"
	"github.com/switchboard-mcp/switchboard/internal/sigv4"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
)

const testARN = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/echo_agent-AbC123"

// signedEmulator starts an AgentCore emulator that checks every request's
// SigV4 signature (service bedrock-agentcore, the ARN's region) with the
// independent verifier of package peertest, in an isolated AWS environment
// (static keys, an STS emulator) whose keys the runtime signs with.
func signedEmulator(t testing.TB, opts peertest.AgentCoreOptions) (*peertest.AgentCore, *peertest.AWSEnv) {
	t.Helper()
	env := peertest.NewAWSEnv(t)
	opts.Verify = env.Verify(agentcore.Service, "us-west-2")
	emu := peertest.NewAgentCore(t, opts)
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
	return emu, env
}

// checkSigned fails the test unless every invocation the emulator saw was
// accepted, or refused only as expired (allowed of them), and signed with
// a key whose id starts with keyPrefix.
func checkSigned(t *testing.T, emu *peertest.AgentCore, keyPrefix string, expired int) {
	t.Helper()
	refused := 0
	for _, c := range emu.Calls() {
		if c.Status == http.StatusForbidden {
			refused++
		} else if c.Status != 0 {
			t.Errorf("emulator refused %+v", c)
		}
		if auth := c.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+keyPrefix) {
			t.Errorf("invocation %s signed %q, want a key %s…", c.Method, auth, keyPrefix)
		}
	}
	if refused != expired {
		t.Errorf("%d invocations refused as expired, want %d", refused, expired)
	}
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

// startRelay runs relay.Run over an AgentCore runtime (resolved with
// real SigV4 signing) and connects a go-sdk client to it.
func startRelay(t *testing.T, opts agentcore.Options) (*client, *mcp.ClientSession) {
	return startRelayVersion(t, opts, "2025-11-25")
}

// startRelayVersion is startRelay with the protocol version the client
// asks for ("" is the go-sdk's latest).
func startRelayVersion(t testing.TB, opts agentcore.Options, version string) (*client, *mcp.ClientSession) {
	t.Helper()
	rt, err := agentcore.Resolve(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return startRuntime(t, rt, version)
}

// startRuntime runs relay.Run over rt and connects a go-sdk client asking
// for version.
func startRuntime(t testing.TB, rt *agentcore.Runtime, version string) (*client, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
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
	return peertest.Text(res)
}

var sessionShape = map[string]*regexp.Regexp{
	agentcore.ModeSession:  regexp.MustCompile(`^session-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`),
	agentcore.ModeIdentity: regexp.MustCompile(`^identity-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
	agentcore.ModeRequest:  regexp.MustCompile(`^request-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`),
}

func TestRelayAgentCoreFeatures(t *testing.T) {
	emu, env := signedEmulator(t, peertest.AgentCoreOptions{})
	c, cs := startRelay(t, agentcore.Options{ARN: testARN, Qualifier: "prod"})
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
	// Expired credentials: refreshed once, the call succeeds; the
	// emulator sees the expired request and its retry, nothing more.
	before := emu.Count("tools/call")
	emu.ExpireNext(1)
	if got := call(t, cs, "echo", map[string]any{"text": "again"}); got != "agentcore echo: again" {
		t.Errorf("echo after expiry = %q", got)
	}
	if n := emu.Count("tools/call") - before; n != 2 {
		t.Errorf("the expired call reached the emulator %d times, want 2 (the expired request and one retry)", n)
	}
	calls := emu.Calls()
	if last := calls[len(calls)-1]; last.Status != 0 || last.Method != "tools/call" || calls[len(calls)-2].Status != http.StatusForbidden {
		t.Errorf("the last two invocations were %+v and %+v, want the expired one and its accepted retry", calls[len(calls)-2], last)
	}
	checkSigned(t, emu, env.KeyID, 1)
	if n := env.STS.Count("GetCallerIdentity"); n != 0 {
		t.Errorf("session mode asked STS for the caller %d times", n)
	}
	for _, call := range emu.Calls() {
		if call.Status != 0 {
			continue // the expired one, refused before its path was read
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
			emu, env := signedEmulator(t, peertest.AgentCoreOptions{Stateless: mode == agentcore.ModeRequest})
			opts := agentcore.Options{ARN: testARN, SessionMode: mode}
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
				// The id derives from sts:GetCallerIdentity, asked
				// once, through the STS emulator.
				want := agentcore.IdentitySessionID(env.Identity())
				if len(s) != 1 || s[0] != want {
					t.Errorf("sessions %q, want [%s]", s, want)
				}
				if n := env.STS.Count("GetCallerIdentity"); n != 1 {
					t.Errorf("GetCallerIdentity called %d times, want 1", n)
				}
			default:
				if len(s) != 1 {
					t.Errorf("sessions %q, want one", s)
				}
			}
			checkSigned(t, emu, env.KeyID, 0)
		})
	}
}

// A container restart (the emulator's child replaced, so it answers -32602
// until initialized) is replayed transparently, every time, and the client
// is told; a genuine -32602 from a healthy server comes back unchanged.
func TestRelayAgentCoreContainerRestart(t *testing.T) {
	emu, env := signedEmulator(t, peertest.AgentCoreOptions{})
	c, cs := startRelay(t, agentcore.Options{ARN: testARN})
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
	checkSigned(t, emu, env.KeyID, 0)
}

// TestRelayAgentCoreModern: a 2026-07-28 client's sessionless requests go
// through the relay and AgentCore too.
func TestRelayAgentCoreModern(t *testing.T) {
	emu, _ := signedEmulator(t, peertest.AgentCoreOptions{})
	_, cs := startRelayVersion(t, agentcore.Options{ARN: testARN}, "")
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

// TestRelayAgentCoreAssumeRole: with a role to assume, AgentCore calls are
// signed with the role's temporary credentials from the STS emulator
// (session token included); an expired-token answer costs exactly one more
// AssumeRole and one retry; the identity mode still names the base
// caller, not the role.
func TestRelayAgentCoreAssumeRole(t *testing.T) {
	emu, env := signedEmulator(t, peertest.AgentCoreOptions{})
	role := "arn:aws:iam::123456789012:role/agentcore-invoker"
	_, cs := startRelay(t, agentcore.Options{ARN: testARN, SessionMode: agentcore.ModeIdentity,
		AWS: sigv4.Options{AssumeRoleARN: role, RoleSessionName: "relay-test"}})
	if got := call(t, cs, "echo", map[string]any{"text": "role"}); got != "agentcore echo: role" {
		t.Errorf("echo = %q", got)
	}
	if n := env.STS.Count("AssumeRole"); n != 1 {
		t.Errorf("AssumeRole called %d times, want 1", n)
	}
	before := emu.Count("tools/call")
	emu.ExpireNext(1)
	if got := call(t, cs, "echo", map[string]any{"text": "expired"}); got != "agentcore echo: expired" {
		t.Errorf("echo after expiry = %q", got)
	}
	if n := env.STS.Count("AssumeRole"); n != 2 {
		t.Errorf("AssumeRole called %d times, want 2 (one refresh)", n)
	}
	if n := emu.Count("tools/call") - before; n != 2 {
		t.Errorf("the expired call reached the emulator %d times, want 2", n)
	}
	for _, c := range env.STS.Calls() {
		if c.Action == "AssumeRole" && (c.RoleARN != role || c.RoleSessionName != "relay-test" || c.AccessKeyID != env.KeyID) {
			t.Errorf("AssumeRole %+v: want %s as relay-test with the base key", c, role)
		}
	}
	checkSigned(t, emu, "ASIATEST", 1)
	for _, c := range emu.Calls() {
		if c.Header.Get("X-Amz-Security-Token") == "" {
			t.Errorf("invocation %s without the role's session token", c.Method)
		}
	}
	// Two different temporary keys signed: before and after the refresh.
	keys := map[string]bool{}
	for _, c := range emu.Calls() {
		cred, _, _ := strings.Cut(strings.TrimPrefix(c.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="), "/")
		keys[cred] = true
	}
	if len(keys) != 2 {
		t.Errorf("signed with keys %v, want the first role session's and the refreshed one's", keys)
	}
	want := agentcore.IdentitySessionID(env.Identity())
	if s := emu.Sessions(); len(s) != 1 || s[0] != want {
		t.Errorf("runtime sessions %q, want [%s] (the base caller's identity)", s, want)
	}
}

// TestResolveErrors: bad ARNs and unknown profiles fail at Resolve.
func TestResolveErrors(t *testing.T) {
	peertest.NewAWSEnv(t)
	ctx := context.Background()
	if _, err := agentcore.Resolve(ctx, agentcore.Options{ARN: "arn:aws:lambda:us-east-1:123456789012:function:f"}); err == nil || !strings.Contains(err.Error(), "not a runtime ARN") {
		t.Errorf("bad ARN: %v", err)
	}
	if _, err := agentcore.Resolve(ctx, agentcore.Options{ARN: testARN, AWS: sigv4.Options{Profile: "missing"}}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing profile: %v", err)
	}
	rt, err := agentcore.Resolve(ctx, agentcore.Options{ARN: testARN, Endpoint: "https://vpce-1.bedrock-agentcore.us-west-2.vpce.amazonaws.com"})
	if err != nil || !strings.HasPrefix(rt.URL(), "https://vpce-1.bedrock-agentcore.us-west-2.vpce.amazonaws.com/runtimes/arn%3Aaws%3A") {
		t.Errorf("private endpoint: %v %v", rt, err)
	}
}

// TestRefusalMessage: a 403 whose JSON body has a message and no AWS error
// type (as AgentCore answers some refusals) reaches the caller with that
// message, not a bare "403 Forbidden".
func TestRefusalMessage(t *testing.T) {
	peertest.NewAWSEnv(t)
	const msg = "Access denied to runtime echo_agent-AbC123 for this caller"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"message":"`+msg+`"}`)
	}))
	defer srv.Close()
	rt, err := agentcore.Resolve(context.Background(), agentcore.Options{ARN: testARN, Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan string, 4)
	c, err := rt.Dialer(nil)(ctx, func(b []byte) { got <- string(b) }, func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if err := c.Write([]byte(init)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if !strings.Contains(m, `"error"`) || !strings.Contains(m, "403 Forbidden ("+msg+")") {
			t.Errorf("answer %s; want an error with the 403 and its message", m)
		}
	case <-ctx.Done():
		t.Fatal("no answer to initialize")
	}
}
