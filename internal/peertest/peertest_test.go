package peertest

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests prove the harness against the real peers, with no Switchboard in between: the
// figures asserted here are the ones the same suites must show through Switchboard
// (shared/docs/testing.md). All but TestParseTotal need ./scripts/install-peers.sh and are skipped
// with -short.

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real peers; skipped with -short")
	}
}

func TestParseTotal(t *testing.T) {
	out := "✗ tasks-wire-fields: 1 passed, 3 failed\n✓ json: 8 passed, 0 failed\n\nTotal: 165 passed, 30 failed\n"
	p, f, ok := ParseTotal(out)
	if !ok || p != 165 || f != 30 {
		t.Fatalf("ParseTotal = %d, %d, %v; want 165, 30, true", p, f, ok)
	}
	if _, _, ok := ParseTotal("✓ json: 8 passed, 0 failed\n"); ok {
		t.Fatal("ParseTotal found a Total line in per-scenario lines")
	}
}

func TestDirFindsRepoRoot(t *testing.T) {
	t.Setenv("SWITCHBOARD_PEERS", "")
	d := Dir()
	if filepath.Base(d) != ".cache" || !filepath.IsAbs(d) {
		t.Fatalf("Dir() = %q, want an absolute <repo>/.cache", d)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(d), "go.mod")); err != nil {
		t.Fatalf("Dir() = %q: no go.mod beside it: %v", d, err)
	}
}

func TestPeersInstalled(t *testing.T) {
	skipShort(t)
	out, _, err := Run(context.Background(), t, "", []string{Node(t), "--version"})
	if err != nil || !strings.HasPrefix(out, "v22.") {
		t.Fatalf("node --version = %q, %v; want v22.x", out, err)
	}
	for _, v := range []string{ConformanceStable, ConformanceNext} {
		if argv := Conformance(t, v); len(argv) != 2 {
			t.Errorf("Conformance(%s) = %q", v, argv)
		}
	}
	if argv, dir := InspectorCLI(t); len(argv) != 2 || dir == "" {
		t.Errorf("InspectorCLI = %q, %q", argv, dir)
	}
	if argv := ServerEverythingTS(t); len(argv) != 3 || argv[2] != "stdio" {
		t.Errorf("ServerEverythingTS = %q", argv)
	}
	if argv := ServerFilesystemTS(t, "/tmp"); len(argv) != 3 || argv[2] != "/tmp" {
		t.Errorf("ServerFilesystemTS = %q", argv)
	}
	if argv := ServerMemoryTS(t); len(argv) != 2 {
		t.Errorf("ServerMemoryTS = %q", argv)
	}
	EverythingServer(t)
}

// failedScenarioRE matches a per-scenario summary line with failures, e.g. "✗ tasks-lifecycle: 1 passed, 3 failed".
var failedScenarioRE = regexp.MustCompile(`(?m)^\S+ (\S+): \d+ passed, [1-9]\d* failed`)

func TestConformanceAgainstEverythingServer(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	stateful, srv := StartEverythingServer(t, false)
	if !strings.HasPrefix(stateful, "http://127.0.0.1:") || !strings.HasSuffix(stateful, "/mcp") {
		t.Fatalf("StartEverythingServer URL = %q", stateful)
	}
	stateless, _ := StartEverythingServer(t, true)

	cases := []struct {
		name, version, url string
		extra              []string
		wantPassed         int
		exact              bool // else: at least wantPassed, failures only in tasks-* (extension) scenarios
	}{
		{"0.1.16/stateful", ConformanceStable, stateful, nil, 40, true},
		{"0.2.0-alpha.12/2025-11-25/stateful", ConformanceNext, stateful, []string{"--requirements", "2025-11-25"}, 82, true},
		{"0.2.0-alpha.12/2026-07-28/stateless", ConformanceNext, stateless, []string{"--requirements", "2026-07-28"}, 165, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			passed, failed, out, err := RunConformance(ctx, t, c.version, c.url, c.extra...)
			t.Logf("%s: %d passed / %d failed in %v", c.name, passed, failed, time.Since(start).Round(time.Millisecond))
			if err != nil {
				t.Fatalf("RunConformance: %v\n%s", err, out)
			}
			if c.exact {
				if passed != c.wantPassed || failed != 0 {
					t.Fatalf("got %d passed, %d failed; want %d passed, 0 failed\n%s", passed, failed, c.wantPassed, out)
				}
				return
			}
			if passed < c.wantPassed {
				t.Fatalf("got %d passed, want >= %d\n%s", passed, c.wantPassed, out)
			}
			bad := failedScenarioRE.FindAllStringSubmatch(out, -1)
			if failed > 0 && len(bad) == 0 {
				t.Errorf("%d failed but no failing scenario line found in the output", failed)
			}
			for _, m := range bad {
				if !strings.HasPrefix(m[1], "tasks-") {
					t.Errorf("scenario %s failed; only tasks-* (extension) failures are expected", m[1])
				}
			}
			if t.Failed() {
				t.Log(out)
			}
		})
	}

	// Stop kills by PID and reaps: the PID is gone afterwards.
	pid := srv.Process.Pid
	srv.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("everything-server pid %d still there after Stop: kill(pid, 0) = %v", pid, err)
	}
}

// RunConformance must not hang on a server that accepts connections and never answers.
func TestRunConformanceKilledAtDeadline(t *testing.T) {
	skipShort(t)
	Conformance(t, ConformanceStable) // skip/fail early if not installed

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, _, out, err := RunConformance(ctx, t, ConformanceStable, "http://"+l.Addr().String()+"/mcp")
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunConformance against a silent server: err = %v, want deadline exceeded\n%s", err, out)
	}
	if elapsed > 2*time.Second+waitDelay+2*time.Second {
		t.Fatalf("RunConformance returned %v after the 2 s deadline", elapsed)
	}
}

func TestInspectorCLIAgainstServerEverythingTS(t *testing.T) {
	skipShort(t)
	argv, dir := InspectorCLI(t)
	server := ServerEverythingTS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	list := append(append(append([]string{}, argv...), server...), "--method", "tools/list")
	out, errOut, err := Run(ctx, t, dir, list)
	if err != nil {
		t.Fatalf("inspector-cli tools/list: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &tools); err != nil {
		t.Fatalf("tools/list output is not JSON: %v\n%s", err, out)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(","+strings.Join(names, ",")+",", ",echo,") {
		t.Fatalf("tools/list = %v, want echo among them", names)
	}

	call := append(append(append([]string{}, argv...), server...),
		"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi")
	out, errOut, err = Run(ctx, t, dir, call)
	if err != nil {
		t.Fatalf("inspector-cli tools/call: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(out, "Echo: hi") {
		t.Fatalf("tools/call echo output = %s, want \"Echo: hi\"", out)
	}
}
