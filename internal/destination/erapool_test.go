package destination

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/era"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/stdio"
)

// The legacy pool behind era.ModernOverLegacy, driven with 2026-07-28
// requests against the test binary's own stdio server (mode plain, a
// legacy-only server whose "ask" tool sends sampling/createMessage and
// whose "wait" tool waits for "release").

// poolDest returns a destination pinned to the legacy era, its translator
// and its pool holding at most max connections.
func poolDest(t *testing.T, max int) (*era.ModernOverLegacy, *legacyPool) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := New(Options{Name: "d", Era: era.Legacy, Timeout: 30 * time.Second, RestartDelays: make([]time.Duration, 3),
		Stdio: &stdio.Spec{Argv: []string{exe}, Env: stdio.Env(map[string]string{envServerMode: "plain", "GORACE": "atexit_sleep_ms=0"})}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		d.Close(ctx)
	})
	tr, err := d.eras.modernOverLegacy()
	if err != nil {
		t.Fatal(err)
	}
	d.eras.pool.max = max
	return tr, d.eras.pool
}

// modernCall is a 2026-07-28 tools/call declaring caps; more are extra
// members of params.
func modernCall(t *testing.T, id int, tool, args, caps, more string) *jsonrpc.Message {
	t.Helper()
	if more != "" {
		more = "," + more
	}
	m, err := jsonrpc.Decode([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s}%s}}`, id, tool, args, caps, more)))
	if err != nil {
		t.Fatal(err)
	}
	m.Detach()
	return m
}

// send serves req and returns its call.
func send(t *testing.T, tr *era.ModernOverLegacy, req *jsonrpc.Message) session.Call {
	t.Helper()
	c, err := tr.Stateless(t.Context(), req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Params, err)
	}
	return c
}

// final reads c to its response (related messages are skipped).
func final(t *testing.T, c session.Call) *jsonrpc.Message {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		m, ended := c.Poll()
		switch {
		case m != nil && m.IsResponse():
			return m
		case m != nil:
			continue
		case ended:
			t.Fatalf("the call ended without a response")
		}
		select {
		case <-c.Ready():
		case <-deadline.C:
			t.Fatalf("no response within 60 s")
		}
	}
}

func resultText(m *jsonrpc.Message) string {
	s, _ := jsonrpc.StringMember(m.Result, "structuredContent", "text")
	return s
}

// TestEraPoolLends: a translated request borrows a member of its
// capability set's connection and gives it back, so sequential requests
// reuse one member and concurrent ones get one each (kept for the next
// ones); no connection is made per request.
func TestEraPoolLends(t *testing.T) {
	tr, pool := poolDest(t, 0)
	for i := range 3 {
		if r := final(t, send(t, tr, modernCall(t, i, "echo", `{"text":"hi"}`, `{}`, ""))); resultText(r) != "hi" {
			t.Fatalf("echo %d: %s", i, r.Encode())
		}
		if conns, lent, parked, idle := pool.stats(); conns != 1 || lent != 0 || parked != 0 || idle != 1 {
			t.Fatalf("after echo %d: %d connections, %d lent, %d parked, %d idle; want 1, 0, 0, 1", i, conns, lent, parked, idle)
		}
	}
	// Three in flight at once: three members, all kept afterwards.
	var waits []session.Call
	for i := range 3 {
		c := send(t, tr, modernCall(t, 10+i, "wait", fmt.Sprintf(`{"key":"w%d"}`, i), `{}`, ""))
		waits = append(waits, c)
	}
	if _, lent, _, idle := pool.stats(); lent != 3 || idle != 0 {
		t.Fatalf("three calls in flight: %d lent, %d idle; want 3, 0", lent, idle)
	}
	for i, c := range waits {
		final(t, send(t, tr, modernCall(t, 20+i, "release", fmt.Sprintf(`{"key":"w%d"}`, i), `{}`, "")))
		if r := final(t, c); resultText(r) != fmt.Sprintf("released:w%d", i) {
			t.Fatalf("wait %d: %s", i, r.Encode())
		}
	}
	// Four: the three waits and the release beside them.
	if conns, lent, _, idle := pool.stats(); conns != 1 || lent != 0 || idle != 4 {
		t.Fatalf("after the waits: %d connections, %d lent, %d idle; want 1, 0, 4", conns, lent, idle)
	}
}

// TestEraPoolParkedCallsYield: a parked MRTR call holds its member, never
// another request's: while it waits, requests of the same capabilities are
// served (a server→client request among them goes to its own call), and a
// new capability set retires the connection whose calls are all parked,
// ending them (their requestState then reads as expired); when every
// connection has a request in flight, a new capability set gets a clear
// 503-class error instead of another process.
func TestEraPoolParkedCallsYield(t *testing.T) {
	tr, pool := poolDest(t, 2)
	sampling := `{"sampling":{}}`
	ask := func(id int, caps, text string) string {
		t.Helper()
		r := final(t, send(t, tr, modernCall(t, id, "ask", fmt.Sprintf(`{"text":%q}`, text), caps, "")))
		if v, _ := jsonrpc.StringMember(r.Result, "resultType"); v != "input_required" {
			t.Fatalf("ask %d: %s; want input_required", id, r.Encode())
		}
		// The server's question is this call's own.
		if !strings.Contains(string(jsonrpc.Member(r.Result, "inputRequests", "sampling")), "question: "+text) {
			t.Fatalf("ask %d was asked %s; want its own question %q", id, r.Result, text)
		}
		token, _ := jsonrpc.StringMember(r.Result, "requestState")
		return token
	}
	answer := func(id int, caps, token, text string) *jsonrpc.Message {
		t.Helper()
		more := fmt.Sprintf(`"requestState":%q,"inputResponses":{"sampling":{"role":"assistant","model":"m","content":{"type":"text","text":%q}}}`, token, text)
		return final(t, send(t, tr, modernCall(t, 99, "ask", `{"text":"x"}`, caps, more)))
	}

	a := ask(1, sampling, "for a")
	// Parked: the same capabilities are served meanwhile, and a request
	// the server raises now is the new call's (the parked one is not in
	// flight as far as the server's requests go).
	if r := final(t, send(t, tr, modernCall(t, 2, "echo", `{"text":"meanwhile"}`, sampling, ""))); resultText(r) != "meanwhile" {
		t.Fatalf("echo beside a parked call: %s", r.Encode())
	}
	b := ask(3, sampling, "for b")
	if _, lent, parked, _ := pool.stats(); lent != 2 || parked != 2 {
		t.Fatalf("two parked calls: %d lent, %d parked", lent, parked)
	}
	if r := answer(4, sampling, b, "answer b"); resultText(r) != "answer:answer b" {
		t.Fatalf("resume b: %s", r.Encode())
	}
	if r := answer(5, sampling, a, "answer a"); resultText(r) != "answer:answer a" {
		t.Fatalf("resume a: %s", r.Encode())
	}

	// Two connections (the bound), one with a parked call: a third
	// capability set retires it.
	other := `{"sampling":{},"experimental":{"other":{}}}`
	c := ask(6, sampling, "parked on the first connection")
	if r := final(t, send(t, tr, modernCall(t, 7, "echo", `{"text":"x"}`, other, ""))); resultText(r) != "x" {
		t.Fatalf("echo on the second connection: %s", r.Encode())
	}
	if r := final(t, send(t, tr, modernCall(t, 8, "echo", `{"text":"third"}`, `{"roots":{}}`, ""))); resultText(r) != "third" {
		t.Fatalf("a third capability set: %s", r.Encode())
	}
	if conns, _, parked, _ := pool.stats(); conns != 2 || parked != 0 {
		t.Fatalf("after the third: %d connections, %d parked; want 2, 0", conns, parked)
	}
	if tr.Parked() != 0 {
		t.Fatalf("%d parked states left; the retired connection's call should be gone", tr.Parked())
	}
	r := answer(9, sampling, c, "too late")
	if e := r.ErrorOf(); e == nil || e.Code != jsonrpc.InvalidParams || !strings.Contains(e.Message, "invalid requestState") {
		t.Fatalf("retry of a call whose connection was retired: %s", r.Encode())
	}

	// Every connection with a request in flight: refused, clearly.
	w1 := send(t, tr, modernCall(t, 10, "wait", `{"key":"k1"}`, other, ""))
	w2 := send(t, tr, modernCall(t, 11, "wait", `{"key":"k2"}`, `{"roots":{}}`, ""))
	_, err := tr.Stateless(t.Context(), modernCall(t, 12, "echo", `{"text":"x"}`, `{"elicitation":{}}`, ""))
	if !errors.Is(err, upstream.ErrUnavailable) || !strings.Contains(err.Error(), "have requests in flight") {
		t.Fatalf("a new capability set with every connection busy: %v", err)
	}
	final(t, send(t, tr, modernCall(t, 13, "release", `{"key":"k1"}`, other, "")))
	final(t, send(t, tr, modernCall(t, 14, "release", `{"key":"k2"}`, `{"roots":{}}`, "")))
	final(t, w1)
	final(t, w2)
	if r := final(t, send(t, tr, modernCall(t, 15, "echo", `{"text":"now"}`, `{"elicitation":{}}`, ""))); resultText(r) != "now" {
		t.Fatalf("once a connection is free: %s", r.Encode())
	}
}

// A pooled connection that nothing uses for the pool's idle time is
// retired (its process with it); one with a request in flight, or used
// within the idle time, is kept; the next request makes a new one.
func TestEraPoolIdleRetired(t *testing.T) {
	tr, pool := poolDest(t, 2)
	pool.idle = time.Hour // the sweeps below are called by hand
	caps := `{"sampling":{}}`
	if r := final(t, send(t, tr, modernCall(t, 1, "echo", `{"text":"a"}`, caps, ""))); resultText(r) != "a" {
		t.Fatalf("echo: %s", r.Encode())
	}
	age := func() {
		pool.mu.Lock()
		for _, c := range pool.conns {
			c.last = time.Now().Add(-2 * time.Hour)
		}
		pool.mu.Unlock()
	}
	conns := func() int { n, _, _, _ := pool.stats(); return n }

	w := send(t, tr, modernCall(t, 2, "wait", `{"key":"k"}`, caps, ""))
	age()
	pool.sweepIdle()
	if conns() != 1 {
		t.Fatal("a connection with a request in flight was retired as idle")
	}
	final(t, send(t, tr, modernCall(t, 3, "release", `{"key":"k"}`, caps, "")))
	final(t, w)
	pool.sweepIdle()
	if conns() != 1 {
		t.Fatal("a connection used just now was retired as idle")
	}
	age()
	pool.sweepIdle()
	if conns() != 0 {
		t.Fatal("a connection unused for its idle time is still pooled")
	}
	if r := final(t, send(t, tr, modernCall(t, 4, "echo", `{"text":"again"}`, caps, ""))); resultText(r) != "again" {
		t.Fatalf("echo after the retirement: %s", r.Encode())
	}

	// The pool's own timer does the same.
	tr, pool = poolDest(t, 2)
	pool.idle = 50 * time.Millisecond
	if r := final(t, send(t, tr, modernCall(t, 5, "echo", `{"text":"b"}`, caps, ""))); resultText(r) != "b" {
		t.Fatalf("echo: %s", r.Encode())
	}
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle connection was not retired by the pool's timer within 20 s")
		}
		<-tick.C
	}
}

// stats returns the pool's connections and, over all of them, the members
// lent, parked and idle (for tests and status).
func (p *legacyPool) stats() (conns, lent, parked, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		lent += c.lent
		parked += c.parked
		idle += len(c.free)
	}
	return len(p.conns), lent, parked, idle
}
