//go:build unix

package stdio

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A process that starts children through Start (with ReaperMain) is
// SIGKILLed: its child and the child's grandchild are gone too, although
// nothing in the killed process ran any more (Pdeathsig alone ends only
// the child).
func TestSIGKILLLeavesNoGrandchild(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{childEnv + "=middle-gc", noExitSleep}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var child, grandchild int
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, pid := range []int{child, grandchild} {
			if pid > 0 && alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(line, "%d %d", &child, &grandchild); err != nil {
		t.Fatalf("middle said %q: %v", line, err)
	}
	if !alive(child) || !alive(grandchild) {
		t.Fatalf("child %d alive %v, grandchild %d alive %v", child, alive(child), grandchild, alive(grandchild))
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	waitGone(t, child, 10*time.Second)
	waitGone(t, grandchild, 10*time.Second)
}

// The reaper kills the groups still registered at EOF, and only those.
func TestReaperKillsRegisteredGroups(t *testing.T) {
	t.Parallel()
	sleeper := func() *exec.Cmd {
		c := exec.Command("/bin/sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill() })
		return c
	}
	kept, killed := sleeper(), sleeper()
	keptDone, killedDone := make(chan error, 1), make(chan error, 1)
	go func() { keptDone <- kept.Wait() }()
	go func() { killedDone <- killed.Wait() }()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fmt.Fprintf(w, "+%d\n+%d\n-%d\nnonsense\n+1\n", kept.Process.Pid, killed.Process.Pid, kept.Process.Pid)
	w.Close()
	if code := runReaper(r); code != 0 {
		t.Fatalf("runReaper = %d", code)
	}
	select {
	case <-killedDone:
	case <-time.After(10 * time.Second):
		t.Fatal("a registered group survived the reaper")
	}
	select {
	case err := <-keptDone:
		t.Fatalf("an unregistered group was killed: %v", err)
	default:
	}
}

// A reaper that dies is replaced at the next child, and the new one knows
// the groups registered before.
func TestReaperRestarted(t *testing.T) {
	reap.mu.Lock()
	old := reap.w
	started := make(chan int, 1)
	reap.started = func(pid int, err error) {
		if err == nil {
			started <- pid
		}
	}
	reap.mu.Unlock()
	defer func() {
		reap.mu.Lock()
		reap.started = nil
		reap.mu.Unlock()
	}()
	if old == nil {
		t.Skip("no reaper running")
	}
	// Break the pipe as a dead reaper would: close our end, so the reaper
	// exits, and the next write fails.
	reap.mu.Lock()
	_ = reap.w.Close()
	reap.mu.Unlock()
	p := start(t, spec(t, "echo"), &rec{})
	select {
	case pid := <-started:
		if !alive(pid) {
			t.Fatalf("new reaper %d not running", pid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no new reaper after the old one's pipe broke")
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func FuzzReaperLine(f *testing.F) {
	for _, s := range []string{"+123", "-123", "+1", "+0", "+-5", "-", "", "x12", "+ 12", "+99999999999999999999", "++3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		op, pgid, ok := reaperLine(line)
		if !ok {
			return
		}
		if op != '+' && op != '-' || pgid <= 1 {
			t.Fatalf("reaperLine(%q) = %c %d", line, op, pgid)
		}
		if want := string(op) + strconv.Itoa(pgid); want != line {
			t.Fatalf("reaperLine(%q) accepted a non-canonical line (%q)", line, want)
		}
	})
}
