package main

// Tests of the switchboard command: `check` and `version` in process, and an
// end-to-end run of the real binary (built with go build) serving two stdio
// destinations whose server is this test binary re-executed
// (SWITCHBOARD_MAIN_TEST_SERVER), stopped with SIGTERM: it must exit 0 and
// leave no process behind, grandchildren included.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"

	"github.com/switchboard-mcp/switchboard/internal/sandbox"
)

const envMainServer = "SWITCHBOARD_MAIN_TEST_SERVER"

func TestMain(m *testing.M) {
	sandbox.WorkerMain()       // code mode's workers are this binary
	peertest.StdioServerMain() // TestLargeCallsMemory's child
	switch mode := os.Getenv(envMainServer); mode {
	case "":
		// The binaries these tests run write their audit log to the
		// default file in the state directory: a temporary one, not the
		// home directory's.
		state, err := os.MkdirTemp("", "switchboard-state-")
		if err != nil {
			panic(err)
		}
		os.Setenv("XDG_STATE_HOME", state)
		os.Unsetenv("STATE_DIRECTORY")
		code := m.Run()
		if built.path != "" {
			_ = os.RemoveAll(filepath.Dir(built.path))
		}
		_ = os.RemoveAll(state)
		os.Exit(code)
	case "oauth-conformance-client":
		os.Exit(oauthConformanceClient())
	case "oauth-conformance-gateway":
		os.Exit(oauthConformanceGateway(true))
	case "oauth-conformance-gateway-logins":
		os.Exit(oauthConformanceGateway(false))
	case "browser":
		os.Exit(oauthBrowser())
	case "sleep":
		// A grandchild that does nothing but wait to be killed with its
		// process group; it gives up by itself in the end.
		time.Sleep(2 * time.Minute)
		os.Exit(0)
	default:
		os.Exit(miniServer(mode))
	}
}

// miniServer is a minimal stdio MCP server: initialize, ping, tools/list
// and tools/call echo. Mode "grandchild" first starts a sleeping child of
// its own (in its process group, as npx's node would be).
func miniServer(mode string) int {
	if mode == "grandchild" {
		exe, _ := os.Executable()
		c := exec.Command(exe)
		c.Env = append(os.Environ(), envMainServer+"=sleep")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "miniserver: grandchild:", err)
			return 1
		}
	}
	type msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Method  string          `json:"method,omitempty"`
		Params  json.RawMessage `json:"params,omitempty"`
		Result  any             `json:"result,omitempty"`
		Error   any             `json:"error,omitempty"`
	}
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for in.Scan() {
		var m msg
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue // notifications and responses
		}
		r := msg{JSONRPC: "2.0", ID: m.ID}
		switch m.Method {
		case "initialize":
			r.Result = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "miniserver", "version": "1"}}
		case "ping":
			r.Result = map[string]any{}
		case "tools/list":
			r.Result = map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			var p struct {
				Arguments struct{ Text string } `json:"arguments"`
			}
			_ = json.Unmarshal(m.Params, &p)
			r.Result = map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("%s|%d", p.Arguments.Text, os.Getpid())}}}
		default:
			r.Error = map[string]any{"code": -32601, "message": "method not found"}
		}
		if err := out.Encode(r); err != nil {
			return 1
		}
	}
	return 0
}

// ---------------------------------------------------------------------------
// check and version, in process

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

const goodConfig = `listen: 127.0.0.1:8080
timeout: 10s
restart:
  delays: [100ms, 1s]
destinations:
  files:
    type: stdio
    command: [cat, --root, /srv]
    isolation: session
  notes:
    type: stdio
    command: sh --stdio
    env:
      NOTES_DIR: /tmp/notes
`

func TestCheckGoodConfig(t *testing.T) {
	p := writeFile(t, "switchboard.yaml", goodConfig)
	for _, args := range [][]string{{"check", "--config", p}, {"check", p}} {
		code, out, errOut := runCmd(args...)
		if code != 0 || !strings.Contains(out, "ok (2 destinations)") || errOut != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

func TestCheckBadConfigPrintsEveryError(t *testing.T) {
	p := writeFile(t, "bad.yaml", `listen: 127.0.0.1:99999
bogus_key: 1
timeout: -5s
destinations:
  good:
    type: stdio
    command: [echo]
  nocmd:
    type: stdio
  iso:
    type: stdio
    command: [echo]
    isolation: sometimes
`)
	code, out, errOut := runCmd("check", "--config", p)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing on stdout", code, out)
	}
	for _, want := range []string{
		p + ":1: listen",
		p + `:2: unknown key "bogus_key"`,
		p + ":3: timeout: must not be negative",
		p + ":8: destinations.nocmd: command is required",
		p + `:13: destinations.iso: unknown isolation "sometimes"`,
		p + ": 5 error(s)",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if n := strings.Count(strings.TrimSpace(errOut), "\n") + 1; n != 6 {
		t.Errorf("stderr has %d lines, want 5 errors and a summary:\n%s", n, errOut)
	}
}

func TestCheckUsageErrors(t *testing.T) {
	if code, _, errOut := runCmd("check"); code != 2 || !strings.Contains(errOut, "--config is required") {
		t.Fatalf("check without a config: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd("check", "--config", filepath.Join(t.TempDir(), "missing.yaml")); code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("check of a missing file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd("frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd(); code != 2 || !strings.Contains(errOut, "usage") {
		t.Fatalf("no command: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd("serve"); code != 2 || !strings.Contains(errOut, "--config is required") {
		t.Fatalf("serve without a config: exit %d, %q", code, errOut)
	}
}

// TestCheckWarnings: a command that cannot be started here is a warning
// on stderr, not an error: exit 0, "ok" on stdout.
func TestCheckWarnings(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, "switchboard.yaml", "destinations:\n  gone:\n    type: stdio\n    command: [/nonexistent/server]\n"+
		"  plain:\n    type: stdio\n    command: ["+script+"]\n  fine:\n    type: stdio\n    command: [cat]\n")
	code, out, errOut := runCmd("check", p)
	if code != 0 || out != p+": ok (3 destinations)\n" {
		t.Fatalf("exit %d, stdout %q; want 0 and ok", code, out)
	}
	want := p + ":4: warning: destinations.gone: command \"/nonexistent/server\" does not exist\n" +
		p + ":7: warning: destinations.plain: command \"" + script + "\" is not executable (chmod +x " + script + ")\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
}

// TestUnknownFlagExits2: every subcommand refuses a flag it does not have,
// and an argument it does not take (which would hide a flag after it),
// with exit status 2 and a message.
func TestUnknownFlagExits2(t *testing.T) {
	p := writeFile(t, "switchboard.yaml", goodConfig)
	for _, args := range [][]string{
		{"serve", "--config", p, "--bogus"},
		{"serve", "--config", p, "extra", "--bogus"},
		{"check", "--config", p, "--bogus"},
		{"check", p, "--bogus"},
		{"check", p, "other.yaml"},
		{"relay", "--url", "http://127.0.0.1:1/mcp", "--bogus"},
		{"relay", "--url", "http://127.0.0.1:1/mcp", "extra"},
		{"agentcore", "--bogus"},
		{"health", "--bogus"},
		{"health", "extra"},
		{"version", "--json"},
		{"version", "extra"},
		{"--version", "--json"},
	} {
		code, out, errOut := runCmd(args...)
		if code != 2 || out != "" || !(strings.Contains(errOut, "flag provided but not defined: -") || strings.Contains(errOut, "unexpected argument")) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, nothing on stdout and the reason", args, code, out, errOut)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, _ := runCmd(arg)
		if code != 0 || !regexp.MustCompile(`^switchboard \S+ \((commit \w+(-dirty)?, )?(built \S+, )?go\S+ \w+/\w+\)\n$`).MatchString(out) {
			t.Fatalf("%s: exit %d, %q", arg, code, out)
		}
	}
}

// ---------------------------------------------------------------------------
// The real binary

var built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildBinary builds the switchboard binary once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "switchboard")
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			goBin = "go"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goBin, "build", "-o", built.path, ".")
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

// The real binary's exit codes.
func TestBinaryCheckAndVersion(t *testing.T) {
	bin := buildBinary(t)
	good := writeFile(t, "good.yaml", goodConfig)
	bad := writeFile(t, "bad.yaml", "destinations:\n  x:\n    type: stdio\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "--config", good}, 0, "ok (2 destinations)"},
		{[]string{"check", "--config", bad}, 1, "command is required"},
		{[]string{"version"}, 0, "switchboard "},
	} {
		out, err := exec.Command(bin, c.args...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(string(out), c.want) {
			t.Fatalf("switchboard %v: exit %d, output %q; want %d and %q", c.args, code, out, c.code, c.want)
		}
	}
}

// procInfo returns the parent pid and state of pid.
func procInfo(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0][0], true
}

// alive: exists and is not a zombie (a zombie has exited; reaping an
// orphan is init's business).
func alive(pid int) bool {
	_, st, ok := procInfo(pid)
	return ok && st != 'Z'
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, st, ok := procInfo(p); ok && pp == pid && st != 'Z' {
			out = append(out, p)
		}
	}
	return out
}

func mcpPost(t *testing.T, client *http.Client, url, sid string, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// serve --config with two stdio destinations (shared and per-session
// isolation), several sessions, then SIGTERM: exit 0, and every process the
// binary started (children and their children) is gone.
func TestServeSIGTERMLeavesNoOrphans(t *testing.T) {
	bin := buildBinary(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	q := strconv.Quote
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
restart:
  delays: [50ms]
destinations:
  shared:
    type: stdio
    command: [%s]
    env:
      %s: grandchild
      GORACE: atexit_sleep_ms=0
  perses:
    type: stdio
    command: [%s]
    isolation: session
    env:
      %s: grandchild
      GORACE: atexit_sleep_ms=0
`, q(exe), envMainServer, q(exe), envMainServer)
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	var stderrText peertest.Buffer
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.Stdout = &stderrText
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	var tracked []int // every process to be sure is gone at the end
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for _, p := range tracked {
			if alive(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("switchboard output:\n%s", stderrText.String())
		}
	})
	addrc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="switchboard listening" addr=(\S+)`)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			stderrText.Write([]byte(line + "\n"))
			if m := re.FindStringSubmatch(line); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	var base string
	select {
	case addr := <-addrc:
		base = "http://" + addr
	case err := <-exited:
		t.Fatalf("switchboard exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("switchboard did not report its listen address")
	}

	tr := &http.Transport{Proxy: nil}
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	var sids []string
	for _, d := range []string{"shared", "perses"} {
		for i := 0; i < 3; i++ {
			url := base + "/" + d + "/mcp"
			resp, body := mcpPost(t, client, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			sid := resp.Header.Get("Mcp-Session-Id")
			if resp.StatusCode != 200 || sid == "" {
				t.Fatalf("initialize %s: %d %s", d, resp.StatusCode, body)
			}
			sids = append(sids, sid)
			if r, b := mcpPost(t, client, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != 202 {
				t.Fatalf("initialized: %d %s", r.StatusCode, b)
			}
			text := fmt.Sprintf("%s-%d", d, i)
			if r, b := mcpPost(t, client, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`+text+`"}}}`); r.StatusCode != 200 || !bytes.Contains(b, []byte(text+"|")) {
				t.Fatalf("echo: %d %s", r.StatusCode, b)
			}
		}
	}
	// A GET stream open at shutdown must end.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	greq, _ := http.NewRequestWithContext(ctx, "GET", base+"/perses/mcp", nil)
	greq.Header.Set("Accept", "text/event-stream")
	greq.Header.Set("Mcp-Session-Id", sids[3])
	gresp, err := (&http.Client{Transport: tr}).Do(greq)
	if err != nil || gresp.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, gresp)
	}
	streamDone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, gresp.Body); gresp.Body.Close(); close(streamDone) }()

	// The stdio reaper is a child too; it must be gone at the end as well.
	children, reapers := splitReapers(childrenOf(cmd.Process.Pid))
	var grandchildren []int
	for _, c := range children {
		grandchildren = append(grandchildren, childrenOf(c)...)
	}
	tracked = append(append(append(tracked, children...), grandchildren...), reapers...)
	// One shared process and one per session of "perses"; each has a
	// sleeping child of its own.
	if len(children) != 4 || len(grandchildren) != 4 {
		t.Fatalf("switchboard has children %v and grandchildren %v, want 4 of each", children, grandchildren)
	}
	tr.CloseIdleConnections()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("switchboard exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("switchboard did not exit within 20s of SIGTERM")
	}
	select {
	case <-streamDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the GET stream was not closed at shutdown")
	}
	// Polling with a deadline: the one way to see a process gone.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []int
		for _, p := range tracked {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind after switchboard exited: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Without GOMAXPROCS, Switchboard takes half the CPUs Go would (at least
// one); with it, what it says.
func TestSetMaxProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	t.Setenv("GOMAXPROCS", "")
	os.Unsetenv("GOMAXPROCS")
	setMaxProcs()
	if got, want := runtime.GOMAXPROCS(0), max(1, prev/2); got != want {
		t.Errorf("GOMAXPROCS unset: %d, want %d", got, want)
	}
	runtime.GOMAXPROCS(prev)
	t.Setenv("GOMAXPROCS", "7")
	setMaxProcs()
	if got := runtime.GOMAXPROCS(0); got != prev {
		t.Errorf("GOMAXPROCS set: changed to %d", got)
	}
}
