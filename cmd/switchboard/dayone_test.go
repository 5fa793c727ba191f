package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDayOneLogHasNoWarn runs the real binary as a new user would on day
// one: the bundled example config (examples/switchboard.yaml, its server
// run with `go run`), 100 calls (half to /example/mcp, half through the
// aggregated /mcp), a client that leaves in the middle of a call, another
// that hangs up on a listing, then SIGTERM. The log has no WARN or ERROR
// line; start-up names the URLs served and the features on; the audit log
// is in its own file (the state directory), not interleaved on stderr.
func TestDayOneLogHasNoWarn(t *testing.T) {
	bin := buildBinary(t)
	cfg, err := filepath.Abs(filepath.Join("..", "..", "examples", "switchboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-format", "json")
	// The example server is `go run`: the go command this test runs with.
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "STATE_DIRECTORY=", "LOG_FILE=", "LOG_FORMAT=", "JOURNAL_STREAM=",
		"PATH="+filepath.Join(runtime.GOROOT(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var mu sync.Mutex
	var lines []string // guarded by mu
	listening := make(chan map[string]any, 1)
	read := make(chan struct{})
	go func() { // ends when the binary's stderr closes
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			mu.Lock()
			lines = append(lines, l)
			mu.Unlock()
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "switchboard listening" {
				select {
				case listening <- rec:
				default:
				}
			}
		}
	}()
	go func() { <-read; exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	dump := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}

	var start map[string]any
	select {
	case start = <-listening:
	case err := <-exited:
		stopped = true
		t.Fatalf("exited before listening: %v\n%s", err, dump())
	case <-time.After(60 * time.Second):
		t.Fatalf("no listening line in 60 s:\n%s", dump())
	}
	base, _ := start["mcp"].(string)
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/mcp") {
		t.Fatalf("listening line %v: want the /mcp URL", start)
	}
	if d, _ := start["destination_urls"].([]any); len(d) != 1 || d[0] != strings.TrimSuffix(base, "/mcp")+"/example/mcp" {
		t.Errorf("listening line's destination_urls = %v; want the example's /example/mcp", start["destination_urls"])
	}
	base = strings.TrimSuffix(base, "/mcp")

	// The example server is compiled on its first start: generous bounds.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	connect := func(path string, opts *mcp.ClientOptions) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "day-one", Version: "1"}, opts)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + path, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("connect %s: %v\n%s", path, err, dump())
		}
		return cs
	}
	direct, merged := connect("/example/mcp", nil), connect("/mcp", nil)
	for i := range 100 {
		cs, tool := direct, "echo"
		if i%2 == 1 {
			cs, tool = merged, "example__echo"
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": fmt.Sprint("hi ", i)}})
		if err != nil || res.IsError {
			t.Fatalf("call %d (%s): %v %+v\n%s", i, tool, err, res, dump())
		}
	}

	// A client that leaves in the middle of a call: at its first progress
	// notification it gives up (the SDK cancels the call) and goes away.
	progressed := make(chan struct{}, 1)
	leaver := connect("/mcp", &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		select {
		case progressed <- struct{}{}:
		default:
		}
	}})
	cctx, stopCall := context.WithCancel(ctx)
	callDone := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "example__countdown", Arguments: map[string]any{"n": 30}}
		params.SetProgressToken("leaving")
		_, err := leaver.CallTool(cctx, params)
		callDone <- err
	}()
	select {
	case <-progressed:
	case <-ctx.Done():
		t.Fatalf("no progress from the countdown\n%s", dump())
	}
	stopCall()
	if err := <-callDone; err == nil {
		t.Error("the abandoned countdown returned no error")
	}
	_ = leaver.Close()

	// A client that hangs up on a listing: a raw initialize on /mcp, then
	// tools/list with the connection closed as soon as it is sent.
	hangUp := func() {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hang-up","version":"1"}}}`
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		lctx, stop := context.WithCancel(ctx)
		req, _ = http.NewRequestWithContext(lctx, "POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		// Cancelled once the request is written: the client is gone
		// while the gateway lists.
		req = req.WithContext(httptrace.WithClientTrace(lctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { stop() },
		}))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		} else if !errors.Is(err, context.Canceled) {
			t.Errorf("tools/list: %v", err)
		}
		stop()
	}
	hangUp()
	if err := direct.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := merged.Close(); err != nil {
		t.Errorf("close: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit within 30 s of SIGTERM\n%s", dump())
	}

	auditPath := filepath.Join(state, "switchboard", "audit.jsonl")
	var features map[string]any
	var bad []string
	for _, l := range strings.Split(dump(), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("a stderr line that is not a JSON log record: %q", l)
			continue
		}
		if _, ok := rec["mcp_method"]; ok {
			t.Errorf("an audit line on stderr: %s", l)
		}
		switch rec["level"] {
		case "WARN", "ERROR":
			bad = append(bad, l)
		}
		if rec["msg"] == "switchboard features" {
			features = rec
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d WARN or ERROR lines in a day-one log:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	if features == nil || features["auth"] != "off" || features["tracing"] != "off" || features["code_mode"] != "off" ||
		!strings.HasPrefix(fmt.Sprint(features["reload"]), "on") || features["audit"] != auditPath {
		t.Errorf("features line %v; want auth, tracing and code mode off, reload on, audit in %s", features, auditPath)
	}
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	calls := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		if tool := rec["tool"]; rec["mcp_method"] == "tools/call" && rec["destination"] == "example" && rec["error"] == nil &&
			(tool == "echo" || tool == "example__echo") {
			calls++
		}
	}
	if calls != 100 {
		t.Errorf("%d successful echo calls for example in the audit log; want 100 (both paths)", calls)
	}
	if t.Failed() {
		t.Logf("log:\n%s", dump())
	}
}
