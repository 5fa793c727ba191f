package upstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

var delays = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}

func wantState(t *testing.T, u *Upstream, want State) error {
	t.Helper()
	st, err := u.State()
	if st != want {
		t.Fatalf("state %v (%v), want %v", st, err, want)
	}
	return err
}

// TestRestartDelaysThenFailed: after the connection ends the restarts come
// after exactly the configured delays; when the last fails the Upstream is
// Failed and its members are ended.
func TestRestartDelaysThenFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true, RestartDelays: delays})
		h.srv.dialErr = func(n int) error {
			if n > 0 {
				return errors.New("spawn failed")
			}
			return nil
		}
		a, da := h.join("")
		b, db := h.join("")
		ended := time.Now()
		h.srv.conn(t).end(errors.New("crashed"))
		synctest.Wait()
		wantState(t, h.u, Restarting)

		// While restarting, calls wait for the outcome (here: until their
		// own deadline).
		ctx, cancel := context.WithTimeout(h.ctx, 100*time.Millisecond)
		if _, err := a.Call(ctx, req(`1`, "tools/call", "")); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Call while restarting: %v", err)
		}
		cancel()

		// The attempts take 3.5 s; RetryFailedAfter (30 s) has not passed.
		time.Sleep(4 * time.Second)
		synctest.Wait()
		dials := h.srv.dialTimes()
		var got []time.Duration
		last := ended
		for _, d := range dials[1:] {
			got = append(got, d.Sub(last))
			last = d
		}
		if !slices.Equal(got, delays) {
			t.Fatalf("restart delays %v, want %v", got, delays)
		}
		err := wantState(t, h.u, Failed)
		if err == nil || !strings.Contains(err.Error(), "spawn failed") {
			t.Fatalf("Failed because %v", err)
		}
		for _, d := range []*fakeDown{da, db} {
			errs := d.endErrs()
			if len(errs) != 1 || !errors.Is(errs[0], ErrUnavailable) {
				t.Fatalf("members ended with %v, want one ErrUnavailable", errs)
			}
		}
		// Failed refuses new work at once, without dialling.
		if _, err := b.Call(h.ctx, req(`1`, "tools/call", "")); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Call on a failed upstream: %v", err)
		}
		if _, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, "")); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Join on a failed upstream: %v", err)
		}
		if n := len(h.srv.dialTimes()); n != 1+len(delays) {
			t.Fatalf("%d dials, want %d", n, 1+len(delays))
		}
	})
}

// TestRestartBackoff: the attempt count grows while connections die young
// and resets once one has lived StableAfter.
func TestRestartBackoff(t *testing.T) {
	const stable = 10 * time.Second
	tests := []struct {
		name string
		// lifetimes of the connections after the first (which dies at
		// once); the test kills each after it.
		lifetimes  []time.Duration
		wantDelays []time.Duration // before each redial
	}{
		{"unstable connections back off",
			[]time.Duration{time.Second, time.Second, 0},
			[]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}},
		{"a stable connection resets the attempts",
			[]time.Duration{stable, time.Second, stable, 0},
			[]time.Duration{500 * time.Millisecond, 500 * time.Millisecond, time.Second, 500 * time.Millisecond}},
		{"just short of stable does not reset",
			[]time.Duration{stable - time.Millisecond, 0},
			[]time.Duration{500 * time.Millisecond, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true, RestartDelays: delays, StableAfter: stable})
				a, da := h.join("")
				killed := time.Now()
				h.srv.conn(t).end(errors.New("crashed"))
				for i, want := range tt.wantDelays {
					time.Sleep(want)
					synctest.Wait()
					dials := h.srv.dialTimes()
					if len(dials) != i+2 {
						t.Fatalf("redial %d: %d dials after %v, want %d", i+1, len(dials), want, i+2)
					}
					if got := dials[i+1].Sub(killed); got != want {
						t.Fatalf("redial %d after %v, want %v", i+1, got, want)
					}
					wantState(t, h.u, Ready)
					if i+1 < len(tt.wantDelays) {
						time.Sleep(tt.lifetimes[i])
						killed = time.Now()
						h.srv.conn(t).end(errors.New("crashed"))
					}
				}
				// The last connection serves.
				h.call(a, `1`, "tools/call", "")
				if len(da.endErrs()) != 0 {
					t.Fatal("member ended")
				}
			})
		})
	}
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	tests := []struct {
		name string
		run  func(h *harness)
	}{
		{"connection ends with a permanent error", func(h *harness) {
			h.srv.conn(h.t).end(Permanent(errors.New("401 unauthorized")))
		}},
		{"redial fails with a permanent error", func(h *harness) {
			h.srv.dialErr = func(n int) error { return Permanent(errors.New("403 forbidden")) }
			h.srv.conn(h.t).end(errors.New("crashed"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true, RestartDelays: delays})
				_, d := h.join("")
				tt.run(h)
				time.Sleep(time.Minute)
				synctest.Wait()
				err := wantState(t, h.u, Failed)
				if !IsPermanent(err) {
					t.Fatalf("lastErr %v is not permanent", err)
				}
				if len(d.endErrs()) != 1 {
					t.Fatalf("member ended %d times", len(d.endErrs()))
				}
				if n, max := len(h.srv.dialTimes()), 2; n > max {
					t.Fatalf("%d dials after a permanent error", n)
				}
			})
		})
	}
}

// TestRetryFailedAfter: a Failed upstream refuses work for RetryFailedAfter,
// then the next Join starts it again.
func TestRetryFailedAfter(t *testing.T) {
	tests := []struct {
		name  string
		retry time.Duration // option value
		want  time.Duration // effective
	}{
		{"default", 0, 30 * time.Second},
		{"configured", 5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true, RetryFailedAfter: tt.retry}) // no restarts
				_, d := h.join("")
				h.srv.conn(t).end(errors.New("crashed"))
				synctest.Wait()
				wantState(t, h.u, Failed)
				if len(d.endErrs()) != 1 {
					t.Fatal("member not ended")
				}
				time.Sleep(tt.want - time.Millisecond)
				if _, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, "")); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Join before RetryFailedAfter: %v", err)
				}
				if n := h.srv.numConns(); n != 1 {
					t.Fatalf("%d connections before RetryFailedAfter", n)
				}
				time.Sleep(time.Millisecond)
				m, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, ""))
				if err != nil {
					t.Fatalf("Join after RetryFailedAfter: %v", err)
				}
				if n := h.srv.numConns(); n != 2 {
					t.Fatalf("%d connections, want a new one", n)
				}
				wantState(t, h.u, Ready)
				h.call(m, `1`, "tools/call", "")
			})
		})
	}
}

func TestHandshakeTimeout(t *testing.T) {
	tests := []struct {
		name     string
		timeout  time.Duration // option; zero means the 30 s default
		restarts []time.Duration
		wantErr  bool
		wantAt   time.Duration // when Join returns
	}{
		{"default timeout, no restart", 0, nil, true, 30 * time.Second},
		{"configured timeout, no restart", 5 * time.Second, nil, true, 5 * time.Second},
		{"timeout then a restart that answers", 5 * time.Second, []time.Duration{time.Second}, false, 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true, HandshakeTimeout: tt.timeout, RestartDelays: tt.restarts})
				delete(h.srv.auto, "initialize")
				var mu sync.Mutex
				first := true
				h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
					mu.Lock()
					defer mu.Unlock()
					if m.Method != "initialize" {
						return
					}
					if first {
						first = false // the first server never answers
						return
					}
					c.send(jsonrpc.NewResult(m.ID, fakeInitResult))
				}
				start := time.Now()
				_, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, ""))
				if took := time.Since(start); took != tt.wantAt {
					t.Errorf("Join returned after %v, want %v", took, tt.wantAt)
				}
				conn0 := func() *fakeConn { h.srv.mu.Lock(); defer h.srv.mu.Unlock(); return h.srv.conns[0] }()
				if !conn0.isDone() || conn0.closeCount() == 0 {
					t.Error("the connection whose handshake timed out was not closed")
				}
				if !tt.wantErr {
					if err != nil {
						t.Fatalf("Join: %v", err)
					}
					wantState(t, h.u, Ready)
					return
				}
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Join: %v, want ErrUnavailable", err)
				}
				reason := wantState(t, h.u, Failed)
				if reason == nil || !strings.Contains(reason.Error(), "handshake failed") || !errors.Is(reason, context.DeadlineExceeded) {
					t.Fatalf("failed because %v, want the handshake timeout", reason)
				}
			})
		})
	}
}

func TestHandshakeRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		delete(h.srv.auto, "initialize")
		h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
			if m.Method == "initialize" {
				c.send(jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.InvalidParams, "unsupported version")))
			}
		}
		if _, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, "")); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Join: %v", err)
		}
		reason := wantState(t, h.u, Failed)
		if !strings.Contains(reason.Error(), "unsupported version") {
			t.Fatalf("failed because %v", reason)
		}
		if got := h.srv.conn(t).methods(); !slices.Equal(got, []string{"initialize"}) {
			t.Fatalf("sent %v", got)
		}
	})
}

// TestConnectionEndReplays: when the connection ends, in-flight calls fail
// at once with -32000, and the new connection gets the handshake, the log
// level and the subscriptions again.
func TestConnectionEndReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true, RestartDelays: []time.Duration{time.Second}})
		a, da := h.join(`{"sampling":{}}`)
		h.call(a, `1`, "logging/setLevel", `{"level":"info"}`)
		h.call(a, `2`, "resources/subscribe", `{"uri":"file:///a"}`)
		h.call(a, `3`, "resources/subscribe", `{"uri":"file:///b"}`)
		c := h.call(a, `"inflight"`, "tools/call", "")
		old := h.srv.conn(t)
		old.sendRaw(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`)
		sr := next(t, c)

		old.end(errors.New("crashed"))
		synctest.Wait()
		r := next(t, c)
		if string(r.ID) != `"inflight"` || errCode(t, r) != mcp.CodeUpstreamUnavailable {
			t.Fatalf("in-flight call got %s, want -32000 at once", r)
		}
		wantState(t, h.u, Restarting)
		if _, err := a.Call(h.ctx, req(`"inflight"`, "tools/list", "")); err != nil {
			// The id was released; this call waits for the restart.
			t.Fatalf("reusing the failed call's id: %v", err)
		}
		synctest.Wait()
		conn := h.srv.conn(t)
		if conn == old {
			t.Fatal("no new connection")
		}
		var got []string
		for _, m := range conn.all() {
			got = append(got, strings.TrimSpace(m.Method+" "+str(m.Params, "level")+str(m.Params, "uri")))
		}
		slices.Sort(got[3:5]) // subscriptions are restored in map order
		want := []string{"initialize", "notifications/initialized", "logging/setLevel info",
			"resources/subscribe file:///a", "resources/subscribe file:///b", "tools/list"}
		if !slices.Equal(got, want) {
			t.Fatalf("new connection was sent %q, want %q", got, want)
		}
		// The server→client request of the old connection is gone.
		_ = a.Respond(h.ctx, jsonrpc.NewResult(sr.ID, nil))
		if r := conn.sent(""); len(r) != 0 {
			t.Fatalf("a response for the old connection was forwarded: %v", r)
		}
		if len(da.endErrs()) != 0 {
			t.Fatal("member ended by a restart")
		}
	})
}

// TestReadyRaceWithConnectionEnd: a connection that ends right after its
// handshake completed must not leave the Upstream Ready without a
// connection (and then close the ready channel a second time).
func TestReadyRaceWithConnectionEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true, RestartDelays: []time.Duration{time.Second}})
		var once sync.Once
		h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
			if m.Method != "notifications/initialized" {
				return
			}
			once.Do(func() {
				// The last step of the first handshake: the server dies,
				// and the connection's end is handled before connect
				// goes on.
				c.end(errors.New("died"))
				for i := 0; i < 1000; i++ {
					if st, _ := h.u.State(); st == Restarting {
						return
					}
					time.Sleep(time.Microsecond)
				}
				t.Error("the end of the connection was not seen")
			})
		}
		start := time.Now()
		m, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, ""))
		if err != nil {
			t.Fatalf("Join: %v", err)
		}
		if h.srv.numConns() != 2 || time.Since(start) < time.Second {
			t.Fatalf("Join returned after %v with %d connections, want the restarted one", time.Since(start), h.srv.numConns())
		}
		synctest.Wait()
		wantState(t, h.u, Ready)
		h.call(m, `1`, "tools/call", "")
		if n := len(h.srv.conn(t).sent("tools/call")); n != 1 {
			t.Fatal("call not sent on the new connection")
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true, RestartDelays: delays})
		a, da := h.join("")
		_, db := h.join("")
		c := h.call(a, `1`, "tools/call", "")
		conn := h.srv.conn(t)
		if err := h.u.Close(h.ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if r := next(t, c); string(r.ID) != "1" || errCode(t, r) != mcp.CodeUpstreamUnavailable {
			t.Fatalf("in-flight call got %s", r)
		}
		for _, d := range []*fakeDown{da, db} {
			if errs := d.endErrs(); len(errs) != 1 || !errors.Is(errs[0], ErrClosed) {
				t.Fatalf("member ended with %v", errs)
			}
		}
		if !conn.isDone() {
			t.Fatal("connection not closed")
		}
		wantState(t, h.u, Closed)
		if h.u.Members() != 0 {
			t.Fatalf("%d members after Close", h.u.Members())
		}
		if err := h.u.Close(h.ctx); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, "")); !errors.Is(err, ErrClosed) {
			t.Fatalf("Join after Close: %v", err)
		}
		if _, err := a.Call(h.ctx, req(`2`, "tools/call", "")); !errors.Is(err, ErrClosed) {
			t.Fatalf("Call after Close: %v", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if h.srv.numConns() != 1 {
			t.Fatal("a closed upstream reconnected")
		}
	})
}

// TestCloseWaitsForConnect: Close returns only once a connection being
// dialled has been closed by its goroutine.
func TestCloseWaitsForConnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		h.srv.block = make(chan struct{})
		h.u.Start()
		synctest.Wait()
		wantState(t, h.u, Starting)
		if len(h.srv.dialTimes()) != 1 {
			t.Fatal("Start did not dial")
		}
		closed := make(chan error)
		go func() { closed <- h.u.Close(context.Background()) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a connection was being dialled")
		default:
		}
		close(h.srv.block)
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !h.srv.conn(t).isDone() {
			t.Fatal("the connection dialled during Close was left open")
		}
		wantState(t, h.u, Closed)
	})
}

func TestCloseWhileRestarting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true, RestartDelays: []time.Duration{time.Hour}})
		h.join("")
		h.srv.conn(t).end(errors.New("crashed"))
		synctest.Wait()
		wantState(t, h.u, Restarting)
		start := time.Now()
		if err := h.u.Close(h.ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close waited %v for the pending restart", d)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if n := len(h.srv.dialTimes()); n != 1 {
			t.Fatalf("%d dials after Close", n)
		}
	})
}

// TestCloseRacingAFailure: Close racing a failed connection that
// schedules its restart neither counts a connect while Close waits (the
// race detector's WaitGroup misuse, and a Close waiting for the hour-long
// restart delay) nor leaves a restart armed after it.
func TestCloseRacingAFailure(t *testing.T) {
	for range 200 {
		u := New(Options{Name: "flaky", RestartDelays: []time.Duration{time.Hour},
			Dial: func(context.Context, func([]byte), func([]byte)) (Conn, error) {
				return nil, errors.New("refused")
			}})
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		go func() { close(started); _ = u.ensure(ctx, nil) }()
		<-started
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := u.Close(cctx)
		timedOut := cctx.Err() != nil
		ccancel()
		if err != nil {
			t.Fatal(err)
		}
		if timedOut {
			t.Fatal("Close waited for a restart scheduled while it ran")
		}
		cancel()
		u.mu.Lock()
		armed := u.redial != nil && u.redial.Stop()
		u.mu.Unlock()
		if armed {
			t.Fatal("a restart was armed after Close")
		}
	}
}

func TestStartingWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		h.srv.block = make(chan struct{})
		ctx, cancel := context.WithTimeout(h.ctx, time.Second)
		defer cancel()
		if _, _, err := h.u.Join(ctx, &fakeDown{}, initMsg(`1`, serverVersion, "")); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Join while starting: %v", err)
		}
		close(h.srv.block)
		synctest.Wait()
		wantState(t, h.u, Ready)
	})
}

func TestStartAndOnState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []State
		h := newHarness(t, Options{Shared: true, Name: "named", OnState: func(s State) {
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		}})
		if h.u.Name() != "named" {
			t.Fatalf("Name() = %q", h.u.Name())
		}
		wantState(t, h.u, Idle)
		h.u.Start()
		synctest.Wait()
		wantState(t, h.u, Ready)
		h.u.Start() // no-op once started
		synctest.Wait()
		if n := h.srv.numConns(); n != 1 {
			t.Fatalf("%d connections", n)
		}
		mu.Lock()
		slices.Sort(seen)
		got := slices.Clone(seen)
		mu.Unlock()
		if !slices.Equal(got, []State{Starting, Ready}) {
			t.Fatalf("OnState saw %v", got)
		}
		// Start must not have sent the handshake with a member's params.
		if str(h.lastSent("initialize").Params, "clientInfo", "name") != "switchboard" {
			t.Fatal("unexpected initialize params")
		}
	})
}

func TestStateString(t *testing.T) {
	want := map[State]string{Idle: "idle", Starting: "starting", Ready: "ready", Restarting: "restarting", Failed: "failed", Closed: "closed"}
	for s, w := range want {
		if s.String() != w {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), w)
		}
	}
}

func TestPermanentError(t *testing.T) {
	base := errors.New("401")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"plain", base, false},
		{"nil", nil, false},
		{"permanent", Permanent(base), true},
		{"wrapped permanent", errors.Join(errors.New("x"), Permanent(base)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.want {
				t.Errorf("IsPermanent = %v, want %v", got, tt.want)
			}
		})
	}
	p := Permanent(base)
	if p.Error() != "401" || !errors.Is(p, base) {
		t.Errorf("Permanent(%v) = %v", base, p)
	}
}

// TestRetryFailedBackoff: each retry that fails again doubles the cool-down
// (capped by RetryFailedMax), NextRetry tells when; a retry that reaches
// Ready resets it; Retry (a reload) starts a Failed upstream at once.
func TestRetryFailedBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true, RetryFailedAfter: 10 * time.Second, RetryFailedMax: 25 * time.Second})
		failing := true
		var mu sync.Mutex
		h.srv.mu.Lock()
		h.srv.dialErr = func(int) error {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return errors.New("connection refused")
			}
			return nil
		}
		h.srv.mu.Unlock()
		join := func() error {
			_, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, ""))
			return err
		}
		if err := join(); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("first Join: %v", err)
		}
		wantState(t, h.u, Failed)
		// Cool-downs: 10 s, 20 s, then capped at 25 s.
		for i, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second, 25 * time.Second} {
			failedAt := time.Now()
			if got := h.u.NextRetry(); !got.Equal(failedAt.Add(wait)) {
				t.Fatalf("retry %d: NextRetry in %v, want %v", i, got.Sub(failedAt), wait)
			}
			dials := len(h.srv.dialTimes())
			time.Sleep(wait - time.Millisecond)
			if err := join(); !errors.Is(err, ErrUnavailable) || len(h.srv.dialTimes()) != dials {
				t.Fatalf("retry %d: Join within the cool-down: %v, %d dials (had %d)", i, err, len(h.srv.dialTimes()), dials)
			}
			time.Sleep(time.Millisecond)
			if err := join(); !errors.Is(err, ErrUnavailable) || len(h.srv.dialTimes()) != dials+1 {
				t.Fatalf("retry %d: Join after the cool-down: %v, %d dials (had %d)", i, err, len(h.srv.dialTimes()), dials)
			}
		}
		// A reload retries at once, and still fails: the backoff goes on.
		if !h.u.Retry() {
			t.Fatal("Retry of a Failed upstream returned false")
		}
		synctest.Wait()
		wantState(t, h.u, Failed)
		if got := h.u.NextRetry().Sub(time.Now()); got != 25*time.Second {
			t.Fatalf("after a failed Retry: next in %v, want 25s", got)
		}
		// The server works again: Retry brings it back, Ready resets the backoff.
		mu.Lock()
		failing = false
		mu.Unlock()
		h.u.Retry()
		synctest.Wait()
		wantState(t, h.u, Ready)
		if !h.u.NextRetry().IsZero() || h.u.Retry() {
			t.Fatal("a Ready upstream has a next retry, or was retried")
		}
		if err := join(); err != nil {
			t.Fatalf("Join once recovered: %v", err)
		}
		h.srv.conn(t).end(errors.New("crashed"))
		synctest.Wait()
		wantState(t, h.u, Failed)
		if got := h.u.NextRetry().Sub(time.Now()); got != 10*time.Second {
			t.Fatalf("after Ready then Failed: next in %v, want 10s (reset)", got)
		}
	})
}
