package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// The real binary is SIGKILLed while it runs a stdio destination whose
// command starts a grandchild (sh -c 'sleep 300 & wait'): nothing in
// Switchboard runs any more, yet the child and the grandchild are gone
// (the reaper of internal/upstream/stdio; Pdeathsig alone ends only the child).
func TestSIGKILLLeavesNoGrandchild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	childFile, gcFile := filepath.Join(dir, "child.pid"), filepath.Join(dir, "grandchild.pid")
	script := fmt.Sprintf(`echo $$ > %s; sleep 300 & echo $! > %s; wait`, childFile, gcFile)
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\ntimeout: 5m\ndestinations:\n  d:\n    type: stdio\n    command: [sh, -c, %s]\n",
		strconv.Quote(script))
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	var out peertest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var pids []int
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		for _, p := range pids {
			if alive(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("switchboard output:\n%s", out.String())
		}
	})
	// The destination starts with the gateway: wait for both pid files.
	readPid := func(path string) int {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if b, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
					return pid
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no pid in %s after 30s", path)
			}
			select {
			case <-exited:
				t.Fatalf("switchboard exited before starting the destination")
			case <-time.After(10 * time.Millisecond): // polling a file, with a deadline
			}
		}
	}
	child := readPid(childFile)
	pids = append(pids, child)
	grandchild := readPid(gcFile)
	pids = append(pids, grandchild)
	if !alive(child) || !alive(grandchild) {
		t.Fatalf("child %d alive %v, grandchild %d alive %v", child, alive(child), grandchild, alive(grandchild))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d (child %d, grandchild %d) still alive 10s after switchboard was SIGKILLed", pid, child, grandchild)
			}
			time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
		}
	}
}

// A grandchild that leaves the child's process group and session
// (setsid) is found by the tracker of internal/upstream/stdio (which logs it) and
// is gone too after switchboard is SIGKILLed, its reaper having been told
// its group.
func TestSIGKILLLeavesNoSetsidGrandchild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc; the tracker is Linux-only")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	childFile, gcFile := filepath.Join(dir, "child.pid"), filepath.Join(dir, "grandchild.pid")
	// setsid(1) in a background job (not a group leader) calls setsid()
	// and execs sleep in the same process: $! is the sleep.
	script := fmt.Sprintf(`echo $$ > %s; setsid sleep 300 & echo $! > %s; wait`, childFile, gcFile)
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\ntimeout: 5m\ndestinations:\n  d:\n    type: stdio\n    command: [sh, -c, %s]\n",
		strconv.Quote(script))
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	var out peertest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var pids []int
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		for _, p := range pids {
			if alive(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("switchboard output:\n%s", out.String())
		}
	})
	// waitFor polls (a file, the output) with a deadline.
	waitFor := func(what string, ok func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 30s", what)
			}
			select {
			case <-exited:
				t.Fatalf("switchboard exited while waiting for %s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	readPid := func(path string) int {
		pid := 0
		waitFor("pid in "+path, func() bool {
			b, err := os.ReadFile(path)
			if err == nil {
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			return pid > 0
		})
		return pid
	}
	child := readPid(childFile)
	pids = append(pids, child)
	grandchild := readPid(gcFile)
	pids = append(pids, grandchild)
	// The pid file is written when the job starts, maybe before it has
	// called setsid: wait for its own group and session.
	waitFor("the grandchild in a session of its own", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", grandchild))
		if err != nil {
			t.Fatalf("grandchild %d: %v", grandchild, err)
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		return f[2] == strconv.Itoa(grandchild) && f[3] == strconv.Itoa(grandchild)
	})
	waitFor("tracker line for the grandchild's group", func() bool {
		return strings.Contains(out.String(), fmt.Sprintf("tracked, to be stopped with the child\" pgid=%d ", grandchild))
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d (child %d, setsid grandchild %d) still alive 10s after switchboard was SIGKILLed", pid, child, grandchild)
			}
			time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
		}
	}
}

// splitReapers separates internal/upstream/stdio's reaper (its whole environment
// is one marker variable) from the other processes.
func splitReapers(pids []int) (others, reapers []int) {
	for _, p := range pids {
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if string(env) == "SWITCHBOARD_STDIO_REAPER=1\x00" {
			reapers = append(reapers, p)
		} else {
			others = append(others, p)
		}
	}
	return others, reapers
}
