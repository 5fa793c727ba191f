package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

func TestAgentCoreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", map[string]string{"MCP_SERVER_CMD": ""}, nil, "no server command"},
		{"unbalanced quote", map[string]string{"MCP_SERVER_CMD": `python "server.py`}, nil, "MCP_SERVER_CMD: unbalanced double quote"},
		{"bad contract", nil, []string{"--contract", "ws", "--", "x"}, `--contract "ws": want mcp, http or both`},
		{"bad LOG_LEVEL", map[string]string{"LOG_LEVEL": "LOUD"}, []string{"--", "x"}, `LOG_LEVEL "LOUD": want debug, info, warn or error`},
		{"bad flag", nil, []string{"--nope"}, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCmd(append([]string{"agentcore"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr, tc.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q", stdout)
			}
		})
	}
}

func TestAgentCoreLogLevelAndEnv(t *testing.T) {
	for in, want := range map[string]string{"DEBUG": "debug", "WARNING": "warn", "critical": "error", "Info": "info"} {
		t.Setenv("LOG_LEVEL", in)
		if got, err := agentcoreLogLevel(""); got != want || err != nil {
			t.Errorf("LOG_LEVEL=%s: %q, %v; want %q", in, got, err, want)
		}
	}
	if got, _ := agentcoreLogLevel("error"); got != "error" {
		t.Errorf("--log-level error: %q", got)
	}
	env := agentcoreEnv([]string{"AWS_REGION=eu-west-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://x", "SECRET=s", "MINE=1", "MCP_SERVER_CMD=x"}, []string{"MINE"})
	if len(env) != 3 || env["AWS_REGION"] != "eu-west-1" || env["MINE"] != "1" || env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] == "" {
		t.Errorf("child env additions = %v; want the AWS_* variables and MINE only", env)
	}
}

// TestBinaryAgentCore runs the real binary with MCP_SERVER_CMD on 127.0.0.1
// ports: /ping, a call through /invocations and /mcp, and SIGTERM ending it
// and its child.
func TestBinaryAgentCore(t *testing.T) {
	bin := buildBinary(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agentcore", "--mcp-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--pass-env", envMainServer)
	cmd.Env = append(os.Environ(), "MCP_SERVER_CMD="+strconv.Quote(exe)+" -test.run=^$", envMainServer+"=plain",
		"GORACE=atexit_sleep_ms=0", "LOG_LEVEL=INFO")
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	var logs peertest.Buffer
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("switchboard output:\n%s", logs.String())
		}
	})
	addrs := make(chan [2]string, 2)
	go func() {
		re := regexp.MustCompile(`msg="switchboard listening" addr=(\S+) .*serving="agentcore (\w+) contract"`)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- [2]string{m[2], m[1]}
			}
		}
	}()
	byContract := map[string]string{}
	for len(byContract) < 2 {
		select {
		case a := <-addrs:
			byContract[a[0]] = a[1]
		case <-time.After(30 * time.Second):
			t.Fatalf("listeners announced: %v, want the mcp and http contracts", byContract)
		}
	}
	mcpAddr, httpAddr := byContract["mcp"], byContract["http"]
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Get("http://" + httpAddr + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"status":"Healthy"`) {
		t.Errorf("/ping: %s", body)
	}
	for _, url := range []string{"http://" + httpAddr + "/invocations", "http://" + mcpAddr + "/mcp"} {
		resp, _ := mcpPost(t, client, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("%s initialize: HTTP %d, session %q", url, resp.StatusCode, sid)
		}
		_, out := mcpPost(t, client, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"from agentcore"}}}`)
		if !bytes.Contains(out, []byte("from agentcore|")) {
			t.Errorf("%s tools/call echo: %s", url, out)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("switchboard agentcore did not exit within 20s of SIGTERM")
	}
}
