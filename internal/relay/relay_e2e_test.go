package relay_test

// End-to-end tests of the stdio relay (`switchboard relay`): the real
// binary driven by the go-sdk client over mcp.CommandTransport and by
// inspector-cli, against the go-sdk everything-server over Streamable HTTP
// and a go-sdk legacy HTTP+SSE server; and relay.Run in-process against
// broken upstreams. Servers listen on 127.0.0.1 only; every process is
// stopped at cleanup; waits are on channels and deadlines.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/relay"
)

// waitFor bounds every wait for something that should happen promptly.
const waitFor = 15 * time.Second

// legacyVersion is the protocol version a session-era client pins.
const legacyVersion = "2025-11-25"

// ---------------------------------------------------------------------------
// Upstream servers.

// sseUpstream is a legacy HTTP+SSE server (go-sdk SSEHandler) on a fixed
// 127.0.0.1 address that can be killed and started again on the same port.
type sseUpstream struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	srv  *http.Server
	f    *peertest.FeatureServer
	log  *peertest.RequestLog
}

func startSSEUpstream(t *testing.T, name string) *sseUpstream {
	t.Helper()
	u := &sseUpstream{t: t}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	u.serve(ln, name)
	t.Cleanup(u.kill)
	return u
}

func (u *sseUpstream) url() string { return "http://" + u.addr + "/sse" }

func (u *sseUpstream) serve(ln net.Listener, name string) {
	f := peertest.NewFeatureServer(name)
	log := &peertest.RequestLog{}
	srv := &http.Server{Handler: log.Wrap(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return f.Server }, nil))}
	u.mu.Lock()
	u.srv, u.f, u.log = srv, f, log
	u.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// kill stops the server at once: every connection, streams included, is
// closed (the server process died).
func (u *sseUpstream) kill() {
	u.mu.Lock()
	srv := u.srv
	u.mu.Unlock()
	_ = srv.Close()
}

// restart starts a fresh server (new sessions, new state) on the same port.
func (u *sseUpstream) restart(name string) {
	u.t.Helper()
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		u.t.Fatalf("listening on %s again: %v", u.addr, err)
	}
	u.serve(ln, name)
}

func (u *sseUpstream) current() (*peertest.FeatureServer, *peertest.RequestLog) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.f, u.log
}

// ---------------------------------------------------------------------------
// In-process relay against broken upstreams.

// lines collects what the relay writes to stdout and signals each line.
type lines struct {
	mu     sync.Mutex
	buf    []byte
	all    [][]byte
	signal chan struct{}
}

func newLines() *lines { return &lines{signal: make(chan struct{})} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, bytes.Clone(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	close(l.signal)
	l.signal = make(chan struct{})
	return len(p), nil
}

// wait returns line n (0-based) once written.
func (l *lines) wait(t *testing.T, n int) []byte {
	t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	for {
		l.mu.Lock()
		if len(l.all) > n {
			b := l.all[n]
			l.mu.Unlock()
			return b
		}
		sig := l.signal
		l.mu.Unlock()
		select {
		case <-sig:
		case <-timer.C:
			t.Fatalf("no line %d on the relay's stdout within %s", n+1, waitFor)
		}
	}
}

// rpcMsg is a JSON-RPC message as the tests read it.
type rpcMsg = peertest.WireMsg

// checkJSONRPCLines fails the test unless every line of out is one JSON-RPC
// 2.0 message.
func checkJSONRPCLines(t *testing.T, out []byte) int {
	t.Helper()
	n := 0
	for i, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if len(out) == 0 {
			break
		}
		var m rpcMsg
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil || m.JSONRPC != "2.0" || dec.More() ||
			(m.Method == "" && m.Result == nil && m.Error == nil) {
			t.Errorf("stdout line %d is not a JSON-RPC message (%v): %q", i+1, err, clip(l))
			continue
		}
		n++
	}
	return n
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// runRelay runs relay.Run in-process with stdin fed by the returned writer.
// Closing the writer ends the relay; done then receives Run's result.
func runRelay(t *testing.T, opts relay.Options) (stdin io.WriteCloser, out *lines, done chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	out = newLines()
	done = make(chan error, 1)
	go func() { done <- relay.Run(context.Background(), opts, pr, out) }()
	t.Cleanup(func() {
		pw.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay.Run: %v", err)
			}
			done <- err
		case <-time.After(waitFor):
			t.Errorf("relay.Run did not return within %s of stdin closing", waitFor)
		}
	})
	return pw, out, done
}

func initLine(id int) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "initialize", "params": map[string]any{
		"protocolVersion": legacyVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "relay-e2e", "version": "1"}}})
	return append(b, '\n')
}

// badUpstreams starts the broken servers and returns their URLs by case
// name, with a request log each.
func badUpstreams(t *testing.T) (urls map[string]string, logs map[string]*peertest.RequestLog) {
	t.Helper()
	urls, logs = map[string]string{}, map[string]*peertest.RequestLog{}
	serve := func(name string, h http.HandlerFunc) {
		logs[name] = &peertest.RequestLog{}
		ts := httptest.NewServer(logs[name].Wrap(h))
		t.Cleanup(ts.Close)
		urls[name] = ts.URL + "/mcp"
	}
	serve("401", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="e2e"`)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
	})
	serve("403", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	})
	serve("html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><html><body><h1>Welcome</h1></body></html>"))
	})
	serve("json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","service":"not an MCP server"}`))
	})
	tlsLog := &peertest.RequestLog{}
	tlsSrv := httptest.NewTLSServer(tlsLog.Wrap(http.NotFoundHandler()))
	t.Cleanup(tlsSrv.Close)
	urls["tls"], logs["tls"] = tlsSrv.URL+"/mcp", tlsLog
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	urls["closed"] = "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	// A secret in the URL's path and query must not reach the client.
	urls["closed-secret"] = "http://" + ln.Addr().String() + "/mcp/s3cret-path?key=s3cret-key"
	return urls, logs
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(strings.ToLower(s), strings.ToLower(sub)) {
			return false
		}
	}
	return true
}

// TestRelayBadUpstream: for every --transport, the client's initialize to a
// broken upstream gets a prompt JSON-RPC error that says what is wrong (and
// never shows the URL's path or query); an upstream refusing the
// credentials is asked once, never in a loop.
func TestRelayBadUpstream(t *testing.T) {
	cases := []struct {
		name string
		want []string
	}{
		{"closed", []string{"unreachable", "connection refused"}},
		{"closed-secret", []string{"connection refused"}},
		{"401", []string{"401"}},
		{"403", []string{"403"}},
		{"html", []string{"not MCP"}},
		{"json", []string{"not MCP"}},
		{"tls", []string{"certificate"}},
	}
	for _, transport := range []string{"auto", "http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			urls, logs := badUpstreams(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					stdin, out, done := runRelay(t, relay.Options{URL: urls[c.name], Transport: transport, ReconnectDelay: 10 * time.Millisecond})
					t0 := time.Now()
					if _, err := stdin.Write(initLine(1)); err != nil {
						t.Fatal(err)
					}
					var m rpcMsg
					line := out.wait(t, 0)
					if err := json.Unmarshal(line, &m); err != nil || m.Error == nil || string(m.ID) != "1" {
						t.Fatalf("answer to initialize: %s, want a JSON-RPC error with id 1", line)
					}
					t.Logf("%s", m.Error.Message)
					if !containsAll(m.Error.Message, c.want) {
						t.Errorf("initialize error %q, want it to mention %q", m.Error.Message, c.want)
					}
					if strings.Contains(m.Error.Message, "s3cret") {
						t.Errorf("initialize error %q shows the URL's secret path or query", m.Error.Message)
					}
					if el := time.Since(t0); el > 5*time.Second {
						t.Errorf("the error took %s", el)
					}
					stdin.Close()
					if err := <-done; err != nil {
						t.Errorf("relay.Run: %v", err)
					}
					done <- nil
					if l := logs[c.name]; l != nil && (c.name == "401" || c.name == "403") {
						// auto probes with the initialize itself: still one request.
						if n := l.Total(); n != 1 {
							t.Errorf("the upstream answering %s got %d requests, want 1 (no retry loop)", c.name, n)
						}
					}
				})
			}
		})
	}
}

// ---------------------------------------------------------------------------
// The binary, driven over stdio.

// buildSwitchboard builds cmd/switchboard into a temporary folder.
func buildSwitchboard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchboard")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/switchboard-mcp/switchboard/cmd/switchboard").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// relayProc is a `switchboard relay` process behind mcp.CommandTransport.
// The command is wrapped so that a copy of the relay's stdout (what the
// client reads) lands in a file: sh -c 'relay … | tee FILE'. The relay reads
// the wrapper's stdin, so closing it ends the relay as it would unwrapped.
type relayProc struct {
	cmd    *exec.Cmd
	stdout string           // the copy of the relay's stdout
	stderr *peertest.Buffer // the relay's stderr
}

func relayCommand(t *testing.T, bin string, args ...string) *relayProc {
	t.Helper()
	p := &relayProc{stdout: filepath.Join(t.TempDir(), "relay.stdout"), stderr: &peertest.Buffer{}}
	argv := append([]string{"-c", `"$0" "$@" | tee "$RELAY_STDOUT"`, bin, "relay"}, args...)
	p.cmd = exec.Command("/bin/sh", argv...)
	p.cmd.Env = append(os.Environ(), "RELAY_STDOUT="+p.stdout)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	t.Cleanup(func() {
		if p.cmd.Process != nil {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // stragglers of the group, if any
		}
		if t.Failed() {
			t.Logf("relay stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// transport is the mcp.CommandTransport running p.
func (p *relayProc) transport() *mcp.CommandTransport {
	return &mcp.CommandTransport{Command: p.cmd, TerminateDuration: 10 * time.Second}
}

// closeAndCheck closes the client session (stdin EOF), expects the relay to
// exit by itself promptly, and checks that every line it wrote to stdout
// is a JSON-RPC message. It returns the number of lines.
func (p *relayProc) closeAndCheck(t *testing.T, cs *mcp.ClientSession) int {
	t.Helper()
	t0 := time.Now()
	err := cs.Close()
	if el := time.Since(t0); el >= 10*time.Second {
		t.Errorf("the relay did not exit within 10s of stdin closing (it took %s)", el)
	} else if err != nil {
		t.Errorf("closing the relay: %v (stderr: %s)", err, p.stderr.String())
	}
	out, err := os.ReadFile(p.stdout)
	if err != nil {
		t.Fatal(err)
	}
	n := checkJSONRPCLines(t, out)
	if n == 0 {
		t.Errorf("the relay's stdout copy is empty")
	}
	return n
}

// relayClient is the shared recording go-sdk client (peertest.RecordingClient)
// with the relay tests' helpers.
type relayClient struct {
	*peertest.RecordingClient
}

func newRelayClient() *relayClient {
	return &relayClient{peertest.NewRecordingClient("relay-e2e")}
}

// addToolNotices adds a tool to f and waits for the client to hear of it
// (notifications/tools/list_changed, sent outside any request: on the
// upstream's listen stream).
func (c *relayClient) addToolNotices(t *testing.T, f *peertest.FeatureServer) {
	t.Helper()
	f.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	select {
	case <-c.ListChanged():
	case <-time.After(waitFor):
		t.Fatalf("notifications/tools/list_changed did not reach the client within %s", waitFor)
	}
}

func (c *relayClient) saw(prompt, elicit string) bool {
	prompts, elicits := c.Recorded()
	return slices.Contains(prompts, prompt) && slices.Contains(elicits, elicit)
}

func (c *relayClient) connect(ctx context.Context, t *testing.T, p *relayProc, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := c.Connect(ctx, p.transport(), &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to the relay: %v\nstderr: %s", err, p.stderr.String())
	}
	t.Logf("connected through the relay with protocol %s", cs.InitializeResult().ProtocolVersion)
	return cs
}

// callText calls tool name with args and returns the text of its
// (successful) result.
func callText(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	return peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: name, Arguments: args})
}

func toolNames(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
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

// everythingRoundTrips exercises the everything-server's fixtures through
// cs: tools, progress, sampling, elicitation, resources, prompts.
func everythingRoundTrips(ctx context.Context, t *testing.T, c *relayClient, cs *mcp.ClientSession, tag string) {
	t.Helper()
	names := toolNames(ctx, t, cs)
	for _, want := range []string{"test_simple_text", "test_tool_with_progress", "test_sampling", "test_elicitation"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list = %v, want %s among them", names, want)
		}
	}
	if got := callText(ctx, t, cs, "test_simple_text", nil); got != "This is a simple text response for testing." {
		t.Errorf("test_simple_text = %q", got)
	}
	token := "progress-" + tag
	p := &mcp.CallToolParams{Name: "test_tool_with_progress"}
	p.SetProgressToken(token)
	if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("test_tool_with_progress: %v %+v", err, res)
	}
	if got := c.WaitProgress(t, token, 3, waitFor); !slices.Equal(got, []float64{0, 50, 100}) {
		t.Errorf("progress %v, want [0 50 100]", got)
	}
	prompt := "what is 2+2 (" + tag + ")"
	if got, want := callText(ctx, t, cs, "test_sampling", map[string]any{"prompt": prompt}), "LLM response: sampled("+prompt+")"; got != want {
		t.Errorf("test_sampling = %q, want %q", got, want)
	}
	msg := "pick a username (" + tag + ")"
	if got, want := callText(ctx, t, cs, "test_elicitation", map[string]any{"message": msg}),
		"Elicitation result: action=accept, content=map[username:alice]"; got != want {
		t.Errorf("test_elicitation = %q, want %q", got, want)
	}
	if !c.saw(prompt, msg) {
		t.Errorf("the client's handlers did not see the sampling and elicitation requests")
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "This is the content of the static text resource." {
		t.Errorf("resources/read test://static-text: %v %+v", err, rr)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_simple_prompt"})
	if err != nil || len(gp.Messages) != 1 {
		t.Fatalf("prompts/get test_simple_prompt: %v %+v", err, gp)
	}
	if tc, ok := gp.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "This is a simple prompt for testing." {
		t.Errorf("prompts/get test_simple_prompt = %+v", gp.Messages[0].Content)
	}
}

// featureRoundTrips exercises a peertest.NewFeatureServer(name) through cs.
func featureRoundTrips(ctx context.Context, t *testing.T, c *relayClient, cs *mcp.ClientSession, name, tag string) {
	t.Helper()
	names := toolNames(ctx, t, cs)
	for _, want := range []string{"echo", "progress", "sample", "elicit"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list = %v, want %s among them", names, want)
		}
	}
	if got, want := callText(ctx, t, cs, "echo", map[string]any{"text": tag}), name+" echo: "+tag; got != want {
		t.Errorf("echo = %q, want %q", got, want)
	}
	token := "progress-" + tag
	p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
	p.SetProgressToken(token)
	if res, err := cs.CallTool(ctx, p); err != nil || peertest.Text(res) != "3 steps done" {
		t.Fatalf("progress: %v %+v", err, res)
	}
	if got := c.WaitProgress(t, token, 3, waitFor); !slices.Equal(got, []float64{1, 2, 3}) {
		t.Errorf("progress %v, want [1 2 3]", got)
	}
	prompt := "what is 2+2 (" + tag + ")"
	if got, want := callText(ctx, t, cs, "sample", map[string]any{"prompt": prompt}), "model said: sampled("+prompt+")"; got != want {
		t.Errorf("sample = %q, want %q", got, want)
	}
	msg := "pick a username (" + tag + ")"
	if got, want := callText(ctx, t, cs, "elicit", map[string]any{"message": msg}), "user said: accept alice"; got != want {
		t.Errorf("elicit = %q, want %q", got, want)
	}
	if !c.saw(prompt, msg) {
		t.Errorf("the client's handlers did not see the sampling and elicitation requests")
	}
	uri := "remote://" + name + "/readme"
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "the readme of "+name {
		t.Errorf("resources/read %s: %v %+v", uri, err, rr)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": tag}})
	if err != nil || len(gp.Messages) != 1 {
		t.Fatalf("prompts/get greet: %v %+v", err, gp)
	}
	if tc, ok := gp.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "hello "+tag+" from "+name {
		t.Errorf("prompts/get greet = %+v", gp.Messages[0].Content)
	}
}

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real MCP peers and builds the binary; skipped with -short")
	}
}

// TestRelayBinary runs `switchboard relay` (built here) as a stdio server
// for real clients.
func TestRelayBinary(t *testing.T) {
	skipShort(t)
	bin := buildSwitchboard(t)

	// Against the go-sdk everything-server over Streamable HTTP with
	// sessions: every feature, and a server killed and restarted on the
	// same port between two calls (the relay re-initializes on the 404 and
	// retries: the client never notices).
	t.Run("everything-server", func(t *testing.T) {
		t.Parallel()
		everything := peertest.EverythingServer(t)
		for _, transport := range []string{"auto", "http"} {
			t.Run(transport, func(t *testing.T) {
				t.Parallel()
				url, srv := peertest.StartEverythingServer(t, false)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				logFile := filepath.Join(t.TempDir(), "relay.log")
				p := relayCommand(t, bin, "--url", url, "--transport", transport, "--log", logFile, "--debug")
				c := newRelayClient()
				cs := c.connect(ctx, t, p, legacyVersion)
				everythingRoundTrips(ctx, t, c, cs, transport)

				srv.Stop()
				addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
				peertest.Start(t, []string{everything, "-http", addr, "-stateless=false"}, nil)
				if err := peertest.WaitHTTP(ctx, url); err != nil {
					t.Fatal(err)
				}
				if got := callText(ctx, t, cs, "test_simple_text", nil); got != "This is a simple text response for testing." {
					t.Errorf("test_simple_text after the restart = %q", got)
				}
				everythingRoundTrips(ctx, t, c, cs, transport+"-after-restart")

				p.closeAndCheck(t, cs)
				logs, err := os.ReadFile(logFile)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(logs, []byte("re-initializing")) {
					t.Errorf("the --debug log does not show the session re-initialized after the restart:\n%s", logs)
				}
			})
		}
	})

	// Against a legacy HTTP+SSE server: every feature, concurrent requests
	// and cancellation, and a server killed and restarted on the same port
	// (the relay re-dials the event stream and replays the handshake).
	t.Run("sse-upstream", func(t *testing.T) {
		t.Parallel()
		for _, transport := range []string{"auto", "sse"} {
			t.Run(transport, func(t *testing.T) {
				t.Parallel()
				up := startSSEUpstream(t, "old")
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				p := relayCommand(t, bin, "--url", up.url(), "--transport", transport, "--reconnect", "50ms")
				c := newRelayClient()
				cs := c.connect(ctx, t, p, legacyVersion)
				featureRoundTrips(ctx, t, c, cs, "old", transport)
				f0, _ := up.current()
				c.addToolNotices(t, f0)

				// Concurrency: a call in flight does not hold up the next
				// one; cancelling it reaches the server.
				f, _ := up.current()
				slowCtx, cancelSlow := context.WithCancel(ctx)
				slowDone := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(slowCtx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"tag": "s1"}})
					slowDone <- err
				}()
				select {
				case <-f.Started:
				case <-time.After(waitFor):
					t.Fatal("the slow call did not start")
				}
				if got := callText(ctx, t, cs, "echo", map[string]any{"text": "meanwhile"}); got != "old echo: meanwhile" {
					t.Errorf("echo while a call is in flight = %q", got)
				}
				cancelSlow()
				select {
				case tag := <-f.Cancelled:
					if tag != "s1" {
						t.Errorf("cancelled %q", tag)
					}
				case <-time.After(waitFor):
					t.Fatal("cancelling the call did not reach the server")
				}
				if err := <-slowDone; err == nil {
					t.Error("the cancelled call succeeded")
				}

				up.kill()
				up.restart("new")
				_, newLog := up.current()
				newLog.WaitStarted(t, http.MethodGet, 1, waitFor) // the relay noticed, and re-dialled
				if got := callText(ctx, t, cs, "echo", map[string]any{"text": "after"}); got != "new echo: after" {
					t.Errorf("echo after the restart = %q", got)
				}
				featureRoundTrips(ctx, t, c, cs, "new", transport+"-after-restart")
				p.closeAndCheck(t, cs)
			})
		}
	})

	// Against a go-sdk Streamable HTTP server with an event store: every
	// feature, and a response stream the server closes mid-call, resumed
	// with Last-Event-ID.
	t.Run("streamable-upstream", func(t *testing.T) {
		t.Parallel()
		f := peertest.NewFeatureServer("web")
		log := &peertest.RequestLog{}
		ts := httptest.NewServer(log.Wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.Server },
			&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})))
		t.Cleanup(ts.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p := relayCommand(t, bin, "--url", ts.URL)
		c := newRelayClient()
		cs := c.connect(ctx, t, p, legacyVersion)
		featureRoundTrips(ctx, t, c, cs, "web", "streamable")
		c.addToolNotices(t, f)
		if got := callText(ctx, t, cs, "reconnect", nil); got != "answered after the stream closed" {
			t.Errorf("reconnect = %q", got)
		}
		p.closeAndCheck(t, cs)
	})

	// The go-sdk client's default (2026-07-28 first, then a fallback to
	// initialize) through the relay: to a session-era server, to a legacy
	// SSE server, and to a stateless server that speaks 2026-07-28.
	t.Run("default-protocol", func(t *testing.T) {
		t.Parallel()
		stateful, _ := peertest.StartEverythingServer(t, false)
		stateless, _ := peertest.StartEverythingServer(t, true)
		up := startSSEUpstream(t, "old")
		for _, tc := range []struct{ name, url, tool, want, version string }{
			{"everything-stateful", stateful, "test_simple_text", "This is a simple text response for testing.", legacyVersion},
			{"everything-stateless", stateless, "test_simple_text", "This is a simple text response for testing.", "2026-07-28"},
			{"sse-upstream", up.url(), "echo", "old echo: x", legacyVersion},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				p := relayCommand(t, bin, "--url", tc.url)
				cs := newRelayClient().connect(ctx, t, p, "")
				if got := cs.InitializeResult().ProtocolVersion; got != tc.version {
					t.Errorf("negotiated %s, want %s", got, tc.version)
				}
				if got := callText(ctx, t, cs, tc.tool, map[string]any{"text": "x"}); got != tc.want {
					t.Errorf("%s = %q, want %q", tc.tool, got, tc.want)
				}
				p.closeAndCheck(t, cs)
			})
		}
	})

	// inspector-cli with `switchboard relay --url …` as its stdio server.
	t.Run("inspector-cli", func(t *testing.T) {
		t.Parallel()
		cli, dir := peertest.InspectorCLI(t)
		up := startSSEUpstream(t, "old")
		everything, _ := peertest.StartEverythingServer(t, false)
		for _, tc := range []struct {
			name, url, tool, want string
			args                  []string
		}{
			{"sse-upstream", up.url(), "echo", "old echo: hi", []string{"--tool-arg", "text=hi"}},
			{"everything-server", everything, "test_simple_text", "This is a simple text response for testing.", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				base := append(slices.Clone(cli), bin, "relay", "--url", tc.url)
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
				if !slices.Contains(names, tc.tool) {
					t.Fatalf("tools/list = %v, want %s among them", names, tc.tool)
				}
				out, errOut, err = peertest.Run(ctx, t, dir, append(append(slices.Clip(base), "--method", "tools/call", "--tool-name", tc.tool), tc.args...))
				if err != nil {
					t.Fatalf("inspector-cli tools/call: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
				}
				var res mcp.CallToolResult
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatalf("tools/call output is not a CallToolResult: %v\n%s", err, out)
				}
				if got := peertest.Text(&res); got != tc.want || res.IsError {
					t.Fatalf("tools/call %s = %q (isError %v), want %q", tc.tool, got, res.IsError, tc.want)
				}
			})
		}
	})

	// A closed port: the client's initialize fails with a clear error, and
	// the relay still exits on stdin EOF.
	t.Run("closed-port", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + ln.Addr().String() + "/mcp"
		ln.Close()
		for _, transport := range []string{"auto", "http", "sse"} {
			t.Run(transport, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				p := relayCommand(t, bin, "--url", url, "--transport", transport)
				_, err := newRelayClient().Connect(ctx, p.transport(), &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
				if err == nil || !containsAll(err.Error(), []string{"connection refused"}) {
					t.Fatalf("connect through the relay to a closed port: %v, want an error saying connection refused", err)
				}
				t.Logf("%v", err)
				if ctx.Err() != nil {
					t.Fatalf("the error came only at the deadline")
				}
				// The client closed the relay's stdin after the failed
				// initialize and waited for it: the relay exited.
				if p.cmd.ProcessState == nil {
					t.Errorf("the relay was not reaped after the failed connect")
				}
			})
		}
	})
}

// session drives an in-process relay with raw JSON-RPC lines.
type session struct {
	t     *testing.T
	stdin io.WriteCloser
	out   *lines
	next  int // the next stdout line to read
}

func (s *session) send(v map[string]any) {
	s.t.Helper()
	v["jsonrpc"] = "2.0"
	b, err := json.Marshal(v)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.stdin.Write(append(b, '\n')); err != nil {
		s.t.Fatal(err)
	}
}

// response returns the next response on stdout (skipping notifications)
// and checks its id.
func (s *session) response(id int) rpcMsg {
	s.t.Helper()
	for {
		line := s.out.wait(s.t, s.next)
		s.next++
		var m rpcMsg
		if err := json.Unmarshal(line, &m); err != nil {
			s.t.Fatalf("stdout line is not JSON: %v: %s", err, clip(line))
		}
		if m.Method != "" {
			continue
		}
		if string(m.ID) != fmt.Sprint(id) {
			s.t.Fatalf("response %s, want id %d", clip(line), id)
		}
		return m
	}
}

func (s *session) call(id int, method string, params any) rpcMsg {
	s.t.Helper()
	s.send(map[string]any{"id": id, "method": method, "params": params})
	return s.response(id)
}

// TestRelayOversizedMessages: a message over the size limit, from the
// server or from the client, fails only its own request, with an error
// that says so; the session goes on.
func TestRelayOversizedMessages(t *testing.T) {
	for _, typ := range []string{"http", "sse"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			f := peertest.NewFeatureServer("big")
			var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.Server }, nil)
			if typ == "sse" {
				h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return f.Server }, nil)
			}
			ts := httptest.NewServer(h)
			t.Cleanup(ts.Close)
			stdin, out, _ := runRelay(t, relay.Options{URL: ts.URL, Transport: typ, MaxMessage: 64 << 10})
			s := &session{t: t, stdin: stdin, out: out}
			if m := s.call(1, "initialize", map[string]any{"protocolVersion": legacyVersion, "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "relay-e2e", "version": "1"}}); m.Error != nil {
				t.Fatalf("initialize: %+v", m.Error)
			}
			s.send(map[string]any{"method": "notifications/initialized"})

			m := s.call(2, "tools/call", map[string]any{"name": "big", "arguments": map[string]any{"bytes": 300000}})
			if m.Error == nil || m.Error.Code != -32006 || !strings.Contains(m.Error.Message, "size limit") {
				t.Errorf("oversized upstream response: %+v, want error -32006 about the size limit", m.Error)
			}
			m = s.call(3, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": strings.Repeat("c", 100000)}})
			if m.Error == nil || !strings.Contains(m.Error.Message, "size limit") {
				t.Errorf("oversized request from the client: %+v, want an error about the size limit", m.Error)
			}
			m = s.call(4, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "after"}})
			if m.Error != nil || !strings.Contains(string(m.Result), "big echo: after") {
				t.Errorf("echo after the oversized messages: %s %+v", m.Result, m.Error)
			}
			stdin.Close()
			out.mu.Lock()
			all := bytes.Join(out.all, []byte("\n"))
			out.mu.Unlock()
			checkJSONRPCLines(t, all)
		})
	}
}
