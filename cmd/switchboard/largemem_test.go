package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// Memory bound of large calls (docs/performance.md, "Large messages"):
// each call in flight holds at most about twice its message on the
// gateway (the request as it arrived, the answer as it will leave), plus
// a fixed overhead, and the memory goes back to the system once large
// calls stop.
const (
	largeSize     = 1 << 20 // bytes of echo text per call
	largeInFlight = 16
	largeRounds   = 3
	// largeOverhead is the documented fixed overhead over idle
	// (docs/performance.md, "Large messages"): the buffers' class
	// rounding (at most 1/16: 2 MiB here), the child's line buffer (twice
	// the longest line), the body reader's pooled steps, HTTP buffers, the
	// collector's slack over small objects. Before issue 23 the peak was
	// 45-48 MiB over idle, not 32 + 8.
	largeOverhead = 8 << 20
	// largeSettled is how far above idle the resident set may stay once
	// large calls stopped (bigbuf returns memory after bigbuf.IdleRelease).
	largeSettled = 6 << 20
)

// The gateway, the real binary, serves 16 concurrent 1 MiB echo calls
// (request and answer both about 1 MiB), three times over: its peak
// resident set (VmHWM) stays within idle + 16 × 2 MiB + largeOverhead,
// and its resident set comes back to within largeSettled of idle after.
func TestLargeCallsMemory(t *testing.T) {
	bin := buildBinary(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "large.yaml")
	// The child is peertest's bulk server, which passes the text through
	// undecoded: quick even when this test binary has the race detector.
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\nmax_sessions: 100\ndestinations:\n  up:\n    type: stdio\n    command: [%s]\n    env:\n      %s: bulk\n      GORACE: atexit_sleep_ms=0\n",
		strconv.Quote(exe), peertest.StdioServerEnv)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs peertest.Buffer
	base := startServe(t, bin, cfgPath, &logs)
	pid := childRunning(t, cfgPath)
	url := base + "/up/mcp"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: largeInFlight}, Timeout: 2 * time.Minute}
	defer client.CloseIdleConnections()

	sids := make([]string, largeInFlight)
	for i := range sids {
		resp, b := mcpPost(t, client, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if resp.StatusCode != 200 {
			t.Fatalf("initialize: %s %s", resp.Status, b)
		}
		sids[i] = resp.Header.Get("Mcp-Session-Id")
		mcpPost(t, client, url, sids[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if resp, b := mcpPost(t, client, url, sids[i], echoCall(2, "warm")); resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"warm"`)) {
			t.Fatalf("small call: %s %.200s", resp.Status, b)
		}
	}
	idle, hwm0 := procMem(t, pid)
	t.Logf("idle: VmRSS %d KiB, VmHWM %d KiB", idle>>10, hwm0>>10)

	text := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkrLw==", largeSize/48+1)[:largeSize]
	for round := range largeRounds {
		var wg sync.WaitGroup
		errs := make(chan string, largeInFlight)
		for i, sid := range sids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, b := mcpPost(t, client, url, sid, echoCall(100+i, text))
				if resp.StatusCode != 200 || len(b) < largeSize || !bytes.Contains(b, []byte(`"id":`+strconv.Itoa(100+i)+`,`)) {
					errs <- fmt.Sprintf("round %d call %d: %s, %d bytes %.200s", round, i, resp.Status, len(b), b)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("%s\nlogs:\n%s", e, logs.String())
		}
	}
	rss, hwm := procMem(t, pid)
	bound := max(idle, hwm0) + largeInFlight*2*largeSize + largeOverhead
	t.Logf("after %d × %d calls of %d KiB: VmHWM %d KiB (bound %d KiB), VmRSS %d KiB", largeRounds, largeInFlight, largeSize>>10, hwm>>10, bound>>10, rss>>10)
	if hwm > bound {
		t.Errorf("peak resident set %d KiB, over idle (%d KiB) + %d × 2 × %d KiB + %d KiB = %d KiB",
			hwm>>10, max(idle, hwm0)>>10, largeInFlight, largeSize>>10, largeOverhead>>10, bound>>10)
	}

	// The memory goes back once large calls stop: poll, bounded.
	stopped := time.Now()
	deadline := stopped.Add(60 * time.Second)
	for {
		rss, _ = procMem(t, pid)
		if rss <= idle+largeSettled {
			t.Logf("resident set back to %d KiB after %v", rss>>10, time.Since(stopped).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resident set still %d KiB 60 s after the large calls, over idle (%d KiB) + %d KiB", rss>>10, idle>>10, largeSettled>>10)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// echoCall is a tools/call of echo with id and text (JSON-safe).
func echoCall(id int, text string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"}}}`
}

// childRunning returns the pid of this test's child process whose command
// line holds arg.
func childRunning(t *testing.T, arg string) int {
	t.Helper()
	for _, pid := range childrenOf(os.Getpid()) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte(arg)) {
			return pid
		}
	}
	t.Fatalf("no child process runs with %s", arg)
	return 0
}

// procMem returns pid's resident set (VmRSS) and its peak (VmHWM), in
// bytes.
func procMem(t *testing.T, pid int) (rss, hwm int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		if err != nil {
			t.Fatalf("%s: %q", k, v)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	return rss, hwm
}
