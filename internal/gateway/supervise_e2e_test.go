package gateway_test

// End-to-end tests of supervision: a server killed again and again is
// restarted with the configured backoff and then marked failed, while the
// other servers answer throughout; a server whose command does not exist
// does not stop the gateway; a server that never answers ping is left
// alone (Switchboard does not ping its upstreams).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// The "noping" test server is the plain one behind a stdin filter that
// swallows every ping request (and says so on stderr, which the gateway
// logs). TestMain then runs runTestServer("noping") on the filtered stdin.
func init() {
	if os.Getenv(envServerMode) != "noping" {
		return
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	in := os.Stdin
	os.Stdin = pr
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &m) == nil && m.Method == "ping" && m.ID != nil {
				fmt.Fprintf(os.Stderr, "noping: ping %s ignored\n", m.ID)
			} else if len(line) > 0 {
				_, _ = pw.Write(line)
			}
			if err != nil {
				pw.Close()
				return
			}
		}
	}()
}

// fastFail sends a request that must fail at once with an error naming
// server; it returns the error message.
func fastFail(t *testing.T, what string, send func() (*resp, error), server string) string {
	t.Helper()
	t0 := time.Now()
	r, err := send()
	el := time.Since(t0)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var msg string
	if n := len(r.msgs); n > 0 && r.msgs[n-1].Error != nil {
		msg = r.msgs[n-1].Error.Message
	} else if n > 0 {
		if out, err := decodeTool(r.msgs[n-1]); err == nil && out.IsError {
			msg = out.Text
		}
	}
	if msg == "" {
		t.Fatalf("%s: %s, want an error", what, r)
	}
	if !strings.Contains(msg, server) {
		t.Errorf("%s: error %q does not name %s", what, msg, server)
	}
	if el > time.Second {
		t.Errorf("%s: failed after %s, want at once", what, el)
	}
	return msg
}

// A server killed again and again: each death is followed by a restart
// after the configured delay, the last one marks it failed (healthz
// "failed", status "degraded"), its sessions end and calls to it fail at
// once naming it — while other servers answer every call throughout, on
// their own sessions and on an aggregated one that includes the dying
// server.
func TestSuperviseKillRepeatedly(t *testing.T) {
	t.Parallel()
	delays := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}
	h := start(t, "restart:\n  delays: [100ms, 300ms]\n  max_attempts: 2\n",
		dest{name: "flaky", mode: "plain"}, dest{name: "steady", mode: "plain"},
		dest{name: "steadyses", mode: "plain", isolation: "session"})
	sf, ss, sss, agg := h.connect("/flaky/mcp"), h.connect("/steady/mcp"), h.connect("/steadyses/mcp"), h.connect("/mcp")
	lf, lss, lagg := sf.listen(), ss.listen(), agg.listen()
	steadyPID, sesPID := ss.tool("pid", nil).PID, sss.tool("pid", nil).PID
	aggSesPID := agg.tool("steadyses__pid", nil).PID
	if p := agg.tool("flaky__pid", nil).PID; p != sf.tool("pid", nil).PID {
		t.Fatalf("aggregated flaky on pid %d", p)
	}

	ld := newLoad(t)
	ld.add("steady", echoWorker(ss, "echo", steadyPID))
	ld.add("steadyses", echoWorker(sss, "echo", sesPID))
	ld.add("agg steady__echo", echoWorker(agg, "steady__echo", steadyPID))
	ld.add("agg steadyses__echo", echoWorker(agg, "steadyses__echo", aggSesPID))
	ld.progress(3)

	for i, d := range delays {
		pid := sf.tool("pid", nil).PID
		t0 := time.Now()
		kill9(t, pid)
		recs := h.logs.waitCount(t, slog.LevelWarn, "upstream ended; restarting", i+1)
		if a := recs[i].Attrs; !strings.Contains(a, "destination=flaky") || !strings.Contains(a, fmt.Sprintf("attempt=%d delay=%s", i+1, d)) {
			t.Errorf("restart %d logged as %q", i+1, a)
		}
		np := sf.tool("pid", nil).PID // waits for the restart: the session lives on
		if el := time.Since(t0); el < d {
			t.Errorf("restart %d after %s, want at least %s", i+1, el, d)
		}
		if np == pid || !alive(np) {
			t.Fatalf("restart %d: pid %d (killed %d)", i+1, np, pid)
		}
		if p := agg.tool("flaky__pid", nil).PID; p != np {
			t.Fatalf("restart %d: the aggregated session reaches pid %d, want %d", i+1, p, np)
		}
		waitGone(t, waitFor, pid)
		ld.progress(3)
	}

	// The third death exhausts max_attempts.
	pid := sf.tool("pid", nil).PID
	kill9(t, pid)
	h.logs.wait(t, slog.LevelError, "upstream failed; restarts exhausted", "destination=flaky")
	lf.expectEnd() // its sessions end
	ld.progress(3)
	hz := h.health()
	if st, msg := hz.state("flaky"); hz.Status != "degraded" || st != "failed" || msg == "" {
		t.Fatalf("healthz after the restarts ran out: %s", hz)
	}
	for _, n := range []string{"steady", "steadyses"} {
		if st, _ := hz.state(n); st != "ready" {
			t.Errorf("healthz: %s is %q, want ready: %s", n, st, hz)
		}
	}
	if r, _ := sf.send("tools/list", nil); r == nil || r.status != 404 {
		t.Errorf("a session of the failed server: %v, want 404", r)
	}
	msg := fastFail(t, "initialize /flaky/mcp", func() (*resp, error) {
		return h.send("POST", "/flaky/mcp", rpc(1, "initialize", initParams("")))
	}, "flaky")
	t.Logf("a new session of the failed server: %s", msg)
	fastFail(t, "flaky__echo on the aggregated session", func() (*resp, error) {
		return agg.send("tools/call", toolParams("flaky__echo", map[string]any{"text": "x"}, nil))
	}, "flaky")
	agg2 := h.connect("/mcp") // a new aggregated session: the others serve, flaky fails fast
	if out := agg2.tool("steady__pid", nil); out.PID != steadyPID {
		t.Fatalf("a new aggregated session: steady on pid %d", out.PID)
	}
	fastFail(t, "flaky__echo on a new aggregated session", func() (*resp, error) {
		return agg2.send("tools/call", toolParams("flaky__echo", map[string]any{"text": "x"}, nil))
	}, "flaky")

	ld.progress(3)
	calls := ld.finish()
	// The other servers' streams are still open: a notification reaches
	// each of them.
	ss.tool("changed", nil)
	expectMethod(t, lss.next(), "notifications/tools/list_changed")
	for {
		if m := lagg.next(); m.Method == "notifications/tools/list_changed" {
			break
		}
	}
	for _, p := range []int{steadyPID, sesPID, aggSesPID} {
		if !alive(p) {
			t.Errorf("pid %d of a steady server is gone", p)
		}
	}
	t.Logf("%d calls to the other servers, none failed", calls)
}

// A destination whose command does not exist: the gateway starts anyway,
// /healthz marks it failed, the others serve, and calls to it fail at once
// naming it.
func TestSuperviseMissingCommand(t *testing.T) {
	t.Parallel()
	missing := []string{"/nonexistent/switchboard-test/no-such-server"}
	h := start(t, "restart:\n  delays: [20ms]\n  max_attempts: 2\n",
		dest{name: "ghost", command: missing}, dest{name: "live", mode: "plain"},
		dest{name: "ghostses", command: missing, isolation: "session"})
	hz := h.waitHealth("ghost failed", func(hz *health) bool { st, _ := hz.state("ghost"); return st == "failed" })
	if st, msg := hz.state("ghost"); hz.Status != "degraded" || !strings.Contains(msg, "no-such-server") {
		t.Errorf("healthz: ghost %s %q: %s", st, msg, hz)
	}
	if st, _ := hz.state("live"); st != "ready" && st != "starting" {
		t.Errorf("healthz: live is %q: %s", st, hz)
	}
	live := h.connect("/live/mcp")
	if out := live.tool("echo", map[string]any{"text": "hi"}); out.Text != "hi" {
		t.Fatalf("live: %+v", out)
	}
	for _, d := range []string{"ghost", "ghostses"} {
		fastFail(t, "initialize /"+d+"/mcp", func() (*resp, error) {
			return h.send("POST", "/"+d+"/mcp", rpc(1, "initialize", initParams("")))
		}, d)
	}
	agg := h.connect("/mcp")
	if out := agg.tool("live__echo", map[string]any{"text": "via /mcp"}); out.Text != "via /mcp" {
		t.Fatalf("live__echo: %+v", out)
	}
	fastFail(t, "ghost__echo on /mcp", func() (*resp, error) {
		return agg.send("tools/call", toolParams("ghost__echo", map[string]any{"text": "x"}, nil))
	}, "ghost")
	hz = h.health()
	if st, _ := hz.state("ghostses"); st != "failed" {
		t.Errorf("healthz: ghostses (isolation session) is %q, want failed: %s", st, hz)
	}
}

// A server that never answers ping is not killed: Switchboard does not
// ping its upstreams, and a client's ping that the server ignores times
// out for that client alone. The same process serves all along.
func TestSuperviseServerIgnoringPing(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "quiet", mode: "noping", extra: "timeout: 2s"})
	s := h.connect("/quiet/mcp")
	l := s.listen()
	pid := s.tool("pid", nil).PID
	agg := h.connect("/mcp")
	if p := agg.tool("quiet__pid", nil).PID; p != pid {
		t.Fatalf("aggregated quiet on pid %d, want %d", p, pid)
	}
	ld := newLoad(t)
	ld.add("quiet", echoWorker(s, "echo", pid))
	ld.add("agg quiet__echo", echoWorker(agg, "quiet__echo", pid))

	// The aggregated endpoint answers ping itself.
	if r, err := agg.send("ping", nil); err != nil || r.status != 200 || len(r.msgs) != 1 || r.msgs[0].Result == nil {
		t.Fatalf("ping on /mcp: %v %v", err, r)
	}
	// A ping on the destination's own session reaches the server, which
	// ignores it: the client gets a timeout, the server is left alone.
	// Two of them: four seconds of a server that answers no ping. (The
	// timeout is 2 s so that the echo load beside it never times out on a
	// loaded machine: with 1 s, one echo of several thousand did, once, in
	// a CI run with every package testing at once.)
	t0 := time.Now()
	for i := 1; i <= 2; i++ {
		r, err := s.send("ping", nil)
		if err != nil {
			t.Fatal(err)
		}
		expectRPCError(t, r, 504, 0)
		h.logs.waitCount(t, slog.LevelInfo, "stderr", i)
		ld.progress(2)
	}
	if el := time.Since(t0); el < 4*time.Second {
		t.Fatalf("two ignored pings took %s, want 2×2s", el)
	}
	for _, r := range h.logs.all() {
		if r.Msg == "stderr" && !strings.Contains(r.Attrs, "ignored") {
			t.Errorf("server stderr: %s", r.Attrs)
		}
	}
	ld.finish()
	if got := s.tool("pid", nil).PID; got != pid || !alive(pid) {
		t.Fatalf("quiet is on pid %d now, was %d", got, pid)
	}
	if n := h.logs.count(slog.LevelInfo, "process started"); n != 1 {
		t.Errorf("%d processes started, want 1", n)
	}
	if n := h.logs.count(slog.LevelWarn, "upstream ended; restarting"); n != 0 {
		t.Errorf("the server was restarted %d times", n)
	}
	if st, _ := h.health().state("quiet"); st != "ready" {
		t.Errorf("healthz: quiet is %q", st)
	}
	// Its session and stream are intact.
	s.tool("changed", nil)
	expectMethod(t, l.next(), "notifications/tools/list_changed")
}
