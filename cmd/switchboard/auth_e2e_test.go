package main

// End to end, with the real binary: a streamable_http destination behind
// OAuth (oauthtest: an authorization server and the MCP server it
// protects, on 127.0.0.1). The gateway starts without a login
// (needs_login), `switchboard auth login` logs in (its "browser" is this
// test binary, following the authorization URL), the running gateway
// picks the tokens up, calls go through; a token the server stops
// accepting is refreshed once under 16 concurrent calls; a revoked
// refresh token is needs_login again; no token or secret is in any log or
// output.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth/oauthtest"
)

// startServe runs `switchboard serve --config cfg --log` and returns its
// base URL once it listens; all it logs goes to logs.
func startServe(t *testing.T, bin, cfg string, logs *peertest.Buffer) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", cfg, "--log", "--no-reload")
	cmd.Env = append(os.Environ(), "LOG_FORMAT=text", "JOURNAL_STREAM=")
	r, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(r)
		re := regexp.MustCompile(`switchboard listening"? addr=(\S+)`)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(logs, r)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-copied
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(20 * time.Second):
		t.Fatalf("the gateway did not listen in 20 s:\n%s", logs.String())
		return ""
	}
}

// destState is a destination's state and error on /healthz.
func destState(t *testing.T, base, name string) (string, string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Destinations []struct{ Name, State, Error string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	for _, d := range h.Destinations {
		if d.Name == name {
			return d.State, d.Error
		}
	}
	t.Fatalf("no destination %q on /healthz", name)
	return "", ""
}

func TestGatewayOAuthE2E(t *testing.T) {
	bin := buildBinary(t)
	as := oauthtest.Start(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	cfg := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\naudit: {log_bodies: true}\ndestinations:\n  remote:\n    type: streamable_http\n    url: "+as.MCPURL+
		"\n    protocol: legacy\n    oauth:\n      token_dir: "+tokens+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs peertest.Buffer // every output of every process
	runSB := func(args ...string) (int, string) {
		t.Helper()
		return runBrowsing(t, bin, &logs, args...)
	}

	base := startServe(t, bin, cfg, &logs)
	if st, msg := destState(t, base, "remote"); st != "needs_login" || !strings.Contains(msg, "switchboard auth login remote") {
		t.Fatalf("/healthz before a login: %q %q; want needs_login naming the command", st, msg)
	}
	if code, out := runSB("check", "--config", cfg); code != 0 || !strings.Contains(out, "remote: oauth needs_login") {
		t.Fatalf("check before a login: exit %d\n%s", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	connect := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/remote/mcp"}, nil)
	}
	echo := func(cs *mcp.ClientSession, text string) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil {
			return err
		}
		if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != text {
			b, _ := json.Marshal(res)
			return &callError{string(b)}
		}
		return nil
	}

	if code, out := runSB("auth", "login", "remote", "--config", cfg); code != 0 || !strings.Contains(out, "remote: logged in; ok") {
		t.Fatalf("auth login: exit %d\n%s", code, out)
	}
	fi, err := os.Stat(filepath.Join(tokens, "remote.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v; want mode 0600", err, fi)
	}
	if st, msg := destState(t, base, "remote"); st != "ready" {
		t.Fatalf("/healthz after the login: %q %q; want ready (no restart)", st, msg)
	}

	const n = 16
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		if sessions[i], err = connect(); err != nil {
			t.Fatalf("connect %d through the gateway: %v", i, err)
		}
		defer sessions[i].Close()
	}
	callAll := func() error {
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for _, cs := range sessions {
			wg.Go(func() { errs <- echo(cs, "hi") })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := callAll(); err != nil {
		t.Fatal(err)
	}
	if got := as.Refreshes.Load(); got != 0 {
		t.Fatalf("%d refreshes before the token expired", got)
	}
	// A client with no OAuth of its own (the inspector's CLI, Node)
	// reaches the protected server through the gateway.
	t.Run("inspector-cli", func(t *testing.T) {
		cli, idir := peertest.InspectorCLI(t)
		out, errOut, err := peertest.Run(ctx, t, idir, append(slices.Clip(cli), base+"/remote/mcp", "--transport", "http",
			"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=from-inspector"))
		logs.Write([]byte(out + errOut))
		if err != nil || !strings.Contains(out, "from-inspector") {
			t.Fatalf("inspector-cli tools/call echo through the gateway: %v\n%s\n%s", err, out, errOut)
		}
	})
	// The TypeScript SDK's client (the one the inspector is built on, here
	// from the inspector's own node_modules), with no OAuth of its own.
	t.Run("typescript-sdk", func(t *testing.T) {
		_, idir := peertest.InspectorCLI(t)
		sdk := filepath.Join(idir, "..", "..", "sdk", "dist", "esm", "client")
		script := filepath.Join(t.TempDir(), "call.mjs")
		src := `import { pathToFileURL } from "node:url";
const dir = process.argv[2], url = process.argv[3];
const { Client } = await import(pathToFileURL(dir + "/index.js").href);
const { StreamableHTTPClientTransport } = await import(pathToFileURL(dir + "/streamableHttp.js").href);
const client = new Client({ name: "ts-sdk-oauth-e2e", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const res = await client.callTool({ name: "echo", arguments: { text: "from-ts-sdk" } });
console.log(JSON.stringify(res));
await client.close();
`
		if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := peertest.Run(ctx, t, "", []string{peertest.Node(t), script, sdk, base + "/remote/mcp"})
		logs.Write([]byte(out + errOut))
		if err != nil || !strings.Contains(out, "from-ts-sdk") {
			t.Fatalf("TypeScript SDK client tools/call echo through the gateway: %v\n%s\n%s", err, out, errOut)
		}
	})
	as.ExpireAccessTokens()
	if err := callAll(); err != nil {
		t.Fatalf("calls after the token expired: %v", err)
	}
	if got := as.Refreshes.Load(); got != 1 {
		t.Fatalf("%d refreshes for %d concurrent calls with an expired token, want exactly 1", got, n)
	}
	if code, out := runSB("auth", "status", "--config", cfg); code != 0 || !strings.Contains(out, "remote: ok") || !strings.Contains(out, "refresh token held") {
		t.Fatalf("auth status: exit %d\n%s", code, out)
	}

	// The refresh token is revoked, the access token expires: needs_login.
	as.RevokeRefreshTokens()
	as.ExpireAccessTokens()
	if err := echo(sessions[0], "x"); err == nil {
		t.Fatal("a call succeeded with the refresh token revoked")
	}
	if st, msg := destState(t, base, "remote"); st != "needs_login" || !strings.Contains(msg, "refresh token was refused") {
		t.Fatalf("/healthz after the revocation: %q %q; want needs_login", st, msg)
	}
	for _, path := range []string{"/metrics", "/ui/status.json", "/healthz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		logs.Write(b) // searched for tokens below
		if path == "/metrics" && !strings.Contains(string(b), `switchboard_destination_state{destination="remote",state="needs_login"} 1`) {
			t.Errorf("/metrics does not show remote needs_login")
		}
	}
	if code, out := runSB("auth", "status", "remote", "--config", cfg); code != 0 || !strings.Contains(out, "remote: needs_login") {
		t.Fatalf("auth status after the revocation: exit %d\n%s", code, out)
	}
	if code, out := runSB("auth", "logout", "remote", "--config", cfg); code != 0 || !strings.Contains(out, "remote: logged out") {
		t.Fatalf("auth logout: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(tokens, "remote.json")); !os.IsNotExist(err) {
		t.Fatalf("the token file is still there after logout: %v", err)
	}

	all := logs.String()
	for _, s := range as.Secrets() {
		if strings.Contains(all, s) {
			t.Fatalf("a token or secret issued by the server is in the output:\n%s", all)
		}
	}
	if !strings.Contains(all, "token refreshed") {
		t.Errorf("the gateway's log does not show the refresh:\n%s", all)
	}
}

type callError struct{ s string }

func (e *callError) Error() string { return "unexpected result " + e.s }

// TestGatewayOAuthSSEDestination: a legacy HTTP+SSE server behind OAuth,
// as a `type: sse` destination: needs_login until `auth login`, then calls
// through the gateway; an expired token is refreshed once (naming its
// resource, the SSE endpoint); no token in any output.
func TestGatewayOAuthSSEDestination(t *testing.T) {
	bin := buildBinary(t)
	as := oauthtest.Start(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\ndestinations:\n  legacy:\n    type: sse\n    url: "+as.SSEURL+
		"\n    oauth:\n      token_dir: "+filepath.Join(dir, "tokens")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs peertest.Buffer
	base := startServe(t, bin, cfg, &logs)
	if st, _ := destState(t, base, "legacy"); st != "needs_login" {
		t.Fatalf("/healthz before a login: %q; want needs_login", st)
	}
	if code, out := runBrowsing(t, bin, &logs, "auth", "login", "legacy", "--config", cfg); code != 0 || !strings.Contains(out, "legacy: logged in; ok") {
		t.Fatalf("auth login: exit %d\n%s", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/legacy/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect through the gateway: %v", err)
	}
	defer cs.Close()
	echo := func(text string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != text {
			t.Fatalf("echo %q through the gateway: %v %+v", text, err, res)
		}
	}
	echo("one")
	as.ExpireAccessTokens()
	echo("two")
	if got := as.Refreshes.Load(); got != 1 {
		t.Fatalf("%d refreshes after the token expired, want 1", got)
	}
	if st, _ := destState(t, base, "legacy"); st != "ready" {
		t.Fatalf("/healthz after the calls: %q; want ready", st)
	}
	all := logs.String()
	for _, s := range as.Secrets() {
		if strings.Contains(all, s) {
			t.Fatalf("a token or secret issued by the server is in the output:\n%s", all)
		}
	}
}

// runBrowsing runs the binary with args, the $BROWSER of a login being
// this test binary in the "browser" mode, and returns its exit code and
// output (stdout and stderr), which go to logs too.
func runBrowsing(t *testing.T, bin string, logs *peertest.Buffer, args ...string) (int, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), envMainServer+"=browser", "BROWSER="+self)
	var out peertest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	logs.Write([]byte(out.String()))
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}
