package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// TestCheckDestinationsConfigEnv: without --config, check reads the file
// DESTINATIONS_CONFIG names (mithril-proxy's variable); --config wins.
func TestCheckDestinationsConfigEnv(t *testing.T) {
	good := writeFile(t, "destinations.yml", "destinations:\n  wiki: https://wiki.example.com\n")
	bad := writeFile(t, "bad.yml", "destinations:\n  x:\n    type: stdio\n")
	t.Setenv("DESTINATIONS_CONFIG", good)
	if code, out, errOut := runCmd("check"); code != 0 || !strings.Contains(out, good+": ok (1 destinations)") {
		t.Errorf("check with DESTINATIONS_CONFIG: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv("DESTINATIONS_CONFIG", bad)
	if code, out, errOut := runCmd("check", "--config", good); code != 0 || !strings.Contains(out, good+": ok") {
		t.Errorf("--config over DESTINATIONS_CONFIG: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("check"); code != 1 || !strings.Contains(errOut, "command is required") {
		t.Errorf("check with a bad DESTINATIONS_CONFIG: exit %d, %q", code, errOut)
	}
	t.Setenv("DESTINATIONS_CONFIG", "")
	if code, _, errOut := runCmd("serve"); code != 2 || !strings.Contains(errOut, "--config is required (or set DESTINATIONS_CONFIG)") {
		t.Errorf("serve without a config: exit %d, %q", code, errOut)
	}
}

// mutedServer is a stdio MCP server in sh: it answers initialize with the
// value of $TOKEN as its version, and never answers anything else.
const mutedServer = `while IFS= read -r line; do
  case "$line" in
  *'"method":"initialize"'*)
    id=$(printf '%s' "$line" | sed -n 's/.*"id":\([^,}]*\).*/\1/p')
    printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"muted","version":"%s"}}}\n' "$id" "$TOKEN";;
  esac
done`

// TestServeMithrilEnv runs the real binary as mithril-proxy's deployment
// did: no flags but the environment. DESTINATIONS_CONFIG names the config,
// SECRETS_CONFIG a secrets file elsewhere (its TOKEN reaches the server),
// LOG_FILE the log (a FIFO here, so the test reads the listen address from
// it) and STDIO_RESPONSE_TIMEOUT_SECS overrides the file's 60 s timeout.
func TestServeMithrilEnv(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "destinations.yml")
	cfg := "listen: 127.0.0.1:0\ntimeout: 60s\ndestinations:\n  muted:\n    type: stdio\n    command: [sh, -c, " + strconv.Quote(mutedServer) + "]\n"
	secrets := filepath.Join(dir, "private", "secrets.yml")
	logPath := filepath.Join(dir, "proxy.log")
	if err := os.Mkdir(filepath.Dir(secrets), 0o700); err != nil {
		t.Fatal(err)
	}
	for p, text := range map[string]string{cfgPath: cfg, secrets: "muted:\n  TOKEN: tok-from-secrets-config\n"} {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(logPath, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DESTINATIONS_CONFIG="+cfgPath, "SECRETS_CONFIG="+secrets,
		"LOG_FILE="+logPath, "STDIO_RESPONSE_TIMEOUT_SECS=0.5")
	var stderr peertest.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Opened read-write, the FIFO neither blocks the open nor reads EOF
	// before switchboard opens it; non-blocking, reads go through the
	// poller, so closing the file ends the reader.
	fd, err := syscall.Open(logPath, syscall.O_RDWR|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	logFile := os.NewFile(uintptr(fd), logPath)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		if t.Failed() {
			t.Logf("switchboard stdout/stderr:\n%s", stderr.String())
		}
	})
	var logText peertest.Buffer
	addrc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="switchboard listening" addr=(\S+)`)
		sc := bufio.NewScanner(logFile)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			logText.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
	}()
	var base string
	select {
	case addr := <-addrc:
		base = "http://" + addr
	case err := <-exited:
		t.Fatalf("switchboard exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no listen address in LOG_FILE within 30s; stderr:\n%s", stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "switchboard listening") {
		t.Errorf("the log went to stderr too, despite LOG_FILE:\n%s", s)
	}

	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 20 * time.Second}
	url := base + "/muted/mcp"
	resp, body := mcpPost(t, client, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" || !bytes.Contains(body, []byte(`"version":"tok-from-secrets-config"`)) {
		t.Fatalf("initialize: %d %s; want the TOKEN of SECRETS_CONFIG's file in serverInfo", resp.StatusCode, body)
	}
	if r, b := mcpPost(t, client, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != 202 {
		t.Fatalf("initialized: %d %s", r.StatusCode, b)
	}
	began := time.Now()
	_, body = mcpPost(t, client, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	took := time.Since(began)
	if !bytes.Contains(body, []byte("within 500ms")) || took > 15*time.Second {
		t.Errorf("tools/call to a server that never answers: %s after %v; want the 0.5 s timeout of STDIO_RESPONSE_TIMEOUT_SECS, not the file's 60 s", body, took)
	}

	// /health answers like mithril-proxy's.
	hr, err := client.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	hb := new(bytes.Buffer)
	_, _ = hb.ReadFrom(hr.Body)
	hr.Body.Close()
	if hr.StatusCode != 200 || !strings.HasPrefix(hb.String(), `{"status":"ok"`) {
		t.Errorf("GET /health: %d %s", hr.StatusCode, hb)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("switchboard exited with %v after SIGTERM", err)
		}
	case <-ctx.Done():
		t.Errorf("switchboard did not exit within 20s of SIGTERM")
	}
	if s := logText.String(); strings.Contains(s, "tok-from-secrets-config") {
		t.Errorf("the secret reached the log:\n%s", s)
	}
}
