package upstream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// stallHarness is a harness whose log is kept; with unread set its
// connections are Unreaders (as a stdio child's), which the probe needs.
func stallHarness(t *testing.T, unread func() (int, uint64)) (*harness, *lockedBuffer) {
	t.Helper()
	logged := &lockedBuffer{}
	h := newHarness(t, Options{Shared: true, Logger: slog.New(slog.NewTextHandler(logged, nil))})
	h.srv.unread = unread
	return h, logged
}

// noStalls asserts that u counted no stall at any stage but except.
func noStalls(t *testing.T, u *Upstream, except string) {
	t.Helper()
	for _, s := range Stages {
		if n := u.Stalled(s); s != except && n != 0 {
			t.Errorf("stage %s: %d stalls counted, want 0", s, n)
		}
	}
}

// TestStallWrite: a request queued for the server and not written within
// StallAfter (here: a server that stopped reading, so the write blocks) is
// logged and counted at stage write, once, while it is still stuck.
func TestStallWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logged := stallHarness(t, nil)
		a, _ := h.join("")
		release := make(chan struct{})
		h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
			if m.Method == "tools/call" {
				<-release // the write does not return
			}
		}
		done := make(chan *Call)
		go func() { done <- h.call(a, `1`, "tools/call", "") }()
		synctest.Wait()
		before := StalledTotal()[StageWrite]
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if n := h.u.Stalled(StageWrite); n != 0 {
			t.Fatalf("counted %d write stalls before StallAfter", n)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := h.u.Stalled(StageWrite); n != 1 {
			t.Fatalf("write stalls = %d, want 1 (counted once while stuck)", n)
		}
		if d := StalledTotal()[StageWrite] - before; d != 1 {
			t.Fatalf("process-wide write stalls grew by %d, want 1", d)
		}
		if out := logged.String(); !strings.Contains(out, "call stalled") || !strings.Contains(out, "stage=write") ||
			!strings.Contains(out, "method=tools/call") {
			t.Fatalf("log %q, want the stalled call with its stage", out)
		}
		close(release)
		c := <-done
		h.srv.conn(t).send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		if errCode(t, next(t, c)) != 0 {
			t.Fatal("the call failed")
		}
		noStalls(t, h.u, StageWrite)
	})
}

// TestStallRead: the server's output waiting in the connection while the
// reader takes none of it for StallAfter (a reader that was not woken) is
// counted at stage read, once per episode; output read as it comes is not.
func TestStallRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waiting atomic.Int64
		var read atomic.Uint64
		h, logged := stallHarness(t, func() (int, uint64) { return int(waiting.Load()), read.Load() })
		a, _ := h.join("")
		c := h.call(a, `1`, "tools/call", "")
		// Bytes wait, but the reader keeps taking them: no stall.
		for range 8 {
			waiting.Store(100)
			read.Add(100)
			time.Sleep(400 * time.Millisecond)
		}
		synctest.Wait()
		if n := h.u.Stalled(StageRead); n != 0 {
			t.Fatalf("read stalls = %d while the reader made progress", n)
		}
		// Now they wait and the reader stands still.
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if n := h.u.Stalled(StageRead); n != 1 {
			t.Fatalf("read stalls = %d, want 1", n)
		}
		if !strings.Contains(logged.String(), "stage=read") {
			t.Fatalf("log %q, want stage=read", logged.String())
		}
		waiting.Store(0)
		read.Add(100)
		h.srv.conn(t).send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		next(t, c)
	})
}

// blockingDown is a Downstream whose Deliver blocks until release is
// closed: a reader handing a message over gets stuck in it.
type blockingDown struct {
	fakeDown
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (d *blockingDown) Deliver(m *jsonrpc.Message) {
	d.once.Do(func() { close(d.entered) })
	<-d.release
	d.fakeDown.Deliver(m)
}

// TestStallDeliver: a message read from the server and not handed over
// within StallAfter (the reader stuck between the two) is counted at stage
// deliver, once.
func TestStallDeliver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logged := stallHarness(t, nil)
		d := &blockingDown{entered: make(chan struct{}), release: make(chan struct{})}
		a, _, err := h.u.Join(h.ctx, d, initMsg(`0`, serverVersion, ""))
		if err != nil {
			t.Fatal(err)
		}
		c := h.call(a, `1`, "tools/call", "") // arms the watchdog
		conn := h.srv.conn(t)
		go conn.send(jsonrpc.NewNotification("notifications/tools/list_changed", nil))
		<-d.entered
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := h.u.Stalled(StageDeliver); n != 1 {
			t.Fatalf("deliver stalls = %d, want 1", n)
		}
		if !strings.Contains(logged.String(), "stage=deliver") {
			t.Fatalf("log %q, want stage=deliver", logged.String())
		}
		close(d.release)
		synctest.Wait()
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		next(t, c)
		if n := h.u.Stalled(StageDeliver); n != 1 {
			t.Fatalf("deliver stalls = %d after the reader went on, want still 1", n)
		}
	})
}

// holdUntilMore makes the fake server behave as the child of issue 27
// seemed to: it sits on a tools/call until it is sent something more,
// then answers it (and a ping after it).
func holdUntilMore(h *harness) {
	var held []*jsonrpc.Message
	h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
		if m.Method == "tools/call" {
			held = append(held, m)
			return
		}
		for _, r := range held {
			c.send(jsonrpc.NewResult(r.ID, nil))
		}
		held = nil
		if m.Method == "ping" {
			c.send(jsonrpc.NewResult(m.ID, nil))
		}
	}
}

// TestStallServerProbed is issue 27's stall, forced: a server that sits
// on a request until more input comes is probed (a ping) once nothing has
// gone either way for StallAfter, so the call is answered then, not at
// its timeout; the stall is counted at stage server. Before the probe
// existed the call waited until the client gave up.
func TestStallServerProbed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logged := stallHarness(t, func() (int, uint64) { return 0, 0 })
		a, _ := h.join("")
		holdUntilMore(h)
		start := time.Now()
		c := h.call(a, `1`, "tools/call", "")
		// The bubble's clock: returns once answered, or fails at the
		// client's timeout.
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		defer cancel()
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("no answer within the client's timeout: %v", err)
		}
		if errCode(t, m) != 0 {
			t.Fatalf("answer %s", m)
		}
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Fatalf("answered after %v, want about StallAfter (1 s)", took)
		}
		if pings := h.srv.conn(t).sent("ping"); len(pings) != 1 {
			t.Fatalf("%d pings sent, want 1", len(pings))
		}
		synctest.Wait() // the reader counts the stall once the answer is delivered
		if n := h.u.Stalled(StageServer); n != 1 {
			t.Fatalf("server stalls = %d, want 1", n)
		}
		if !strings.Contains(logged.String(), "stage=server") {
			t.Fatalf("log %q, want stage=server", logged.String())
		}
		noStalls(t, h.u, StageServer)
		synctest.Wait()
		if n := h.u.InFlight(); n != 0 {
			t.Fatalf("%d requests left in flight (the probe's?)", n)
		}
	})
}

// TestStallUnreadInputNotCounted: a server that had not read its input
// when the probe went out (a child still starting: its stdin held the
// request) answers once it reads, the call before the ping, but it held
// nothing: the ping still goes out, nothing is counted at any stage.
func TestStallUnreadInputNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logged := stallHarness(t, func() (int, uint64) { return 0, 0 })
		h.srv.inputWaiting = func() int { return 250 }
		a, _ := h.join("")
		holdUntilMore(h)
		c := h.call(a, `1`, "tools/call", "")
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		defer cancel()
		m, err := c.Next(ctx)
		if err != nil || errCode(t, m) != 0 {
			t.Fatalf("answer %v, %v", m, err)
		}
		if pings := h.srv.conn(t).sent("ping"); len(pings) != 1 {
			t.Fatalf("%d pings sent, want 1", len(pings))
		}
		synctest.Wait()
		noStalls(t, h.u, "")
		if strings.Contains(logged.String(), "call stalled") {
			t.Fatalf("log %q, want no stall", logged.String())
		}
	})
}

// TestStallStarvedServerCountedAsCPU is issue 27's held answer as it
// was measured: the server's threads were runnable and got no CPU (an
// overloaded machine) until the probe's input woke one of them. Its
// threads' run-queue wait over the call's wait (here 90% of it), or a
// fifth of it with a thread runnable at the ticks, puts the stall at stage
// cpu, not server. A server whose threads did not wait for a CPU while it
// sat on the answer stays at stage server, even with a thread runnable
// for a moment at a tick (TestStalledServerProbed's child under -race).
func TestStallStarvedServerCountedAsCPU(t *testing.T) {
	for _, tc := range []struct {
		name     string
		share    float64 // of the time passed, spent waiting for a CPU
		runnable int     // threads runnable at each tick
		stage    string
	}{
		{"waited", 0.9, 0, StageCPU},
		{"waited some, runnable", 0.2, 1, StageCPU},
		{"held while it could run", 0.01, 0, StageServer},
		{"held, a thread runnable for a moment", 0.01, 1, StageServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, logged := stallHarness(t, func() (int, uint64) { return 0, 0 })
				start := time.Now()
				h.srv.cpuWait = func() (time.Duration, int) {
					return time.Duration(tc.share * float64(time.Since(start))), tc.runnable
				}
				a, _ := h.join("")
				holdUntilMore(h)
				c := h.call(a, `1`, "tools/call", "")
				ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
				defer cancel()
				if _, err := c.Next(ctx); err != nil {
					t.Fatalf("no answer within the client's timeout: %v", err)
				}
				synctest.Wait() // the reader counts the stall once the answer is delivered
				if n := h.u.Stalled(tc.stage); n != 1 {
					t.Fatalf("stage %s: %d stalls, want 1; log %s", tc.stage, n, logged)
				}
				noStalls(t, h.u, tc.stage)
				if !strings.Contains(logged.String(), "stage="+tc.stage) || !strings.Contains(logged.String(), "cpu_wait=") {
					t.Fatalf("log %q, want stage=%s with cpu_wait", logged.String(), tc.stage)
				}
			})
		})
	}
}

// TestStallSlowServerNotCounted: a server that is merely slow answers the
// probe at once and the call later: nothing is counted, and the probes
// back off (1, 2, 4, 8, 16 s of silence) rather than come every second.
func TestStallSlowServerNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := stallHarness(t, func() (int, uint64) { return 0, 0 })
		a, _ := h.join("")
		h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
			if m.Method == "ping" {
				c.send(jsonrpc.NewResult(m.ID, nil))
			}
		}
		c := h.call(a, `1`, "tools/call", "")
		time.Sleep(30 * time.Second)
		synctest.Wait()
		conn := h.srv.conn(t)
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		next(t, c)
		if pings := len(conn.sent("ping")); pings < 3 || pings > 5 {
			t.Fatalf("%d pings in 30 s of a slow call, want 4 (backing off)", pings)
		}
		noStalls(t, h.u, "")
		// A server that does not answer pings is not pinged again and
		// again either, and its unanswered probe is forgotten.
		h.srv.onWrite = nil
		c = h.call(a, `2`, "tools/call", "")
		time.Sleep(60 * time.Second)
		synctest.Wait()
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		next(t, c)
		synctest.Wait()
		if n := h.u.InFlight(); n != 0 {
			t.Fatalf("%d requests left in flight (an unanswered probe?)", n)
		}
		noStalls(t, h.u, "")
	})
}

// TestStallWatchOff: a negative StallAfter turns the watchdog off: no
// probe, no count.
func TestStallWatchOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true, StallAfter: -1})
		h.srv.unread = func() (int, uint64) { return 0, 0 }
		a, _ := h.join("")
		holdUntilMore(h)
		c := h.call(a, `1`, "tools/call", "")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		noNext(t, c)
		if pings := h.srv.conn(t).sent("ping"); len(pings) != 0 {
			t.Fatalf("%d pings sent with the watchdog off", len(pings))
		}
		c.Abandon(true)
	})
}

// TestStallTake: an answer handed to its call and never taken by the front
// (a front that missed its wake-up) is counted at stage take when the call
// is given up a StallAfter or more after the answer came; one given up
// sooner is not.
func TestStallTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logged := stallHarness(t, nil)
		a, _ := h.join("")
		conn := h.srv.conn(t)
		quick := h.call(a, `1`, "tools/call", "")
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		time.Sleep(900 * time.Millisecond)
		quick.Abandon(true)
		if n := h.u.Stalled(StageTake); n != 0 {
			t.Fatalf("take stalls = %d for an answer given up after 0.9 s", n)
		}
		c := h.call(a, `2`, "tools/call", "")
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		time.Sleep(3 * time.Second) // the front never takes it, then times out
		c.Abandon(true)
		if n := h.u.Stalled(StageTake); n != 1 {
			t.Fatalf("take stalls = %d, want 1", n)
		}
		if !strings.Contains(logged.String(), "stage=take") {
			t.Fatalf("log %q, want stage=take", logged.String())
		}
		noStalls(t, h.u, StageTake)
	})
}

// TestStallInOrderServerNotCounted: a server that answers in order (the
// ping queued behind a slow call) answers the call first, but not at once
// after the probe: not counted.
func TestStallInOrderServerNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := stallHarness(t, func() (int, uint64) { return 0, 0 })
		a, _ := h.join("")
		var pings []*jsonrpc.Message
		h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
			if m.Method == "ping" {
				pings = append(pings, m) // answered after the call, in order
			}
		}
		c := h.call(a, `1`, "tools/call", "")
		time.Sleep(2300 * time.Millisecond) // a probe went out at about 1 s
		synctest.Wait()
		if len(pings) == 0 {
			t.Fatal("no probe")
		}
		conn := h.srv.conn(t)
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		for _, p := range pings {
			conn.send(jsonrpc.NewResult(p.ID, nil))
		}
		next(t, c)
		noStalls(t, h.u, "")
	})
}
