package main

// The official conformance suite's client auth/* scenarios run against
// `switchboard relay --url URL --login` as the OAuth client. The suite
// runs a command with the scenario server's URL appended; that command is
// this test binary in the "oauth-conformance-client" mode: an MCP client
// (go-sdk) of the relay, which it starts as a subprocess. The relay meets
// the 401, discovers, registers and logs in; its "browser" ($BROWSER) is
// this test binary again, in the "browser" mode, which follows the
// authorization URL (the scenario's server approves at once) to the
// relay's loopback redirect. In the "oauth-conformance-gateway" mode the
// command instead writes a config with the scenario's server as a
// streamable_http destination with oauth (and callback_url), runs
// `switchboard auth login` (same browser; not in the
// "oauth-conformance-gateway-logins" mode) and `switchboard serve`, and is
// an MCP client of the gateway that takes URL elicitations: a login the
// gateway starts (when the session opens without a token, a step-up, a
// new authorization server) reaches it as error -32042 with the URL,
// which it follows (the scenario's server approves at once and redirects
// to the gateway's /oauth/callback/remote) before it retries.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth/oauthtest"
)

const envSwitchboardBin = "SWITCHBOARD_TEST_BIN"

// oauthConformanceClient is the client command of the conformance
// scenarios: os.Args[1] is the scenario server's URL; the scenario's name
// and context come in MCP_CONFORMANCE_SCENARIO and MCP_CONFORMANCE_CONTEXT.
func oauthConformanceClient() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: CLIENT URL")
		return 2
	}
	url := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var cctx map[string]any
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &cctx)
	dir, err := os.MkdirTemp("", "switchboard-oauth-conf-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	args := []string{"relay", "--url", url, "--login", "--oauth-state-dir", dir, "--debug",
		"--oauth-client-metadata-url", "https://conformance-test.local/client-metadata.json"}
	if id, ok := cctx["client_id"].(string); ok {
		args = append(args, "--oauth-client-id", id)
	}
	if secret, ok := cctx["client_secret"].(string); ok {
		args = append(args, "--oauth-client-secret", secret)
	}
	if strings.HasPrefix(scenario, "auth/client-credentials") {
		args = append(args, "--oauth-grant", "client_credentials")
	}
	if pemKey, ok := cctx["private_key_pem"].(string); ok {
		if err := os.WriteFile(dir+"/client.pem", []byte(pemKey), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		args = append(args, "--oauth-client-key", dir+"/client.pem")
	}
	self, _ := os.Executable()
	cmd := exec.Command(os.Getenv(envSwitchboardBin), args...)
	cmd.Env = append(os.Environ(), envMainServer+"=browser", "BROWSER="+self)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "conformance-via-relay", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect: %v\n", err)
		return 1
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tools/list: %v\n", err)
		return 1
	}
	for _, tool := range tools.Tools {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: map[string]any{}}); err != nil {
			fmt.Fprintf(os.Stderr, "tools/call %s: %v\n", tool.Name, err)
			return 1
		}
		break
	}
	return 0
}

// oauthConformanceGateway is the client command of the conformance
// scenarios run against a gateway: it writes a config with the scenario
// server as a streamable_http destination with an oauth block (and
// callback_url), logs in with `switchboard auth login` (authorization
// code grants; unless authLogin is false: then every login is one the
// gateway starts, from the first), starts `switchboard serve`, and calls
// through it as an MCP client that takes URL elicitations.
func oauthConformanceGateway(authLogin bool) int {
	url := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var cctx map[string]any
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &cctx)
	dir, err := os.MkdirTemp("", "switchboard-oauth-gw-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	block := "    oauth:\n      token_dir: " + q(dir+"/tokens") + "\n      client_metadata_url: https://conformance-test.local/client-metadata.json\n"
	if id, ok := cctx["client_id"].(string); ok {
		block += "      client_id: " + q(id) + "\n"
	}
	if secret, ok := cctx["client_secret"].(string); ok {
		block += "      client_secret: " + q(secret) + "\n"
	}
	cc := strings.HasPrefix(scenario, "auth/client-credentials")
	if cc {
		block += "      grant: client_credentials\n"
	}
	if pemKey, ok := cctx["private_key_pem"].(string); ok {
		if err := os.WriteFile(dir+"/client.pem", []byte(pemKey), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		block += "      client_key_file: " + q(dir+"/client.pem") + "\n"
	}
	// The gateway's port is chosen here, so that the callback URL of the
	// logins it starts by itself (a step-up, a new authorization server)
	// is known: the scenario runs in a network namespace of its own.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	listen := ln.Addr().String()
	ln.Close()
	if !cc {
		block += "      callback_url: http://" + listen + "/oauth/callback/remote\n"
	}
	protocol := "legacy" // the scenario's version: the suite's own servers speak one era
	if os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION") == "2026-07-28" {
		protocol = "modern"
	}
	cfg := dir + "/switchboard.yaml"
	if err := os.WriteFile(cfg, []byte("listen: "+listen+"\ndestinations:\n  remote:\n    type: streamable_http\n    url: "+q(url)+
		"\n    protocol: "+protocol+"\n"+block), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := os.Getenv(envSwitchboardBin)
	self, _ := os.Executable()
	if !cc && authLogin {
		login := exec.Command(bin, "auth", "login", "remote", "--config", cfg)
		login.Env = append(os.Environ(), envMainServer+"=browser", "BROWSER="+self)
		login.Stdout, login.Stderr = os.Stderr, os.Stderr
		if err := login.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "auth login: %v\n", err)
			return 1
		}
	}
	serve := exec.Command(bin, "serve", "--config", cfg, "--log", "--no-reload")
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r, err := serve.StderrPipe()
	if err == nil {
		err = serve.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	}()
	addr := make(chan string, 1)
	go func() { // ends when serve exits (its stderr closes)
		sc := bufio.NewScanner(r)
		re := regexp.MustCompile(`switchboard listening"? addr=(\S+)`)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "the gateway did not start")
		return 1
	}
	completed := make(chan string, 16) // notifications/elicitation/complete
	// The client takes URL elicitations: a login the gateway starts in
	// mid-session comes as error -32042 with the authorization URL, which
	// it follows (its person's browser: the scenario's authorization
	// server approves at once and redirects to the gateway's callback,
	// which answers once the tokens are stored), then it retries, once.
	c := mcp.NewClient(&mcp.Implementation{Name: "conformance-via-gateway", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	})
	// URL elicitation (-32042) is protocol 2025-11-25's: the client
	// speaks it (the gateway translates to a 2026-07-28 server).
	var cs *mcp.ClientSession
	err = withElicitedLogin(ctx, nil, func() (err error) {
		cs, err = c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/remote/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		return err
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect: %v\n", err)
		return 1
	}
	defer cs.Close()
	var tools *mcp.ListToolsResult
	err = withElicitedLogin(ctx, completed, func() (err error) {
		tools, err = cs.ListTools(ctx, nil)
		return err
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "tools/list: %v\n", err)
		return 1
	}
	for _, tool := range tools.Tools {
		var res *mcp.CallToolResult
		err := withElicitedLogin(ctx, completed, func() (err error) {
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: map[string]any{}})
			return err
		})
		if err != nil || res.IsError {
			fmt.Fprintf(os.Stderr, "tools/call %s: %v\n", tool.Name, err)
			return 1
		}
		break
	}
	return 0
}

// withElicitedLogin runs call; when it fails with MCP's
// URLElicitationRequired error (-32042), it follows each URL of the
// error's data with a GET, as the person's browser would, waits for the
// elicitation's notifications/elicitation/complete on completed (in a
// session; nil: none to wait for), and runs call once more.
func withElicitedLogin(ctx context.Context, completed <-chan string, call func() error) error {
	err := call()
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != mcp.CodeURLElicitationRequired {
		return err
	}
	var data struct {
		Elicitations []struct {
			Mode, URL, ElicitationID string
		} `json:"elicitations"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil || len(data.Elicitations) == 0 {
		return fmt.Errorf("a -32042 error without elicitations (%v): %s", err, we.Data)
	}
	for _, el := range data.Elicitations {
		if el.Mode != "url" || el.ElicitationID == "" {
			return fmt.Errorf("not a URL elicitation: %+v", el)
		}
		resp, err := http.Get(el.URL)
		if err != nil {
			return fmt.Errorf("following the login URL: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the gateway's login callback answered %s", resp.Status)
		}
		for completed != nil {
			select {
			case id := <-completed:
				if id != el.ElicitationID {
					continue // an older one's
				}
			case <-ctx.Done():
				return fmt.Errorf("no notifications/elicitation/complete for %s", el.ElicitationID)
			}
			break
		}
	}
	return call()
}

// oauthBrowser is $BROWSER in the conformance runs: it follows the
// authorization URL (os.Args[1]) through its redirect.
func oauthBrowser() int {
	resp, err := http.Get(os.Args[len(os.Args)-1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "browser:", err)
		return 1
	}
	resp.Body.Close()
	return 0
}

// oauthNotApplicable are the auth/* scenarios of conformance
// 0.2.0-alpha.12 that do not apply to an authorization-code or
// client-credentials client with a client secret, and why. Their results
// are logged, not checked.
var oauthNotApplicable = map[string]string{
	"auth/enterprise-managed-authorization": "enterprise-managed authorization (ID-JAG token exchange, SEP-990): another grant",
	"auth/dpop":                             "DPoP sender-constrained tokens (SEP-1932): not implemented",
	"auth/dpop-nonce":                       "DPoP with server nonces (SEP-1932): not implemented",
	"auth/wif-jwt-bearer":                   "workload identity federation JWT-bearer grant (SEP-1933): another grant",
}

// oauthScenarios are the auth/* client scenarios of 0.2.0-alpha.12 that
// apply; each must pass.
var oauthScenarios = []string{
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd", "auth/pre-registration",
	"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
	"auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
	"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
	"auth/authorization-server-migration", "auth/metadata-issuer-mismatch",
	"auth/iss-supported", "auth/iss-not-advertised", "auth/iss-supported-missing", "auth/iss-wrong-issuer",
	"auth/iss-unexpected", "auth/iss-normalized",
	"auth/client-credentials-basic", "auth/client-credentials-jwt",
}

var conformanceLineRE = regexp.MustCompile(`(?m)^\S+ (auth/\S+): (\d+) passed, (\d+) failed`)

// TestOAuthConformance runs every client auth/* scenario of conformance
// 0.2.0-alpha.12 (the suites auth, draft for the 2026-07-28 ones,
// backcompat and extensions; the draft suite's other scenarios are not
// about auth and are ignored) with the relay as the OAuth client
// (relay --login), and with a gateway's streamable_http destination with
// an oauth block: auth login, then serve, the logins in mid-session the
// gateway's own, completed through URL elicitation ("gateway"); and serve
// alone, every login the gateway's own ("gateway-logins").
func TestOAuthConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real conformance suite; skipped with -short")
	}
	if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
		t.Skip("the scenario servers listen on every interface: needs unshare -n (root) to keep them on a private loopback")
	}
	argv := peertest.Conformance(t, peertest.ConformanceNext)
	bin := buildBinary(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range []struct{ name, mode string }{
		{"relay", "oauth-conformance-client"},
		{"gateway", "oauth-conformance-gateway"},
		{"gateway-logins", "oauth-conformance-gateway-logins"},
	} {
		t.Run(client.name, func(t *testing.T) {
			t.Parallel()
			results := map[string][2]int{}
			var out strings.Builder
			for _, suite := range []string{"auth", "draft", "backcompat", "extensions"} {
				ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
				full := append([]string{"unshare", "-n", "sh", "-c", `ip link set lo up && exec "$@"`, "sh"}, argv...)
				full = append(full, "client", "--command", self, "--suite", suite, "--timeout", "60000")
				began := time.Now()
				stdout, stderr, _ := peertest.Run(ctx, t, "", full, envMainServer+"="+client.mode, envSwitchboardBin+"="+bin)
				cancel()
				t.Logf("conformance client --suite %s through the %s: %v", suite, client.name, time.Since(began).Round(time.Millisecond))
				out.WriteString(stdout + stderr)
				for _, m := range conformanceLineRE.FindAllStringSubmatch(stdout+stderr, -1) {
					p, _ := strconv.Atoi(m[2])
					f, _ := strconv.Atoi(m[3])
					results[m[1]] = [2]int{p, f}
				}
			}
			notApplicable := func(n string) (string, bool) {
				why, ok := oauthNotApplicable[n]
				return why, ok
			}
			for _, n := range oauthScenarios {
				r, ok := results[n]
				if _, na := notApplicable(n); na {
					continue
				}
				switch {
				case !ok:
					t.Errorf("%-45s did not run", n)
				case r[1] > 0 || r[0] == 0:
					t.Errorf("%-45s %2d passed %2d failed", n, r[0], r[1])
				default:
					t.Logf("%-45s %2d passed", n, r[0])
				}
			}
			var names []string
			for n := range results {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if why, ok := notApplicable(n); ok {
					t.Logf("%-45s %2d passed %2d failed  (does not apply: %s)", n, results[n][0], results[n][1], why)
				} else if !slices.Contains(oauthScenarios, n) {
					t.Errorf("%s: a scenario this test does not know; add it to oauthScenarios or oauthNotApplicable", n)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out.String())
			}
		})
	}
}

func TestRelayOAuthUsageErrors(t *testing.T) {
	t.Setenv("SWITCHBOARD_RELAY_OAUTH_UNSET", "")
	os.Unsetenv("SWITCHBOARD_RELAY_OAUTH_UNSET")
	u := "http://127.0.0.1:9/mcp"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"oauth without url", []string{"--agentcore-arn", "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/x", "--oauth"}, "the --oauth flags need --url"},
		{"bad grant", []string{"--url", u, "--oauth-grant", "password"}, "unknown grant"},
		{"client credentials without a client", []string{"--url", u, "--oauth-grant", "client_credentials"}, "needs a client id and a secret or a key"},
		{"unset secret", []string{"--url", u, "--oauth-client-id", "x", "--oauth-client-secret", "${SWITCHBOARD_RELAY_OAUTH_UNSET}"}, "${SWITCHBOARD_RELAY_OAUTH_UNSET} is not set"},
		{"redirect not loopback", []string{"--url", u, "--login", "--oauth-redirect-url", "https://example.com/cb"}, "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := runRelay(append(tc.args, "--oauth-state-dir", t.TempDir()), strings.NewReader(""), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestRelayOAuthNeedsLogin: without --login and without stored tokens, the
// relay does not send the server anything it would refuse, and its error
// says to log in with --login.
func TestRelayOAuthNeedsLogin(t *testing.T) {
	as := oauthtest.Start(t)
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	var stdout, stderr strings.Builder
	code := runRelay([]string{"--url", as.MCPURL, "--oauth", "--oauth-state-dir", t.TempDir(), "--transport", "http"}, in, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), `"error"`) || !strings.Contains(stdout.String(), "switchboard relay --url "+as.MCPURL+" --login") {
		t.Errorf("exit %d; want the client's initialize answered with an error naming the login command:\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if n := as.Rejected.Load(); n != 0 {
		t.Errorf("the server refused %d requests: the relay sent them without a token", n)
	}
}
