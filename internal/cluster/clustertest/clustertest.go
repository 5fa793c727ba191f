// Package clustertest is test support for the cluster packages: it starts
// a real redis-server, and HAProxy, from the Debian packages on loopback
// ports of their own, waits until each is ready (by its own "ready" log
// line or by a connection accepted, bounded by a deadline), and stops
// each by its PID when the test ends, showing its log when the test
// failed. A missing binary skips the test, or fails it when
// SWITCHBOARD_REQUIRE_PEERS=1 (as CI sets; .ci/run installs both).
// Only _test.go files import this package.
package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a server may take to become ready on a
// loaded machine; it is a failure bound, not a wait.
const startTimeout = 30 * time.Second

const installHint = "install the Debian packages redis-server and haproxy (.ci/run does)"

// Required reports whether SWITCHBOARD_REQUIRE_PEERS=1: a missing server
// fails the test instead of skipping it.
func Required() bool { return os.Getenv("SWITCHBOARD_REQUIRE_PEERS") == "1" }

// lookPath finds a server binary on PATH or in Debian's sbin folders
// (haproxy is in /usr/sbin, which a non-root PATH may lack); when it is
// missing it skips or fails t.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := fmt.Sprintf("clustertest: %s not found; %s", name, installHint)
	if Required() {
		t.Fatal(msg + " (SWITCHBOARD_REQUIRE_PEERS=1)")
	}
	t.Skip(msg)
	return ""
}

// FreePort returns a loopback TCP port that was free a moment ago. A
// server given it may still lose it to another process; StartRedis
// retries then.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a server subprocess: its PID, its log and its end.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{} // closed when the process has exited (and been waited for)
	err  error         // how it exited; read after done
}

// syncBuffer is a bytes.Buffer for one writer and other readers.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs argv with its output (both streams) going to the log and,
// line by line, to lines (nil: not watched). The process's owner is the
// returned proc: a goroutine waits for it and closes done.
func start(t testing.TB, name string, argv []string, dir string, lines chan<- string) *proc {
	t.Helper()
	p := &proc{name: name, log: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Dir = dir
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("clustertest: starting %s: %v", name, err)
	}
	scanned := make(chan struct{})
	go func() { // ends when the pipe is closed, after the process exits
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			p.log.Write([]byte(line + "\n"))
			if lines != nil {
				select {
				case lines <- line:
				default: // nobody waits any more
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { // ends when the process exits
		p.err = p.cmd.Wait()
		pw.Close()
		<-scanned
		close(p.done)
	}()
	return p
}

// PID is the process's id.
func (p *proc) PID() int { return p.cmd.Process.Pid }

// Log is what the process has written so far.
func (p *proc) Log() string { return p.log.String() }

// Kill ends the process at once (SIGKILL, as a crash) and waits for it.
func (p *proc) Kill() {
	_ = syscall.Kill(p.PID(), syscall.SIGKILL)
	<-p.done
}

// stop ends the process (SIGTERM, then SIGKILL after a bound) and waits.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// cleanup stops p when t ends and shows p's log if t failed.
func (p *proc) cleanup(t testing.TB) {
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("clustertest: %s (pid %d) log:\n%s", p.name, p.PID(), p.Log())
		}
	})
}

// Redis is a redis-server started for one test.
type Redis struct {
	*proc
	Addr string // host:port on 127.0.0.1
	Dir  string // its working folder (no persistence is written there)
}

// StartRedis starts a redis-server on a free loopback port with a folder
// of its own and no persistence, with args added to its command line
// (for example "--requirepass", "secret"), and returns it once it has
// said it is ready to accept connections. It is stopped when t ends.
func StartRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	bin := lookPath(t, "redis-server")
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		port := FreePort(t)
		argv := append([]string{bin,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
		}, args...)
		lines := make(chan string, 64)
		p := start(t, "redis-server", argv, dir, lines)
		ready, err := waitLine(p, lines, "Ready to accept connections")
		if ready {
			p.cleanup(t)
			return &Redis{proc: p, Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir}
		}
		p.stop()
		if attempt < 3 && strings.Contains(p.Log(), "Address already in use") {
			continue // lost the port to another process: take another
		}
		t.Fatalf("clustertest: redis-server did not become ready: %v\n%s", err, p.Log())
	}
}

// waitLine waits for p to print a line containing want, for p to exit or
// for startTimeout, whichever comes first.
func waitLine(p *proc, lines <-chan string, want string) (bool, error) {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		select {
		case line := <-lines:
			if strings.Contains(line, want) {
				return true, nil
			}
		case <-p.done:
			return false, fmt.Errorf("it exited (%v)", p.err)
		case <-deadline.C:
			return false, fmt.Errorf("no %q within %s", want, startTimeout)
		}
	}
}

// Client returns a go-redis client of r, closed when t ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// HAProxy is an haproxy started for one test.
type HAProxy struct {
	*proc
	Config string // the configuration file
}

// StartHAProxy writes cfg to a file, checks it (haproxy -c) and runs
// haproxy -f file -db in the foreground, then waits until every address
// in listen (host:port, the frontends cfg binds) accepts a connection.
// It is stopped when t ends.
func StartHAProxy(t testing.TB, cfg string, listen ...string) *HAProxy {
	t.Helper()
	bin := lookPath(t, "haproxy")
	dir := t.TempDir()
	file := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("clustertest: haproxy -c: %v\n%s\n%s", err, out, cfg)
	}
	p := start(t, "haproxy", []string{bin, "-f", file, "-db"}, dir, nil)
	p.cleanup(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, addr := range listen {
		if err := waitAccept(ctx, p, addr); err != nil {
			t.Fatalf("clustertest: haproxy is not listening on %s: %v\n%s", addr, err, p.Log())
		}
	}
	return &HAProxy{proc: p, Config: file}
}

// waitAccept dials addr until a connection is accepted, p exits or ctx
// ends. Each failed dial is followed by a short pause that doubles up to
// 50 ms: a connect loop bounded by ctx.
func waitAccept(ctx context.Context, p *proc, addr string) error {
	pause := time.Millisecond
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-p.done:
			t.Stop()
			return fmt.Errorf("haproxy exited (%v)", p.err)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%v (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Process is any other process a test runs (a Switchboard replica).
type Process struct{ *proc }

// Start runs argv in dir and returns once a line of its output contains
// ready (at once when ready is ""), failing t if it exits first or
// takes longer than the start bound. It is stopped (SIGTERM, then
// SIGKILL) when t ends, and its log shown if t failed.
func Start(t testing.TB, name string, argv []string, dir, ready string) *Process {
	t.Helper()
	var lines chan string
	if ready != "" {
		lines = make(chan string, 256)
	}
	p := start(t, name, argv, dir, lines)
	p.cleanup(t)
	if ready != "" {
		if ok, err := waitLine(p, lines, ready); !ok {
			t.Fatalf("clustertest: %s did not become ready: %v\n%s", name, err, p.Log())
		}
	}
	return &Process{p}
}

// Stop ends the process gracefully (SIGTERM; SIGKILL after 10 s) and
// waits for it.
func (p *Process) Stop() { p.stop() }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }
