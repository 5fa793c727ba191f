package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// The real binary under a 256-descriptor limit (prlimit), with 300 client
// connections kept alive and idle: /healthz on a new connection is still
// answered, at once, and the process never runs out of descriptors (its
// connection cap, ¾ of the limit, closes the connections idle longest).
// Before the cap, accept failed with "too many open files" for good and
// /healthz was never answered.
func TestFdLimitKeepsHealthzReachable(t *testing.T) {
	bin := buildBinary(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\ndestinations:\n  d:\n    type: stdio\n    command: [%s]\n    env:\n      %s: plain\n      GORACE: atexit_sleep_ms=0\n",
		strconv.Quote(exe), envMainServer)
	cfgPath := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prlimit, "--nofile=256:256", bin, "serve", "--config", cfgPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	var out peertest.Buffer
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // prlimit execs the binary: this is its pid
		<-exited
		if t.Failed() {
			t.Logf("switchboard output:\n%s", out.String())
		}
	})
	addrc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="switchboard listening" addr=(\S+)`)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-exited:
		t.Fatalf("switchboard exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("switchboard did not report its listen address")
	}

	// 300 connections, each with one request and then idle (kept alive).
	const n = 300
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for i := range 3 {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("/healthz %d with %d idle connections open: %v", i, n, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz %d: HTTP %d", i, resp.StatusCode)
		}
	}
	if fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid)); len(fds) >= 256 {
		t.Errorf("switchboard holds %d descriptors, at its limit of 256", len(fds))
	}
	select {
	case err := <-exited:
		t.Fatalf("switchboard exited: %v", err)
	default:
	}
}
