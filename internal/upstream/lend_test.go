package upstream

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// boundDown is a CallBound fakeDown: a member lent to one request at a
// time (package era).
type boundDown struct{ fakeDown }

func (*boundDown) CallBound() {}

// TestCallBoundMembers: members whose downstream is CallBound get a
// server→client request only on the call that raised it. With none of
// their calls in flight it is refused at once (never delivered where
// nobody answers), with several members' calls in flight it is refused
// (never guessed), and a member is Idle again once its call ended, so it
// can serve the next request.
func TestCallBoundMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{})
		da, db := &boundDown{}, &boundDown{}
		a, _, err := h.u.Join(h.ctx, da, initMsg(`0`, serverVersion, `{"sampling":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		conn := h.srv.conn(t)
		if !a.Idle() {
			t.Fatalf("a new member is not idle")
		}

		// The only member, nothing in flight: refused at once.
		conn.send(jsonrpc.NewRequest(json.RawMessage(`"s1"`), "sampling/createMessage", json.RawMessage(`{}`)))
		if r := conn.sent(""); len(r) != 1 || string(r[0].ID) != `"s1"` || errCode(t, r[0]) != mcp.CodeRequestRefused {
			t.Fatalf("refusal = %v", r)
		}
		if got := da.take(); len(got) != 0 {
			t.Fatalf("the call-bound downstream was given %v", got)
		}

		// Its call in flight: the request is that call's.
		ca := h.call(a, `1`, "tools/call", `{"name":"ask"}`)
		if a.Idle() {
			t.Fatalf("a member with a call in flight is idle")
		}
		conn.send(jsonrpc.NewRequest(json.RawMessage(`"s2"`), "sampling/createMessage", json.RawMessage(`{}`)))
		if m := next(t, ca); m.Method != "sampling/createMessage" {
			t.Fatalf("call a got %s", m)
		}
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, json.RawMessage(`{}`)))
		if r := next(t, ca); !r.IsResponse() {
			t.Fatalf("call a: %s", r)
		}
		if !a.Idle() {
			t.Fatalf("the member is not idle after its call ended")
		}

		// Two members' calls in flight: refused, neither call gets it.
		b, _, err := h.u.Join(h.ctx, db, initMsg(`0`, serverVersion, `{"sampling":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		ca = h.call(a, `2`, "tools/call", `{"name":"x"}`)
		cb := h.call(b, `2`, "tools/call", `{"name":"y"}`)
		conn.send(jsonrpc.NewRequest(json.RawMessage(`"s3"`), "sampling/createMessage", json.RawMessage(`{}`)))
		refused := false
		for _, r := range conn.sent("") {
			refused = refused || string(r.ID) == `"s3"` && errCode(t, r) == mcp.CodeRequestRefused
		}
		if !refused {
			t.Fatalf("a request with two members' calls in flight was not refused: %v", conn.sent(""))
		}
		noNext(t, ca)
		noNext(t, cb)
		b.Leave()
		if b.Idle() {
			t.Fatalf("a member that left is idle")
		}
	})
}

// TestStop: Stop ends the connection of an upstream nobody uses and makes
// it Idle, without a restart; the next use dials a new one. It stops
// nothing while a request is in flight or a member is attached.
func TestStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Era: Modern, RestartDelays: []time.Duration{time.Second}})
		c, err := h.u.CallStateless(h.ctx, req(`1`, "server/discover", ""))
		if err != nil {
			t.Fatal(err)
		}
		first := h.srv.conn(t)
		if h.u.Stop(h.ctx) {
			t.Fatalf("Stop stopped a connection with a request in flight")
		}
		first.send(jsonrpc.NewResult(h.lastSent("server/discover").ID, json.RawMessage(`{}`)))
		next(t, c)
		if !h.u.Stop(h.ctx) {
			t.Fatalf("Stop did not stop an unused connection")
		}
		if !first.isDone() {
			t.Fatalf("the connection is still open")
		}
		time.Sleep(time.Minute) // the restart delay, many times over
		synctest.Wait()
		if st, _ := h.u.State(); st != Idle || h.srv.numConns() != 1 || h.u.Restarts() != 0 {
			t.Fatalf("after Stop: state %v, %d connections, %d restarts; want idle, 1, 0", st, h.srv.numConns(), h.u.Restarts())
		}
		if h.u.Stop(h.ctx) {
			t.Fatalf("Stop of an idle upstream reported a stop")
		}
		c, err = h.u.CallStateless(h.ctx, req(`2`, "tools/list", ""))
		if err != nil {
			t.Fatalf("a call after Stop: %v", err)
		}
		if h.srv.numConns() != 2 {
			t.Fatalf("%d connections; want a new one for the call after Stop", h.srv.numConns())
		}
		h.srv.conn(t).send(jsonrpc.NewResult(h.lastSent("tools/list").ID, json.RawMessage(`{"tools":[]}`)))
		if r := next(t, c); string(r.Result) != `{"tools":[]}` {
			t.Fatalf("response %s", r)
		}

		// A legacy upstream with a member attached is in use.
		l := newHarness(t, Options{})
		m, _ := l.join("")
		if l.u.Stop(l.ctx) {
			t.Fatalf("Stop stopped a connection with a member attached")
		}
		m.Leave()
		if !l.u.Stop(l.ctx) {
			t.Fatalf("Stop did not stop the legacy connection once its member left")
		}
		// The next member starts it again, with its own initialize.
		l.join(`{"roots":{}}`)
		if l.srv.numConns() != 2 || raw(l.lastSent("initialize").Params, "capabilities") != `{"roots":{}}` {
			t.Fatalf("%d connections, initialize capabilities %s", l.srv.numConns(), raw(l.lastSent("initialize").Params, "capabilities"))
		}
	})
}
