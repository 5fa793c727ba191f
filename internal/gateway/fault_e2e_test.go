package gateway_test

// Fault tests: servers killed mid-call, restarts and their exhaustion, a
// server flooding stdout with junk, and many concurrent sessions.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

func kill9(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
}

// expectUnavailable checks that a call's stream ends with the gateway's
// -32000 error for request id.
func expectUnavailable(t testing.TB, st *stream, id string) {
	t.Helper()
	m := st.next()
	if m.Error == nil || m.Error.Code != -32000 || string(m.ID) != id {
		t.Fatalf("in-flight call %s ended with %s, want a -32000 error", id, describe(m))
	}
}

// kill -9 of the child mid-call: in-flight calls fail at once, the server
// is restarted (handshake replayed, log level and subscriptions restored)
// and the sessions go on.
func TestFaultKill9MidCall(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		a, b := h.initialize("d", ""), h.initialize("d", "")
		la := a.listen()
		if r := a.call("logging/setLevel", map[string]any{"level": "warning"}); r.status != 200 {
			t.Fatal(r)
		}
		if r := a.call("resources/subscribe", map[string]any{"uri": "test://kept"}); r.status != 200 {
			t.Fatal(r)
		}
		pid := a.tool("pid", nil).PID
		wa := a.waitStarted("wa", "ka")
		var wb *stream
		if iso == "shared" {
			wb = b.waitStarted("wb", "kb") // another session's call on the same process
		}
		t0 := time.Now()
		kill9(t, pid)
		expectUnavailable(t, wa, `"wa"`)
		if wb != nil {
			expectUnavailable(t, wb, `"wb"`)
		}
		if el := time.Since(t0); el > 3*time.Second {
			t.Fatalf("in-flight calls failed %s after the kill, want at once", el)
		}
		waitGone(t, 5*time.Second, pid)

		out := a.tool("pid", nil)
		if out.PID == pid || !alive(out.PID) {
			t.Fatalf("after the restart: pid %d (killed %d)", out.PID, pid)
		}
		if iso == "shared" {
			if got := b.tool("pid", nil).PID; got != out.PID {
				t.Fatalf("shared: sessions on pids %d and %d after the restart", out.PID, got)
			}
		} else if got := b.tool("pid", nil).PID; got == out.PID || got == pid {
			t.Fatalf("session isolation: B is on pid %d", got)
		}
		st := a.state()
		if !slices.Equal(st.Levels, []string{"warning"}) || !slices.Equal(st.Subs, []string{"subscribe:test://kept"}) {
			t.Fatalf("restarted server state %+v: level and subscription not restored", st)
		}
		var ci struct{ Name string }
		_ = json.Unmarshal(st.Client, &ci)
		want := map[string]string{"shared": "switchboard", "session": "e2e-client"}[iso]
		if ci.Name != want {
			t.Fatalf("the restarted server was initialized by %q, want %q", ci.Name, want)
		}
		// The session's GET stream survived the restart.
		a.tool("update", map[string]any{"uri": "test://kept"})
		expectMethod(t, la.next(), "notifications/resources/updated")
	})
}

// Restarts wait for the configured delays, in order; when they are
// exhausted the session ends.
func TestFaultRestartDelays(t *testing.T) {
	t.Parallel()
	h := start(t, "restart:\n  delays: [300ms, 600ms]\n", dest{name: "d", mode: "plain"})
	a := h.initialize("d", "")
	for i, d := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		pid := a.tool("pid", nil).PID
		id := fmt.Sprintf("w%d", i)
		w := a.waitStarted(id, id)
		t0 := time.Now()
		kill9(t, pid)
		expectUnavailable(t, w, `"`+id+`"`)
		np := a.tool("pid", nil).PID // waits for the restart
		if el := time.Since(t0); el < d {
			t.Fatalf("restart %d after %s, want at least %s", i+1, el, d)
		}
		if np == pid {
			t.Fatal("not restarted")
		}
	}
	// The third death exhausts max_attempts (default: one per delay).
	la := a.listen()
	pid := a.tool("pid", nil).PID
	w := a.waitStarted("w3", "w3")
	kill9(t, pid)
	expectUnavailable(t, w, `"w3"`)
	la.expectEnd()
	expectRPCError(t, a.call("tools/list", nil), 404, 0)
	expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
}

// The default restart policy is 0.5 s, 1 s, 2 s.
func TestFaultDefaultRestartPolicy(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("destinations:\n  d:\n    type: stdio\n    command: [x]\n"), filepath.Join(t.TempDir(), "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	if !slices.Equal(cfg.Restart.Delays, want) || cfg.Restart.MaxAttempts != 3 {
		t.Fatalf("default restart policy %+v, want delays %v and 3 attempts", cfg.Restart, want)
	}
}

// Restarts exhausted: in-flight calls and calls waiting for the restart
// get 503, the sessions end (GET streams closed, ids 404), new sessions get
// 503, /healthz reports the failure.
func TestFaultRestartsExhausted(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		die := filepath.Join(t.TempDir(), "die")
		h := start(t, "restart:\n  delays: [150ms]\n  max_attempts: 2\n",
			dest{name: "d", mode: "plain", isolation: iso, env: map[string]string{envDieFile: die}})
		a, b := h.initialize("d", ""), h.initialize("d", "")
		la, lb := a.listen(), b.listen()
		pid := a.tool("pid", nil).PID
		w := a.waitStarted("w", "k")
		if err := os.WriteFile(die, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		kill9(t, pid)
		expectUnavailable(t, w, `"w"`)
		// A call sent while the server restarts (and keeps dying) waits,
		// then fails with 503 once the restarts are exhausted.
		r, err := h.send("POST", "/d/mcp", rpc(5, "tools/call", toolParams("echo", map[string]any{"text": "x"}, nil)), a.hdr()...)
		if err != nil {
			t.Fatalf("a call during the restarts: %v", err)
		}
		if r.status != 503 && r.status != 404 { // 404 if the session ended first
			t.Fatalf("a call during the restarts: %s, want 503", r)
		}
		la.expectEnd()
		expectRPCError(t, a.call("tools/list", nil), 404, 0)
		if iso == "shared" {
			lb.expectEnd()
			expectRPCError(t, b.call("tools/list", nil), 404, 0)
			var hz struct {
				Status       string
				Destinations []struct{ State, Error string }
			}
			hr := h.do("GET", "/healthz", nil)
			if json.Unmarshal(hr.body, &hz) != nil || hz.Status != "degraded" || hz.Destinations[0].State != "failed" {
				t.Fatalf("healthz: %s", hr)
			}
		} else {
			b.tool("echo", map[string]any{"text": "B has its own process"})
		}
		expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
	})
}

// A child that floods stdout with junk the whole time still answers
// everything correctly.
func TestFaultFloodStdout(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "flood"})
	var ss []*sess
	var ls []*stream
	for i := 0; i < 3; i++ {
		s := h.initialize("d", "")
		ss = append(ss, s)
		ls = append(ls, s.listen())
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i, s := range ss {
		wg.Go(func() {
			for j := 0; j < 20; j++ {
				text := fmt.Sprintf("flood-%d-%d", i, j)
				r, err := h.send("POST", "/d/mcp", rpc(j, "tools/call", toolParams("echo", map[string]any{"text": text}, nil)), s.hdr()...)
				if err != nil {
					errs <- err
					return
				}
				if r.status != 200 || len(r.msgs) != 1 || string(r.msgs[0].ID) != fmt.Sprint(j) {
					errs <- fmt.Errorf("echo %s: %s", text, r)
					return
				}
				if out, err := decodeTool(r.msgs[0]); err != nil || out.Text != text {
					errs <- fmt.Errorf("echo %s: got %+v (%v)", text, out, err)
					return
				}
				if bytes.Contains(r.body, []byte("FLOOD")) {
					errs <- fmt.Errorf("junk reached the client: %s", clip(r.body))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r := ss[0].call("tools/call", toolParams("progress", map[string]any{"n": 5}, "fp"))
	if len(r.msgs) != 6 {
		t.Fatalf("progress in the flood: %s", r)
	}
	ss[1].tool("changed", nil)
	for _, st := range ls {
		expectMethod(t, st.next(), "notifications/tools/list_changed")
	}
	if n := h.logs.count(slog.LevelWarn, "non-JSON-RPC line on stdout skipped"); n < 50 {
		t.Fatalf("only %d junk lines logged", n)
	}
}

// Many sessions at once, each doing calls with the same request ids: every
// answer is its own (no cross-talk).
func TestFaultConcurrentSessions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		iso string
		n   int
	}{{"shared", 100}, {"session", 100}} {
		t.Run(c.iso, func(t *testing.T) {
			t.Parallel()
			concurrentSessions(t, c.iso, c.n)
		})
	}
}

func concurrentSessions(t *testing.T, iso string, n int) {
	h := start(t, fastRestart+"max_sessions: 200\n", dest{name: "d", mode: "plain", isolation: iso})
	pids := make([]int, n)
	errs := make(chan error, n)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			<-begin
			if err := oneClient(h, i, &pids[i]); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		})
	}
	close(begin)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	distinct := map[int]bool{}
	for _, p := range pids {
		distinct[p] = true
	}
	want := map[string]int{"shared": 1, "session": n}[iso]
	if len(distinct) != want {
		t.Fatalf("%s isolation: %d sessions reached %d processes, want %d", iso, n, len(distinct), want)
	}
	if iso == "session" {
		waitGone(t, 10*time.Second, pids...) // every session was deleted
	}
}

func oneClient(h *harness, i int, pid *int) error {
	s, err := h.tryInitialize("d", "")
	if err != nil {
		return err
	}
	for j := 1; j <= 5; j++ {
		text := fmt.Sprintf("client-%03d-call-%d-%s", i, j, s.id)
		r, err := h.send("POST", "/d/mcp", rpc(j, "tools/call", toolParams("echo", map[string]any{"text": text}, nil)), s.hdr()...)
		if err != nil {
			return err
		}
		if r.status != 200 || len(r.msgs) != 1 || string(r.msgs[0].ID) != fmt.Sprint(j) {
			return fmt.Errorf("echo %d: %s", j, r)
		}
		out, err := decodeTool(r.msgs[0])
		if err != nil {
			return err
		}
		if out.Text != text {
			return fmt.Errorf("cross-talk: sent %q, got %q", text, out.Text)
		}
		if *pid != 0 && out.PID != *pid {
			return fmt.Errorf("the session moved from pid %d to %d", *pid, out.PID)
		}
		*pid = out.PID
	}
	tok := fmt.Sprintf("tok-%d", i)
	r, err := h.send("POST", "/d/mcp", rpc(1, "tools/call", toolParams("progress", map[string]any{"n": 2}, tok)), s.hdr()...)
	if err != nil {
		return err
	}
	if len(r.msgs) != 3 {
		return fmt.Errorf("progress: %s", r)
	}
	for _, m := range r.msgs[:2] {
		if !strings.Contains(string(m.Params), `"progressToken":"`+tok+`"`) {
			return fmt.Errorf("progress with someone else's token: %s", m.Params)
		}
	}
	d, err := h.send("DELETE", "/d/mcp", nil, s.hdr()...)
	if err != nil {
		return err
	}
	if d.status != http.StatusNoContent {
		return fmt.Errorf("DELETE: %s", d)
	}
	return nil
}
