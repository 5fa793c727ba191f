package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

func TestNegotiate(t *testing.T) {
	tests := []struct {
		name, requested, server, want string
	}{
		{"same", "2025-06-18", "2025-06-18", "2025-06-18"},
		{"client older", "2024-11-05", "2025-06-18", "2024-11-05"},
		{"client newer", "2025-11-25", "2025-06-18", "2025-06-18"},
		{"client unknown", "1999-01-01", "2025-06-18", "2025-06-18"},
		{"client empty", "", "2025-03-26", "2025-03-26"},
		{"server unknown, client known", "2025-03-26", "2030-01-01", "2025-03-26"},
		{"both unknown", "1999-01-01", "2030-01-01", "2030-01-01"},
		{"no server version, client known", "2024-11-05", "", "2024-11-05"},
		{"no server version, client unknown", "1999-01-01", "", mcp.LatestLegacyVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := negotiate(tt.requested, tt.server); got != tt.want {
				t.Errorf("negotiate(%q, %q) = %q, want %q", tt.requested, tt.server, got, tt.want)
			}
		})
	}
}

func TestJoinAnswersFromCache(t *testing.T) {
	tests := []struct {
		name      string
		requested string
		want      string // protocolVersion in the result
	}{
		{"same as server", serverVersion, serverVersion},
		{"older than server", "2025-03-26", "2025-03-26"},
		{"newer than server", "2025-11-25", serverVersion},
		{"unknown", "2099-01-01", serverVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				// A first member starts the server.
				if _, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, "")); err != nil {
					t.Fatalf("first Join: %v", err)
				}
				m, res, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`"init-7"`, tt.requested, ""))
				if err != nil {
					t.Fatalf("Join: %v", err)
				}
				if string(res.ID) != `"init-7"` {
					t.Errorf("result id = %s, want the client's", res.ID)
				}
				if got := str(res.Result, "protocolVersion"); got != tt.want {
					t.Errorf("protocolVersion = %q, want %q", got, tt.want)
				}
				if m.Version() != tt.want {
					t.Errorf("Version() = %q, want %q", m.Version(), tt.want)
				}
				// Everything but the version is the server's result.
				wantRes := bytes.Replace(fakeInitResult, []byte(serverVersion), []byte(tt.want), 1)
				if !bytes.Equal(res.Result, wantRes) {
					t.Errorf("result = %s, want %s", res.Result, wantRes)
				}
				c := h.srv.conn(t)
				if got := c.methods(); !slices.Equal(got, []string{"initialize", "notifications/initialized"}) {
					t.Errorf("server was sent %v, want one handshake", got)
				}
				if h.srv.numConns() != 1 {
					t.Errorf("%d connections, want 1", h.srv.numConns())
				}
			})
		})
	}
}

func TestHandshakeParams(t *testing.T) {
	tests := []struct {
		name       string
		shared     bool
		wantClient string // clientInfo.name sent to the server
		wantCaps   string
	}{
		{"shared uses the gateway identity", true, "switchboard", string(gatewayCapabilities)},
		{"isolated forwards the member's params", false, "client", `{"sampling":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: tt.shared})
				h.join(`{"sampling":{}}`)
				init := h.lastSent("initialize")
				if got := str(init.Params, "clientInfo", "name"); got != tt.wantClient {
					t.Errorf("clientInfo.name = %q, want %q", got, tt.wantClient)
				}
				if got := raw(init.Params, "capabilities"); got != tt.wantCaps {
					t.Errorf("capabilities = %s, want %s", got, tt.wantCaps)
				}
			})
		})
	}
}

func TestModernEra(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Era: Modern})
		if _, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`1`, serverVersion, "")); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Join on a modern upstream: %v, want ErrUnavailable", err)
		}
		c, err := h.u.CallStateless(h.ctx, req(`"a"`, "tools/list", ""))
		if err != nil {
			t.Fatalf("CallStateless: %v", err)
		}
		conn := h.srv.conn(t)
		if got := conn.methods(); !slices.Equal(got, []string{"tools/list"}) {
			t.Fatalf("server was sent %v, want no handshake", got)
		}
		// A server→client request while only stateless calls are in
		// flight has no session to go to: refused.
		conn.send(jsonrpc.NewRequest(json.RawMessage(`"s1"`), "roots/list", nil))
		refusal := conn.sent("")
		if len(refusal) != 1 || string(refusal[0].ID) != `"s1"` || errCode(t, refusal[0]) != mcp.CodeRequestRefused {
			t.Fatalf("refusal = %v", refusal)
		}
		conn.send(jsonrpc.NewResult(h.lastSent("tools/list").ID, json.RawMessage(`{"tools":[]}`)))
		if r := next(t, c); string(r.ID) != `"a"` || string(r.Result) != `{"tools":[]}` {
			t.Fatalf("response = %s", r)
		}

		// subscriptions/listen: notifications tagged with the listen
		// request's internal id reach that call, tagged with the client's.
		l, err := h.u.CallStateless(h.ctx, req(`"L"`, "subscriptions/listen", ""))
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		if !l.LongLived() || l.Method() != "subscriptions/listen" {
			t.Errorf("LongLived = %v, Method = %q", l.LongLived(), l.Method())
		}
		internal := string(h.lastSent("subscriptions/listen").ID)
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"` + mcp.MetaSubscriptionID + `":` + internal + `}}}`)
		n := next(t, l)
		if got := raw(n.Params, "_meta", mcp.MetaSubscriptionID); got != `"L"` {
			t.Errorf("subscription id = %s, want the client's", got)
		}
		// Tagged with an id nobody has: dropped.
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"` + mcp.MetaSubscriptionID + `":999}}}`)
		noNext(t, l)
	})
}

// TestRequestIDs: two members using the same request id get distinct
// internal ids and each gets its own response under its own id.
func TestRequestIDs(t *testing.T) {
	tests := []struct {
		name       string
		idA, idB   string
		answerBFst bool
	}{
		{"same integer", `1`, `1`, false},
		{"same string", `"x"`, `"x"`, true},
		{"integer and string that look alike", `7`, `"7"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				a, _ := h.join("")
				b, _ := h.join("")
				ca := h.call(a, tt.idA, "tools/call", `{"name":"a"}`)
				cb := h.call(b, tt.idB, "tools/call", `{"name":"b"}`)
				sent := h.srv.conn(t).sent("tools/call")
				if len(sent) != 2 {
					t.Fatalf("%d tools/call sent, want 2", len(sent))
				}
				if bytes.Equal(sent[0].ID, sent[1].ID) {
					t.Fatalf("both calls went out as id %s", sent[0].ID)
				}
				for _, s := range sent {
					if _, ok := jsonrpc.ParseIntID(s.ID); !ok {
						t.Errorf("internal id %s is not an integer", s.ID)
					}
				}
				if str(sent[0].Params, "name") != "a" || str(sent[1].Params, "name") != "b" {
					t.Fatalf("params changed: %s %s", sent[0].Params, sent[1].Params)
				}
				order := []int{0, 1}
				if tt.answerBFst {
					order = []int{1, 0}
				}
				for _, i := range order {
					h.srv.conn(t).send(jsonrpc.NewResult(sent[i].ID, jsonrpc.Marshal(map[string]string{"from": str(sent[i].Params, "name")})))
				}
				for _, x := range []struct {
					c      *Call
					id, by string
				}{{ca, tt.idA, "a"}, {cb, tt.idB, "b"}} {
					r := next(t, x.c)
					if string(r.ID) != x.id || str(r.Result, "from") != x.by {
						t.Errorf("member %s got %s, want id %s from %s", x.by, r, x.id, x.by)
					}
					if m, ended := x.c.Poll(); m != nil || !ended {
						t.Errorf("call %s did not end after its response", x.by)
					}
				}
			})
		})
	}
}

func TestDuplicateID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, _ := h.join("")
		b, _ := h.join("")
		h.call(a, `1`, "tools/call", "")
		if _, err := a.Call(h.ctx, req(`1`, "tools/list", "")); !errors.Is(err, ErrDuplicateID) {
			t.Fatalf("second call with id 1: %v, want ErrDuplicateID", err)
		}
		// Another member's ids are its own.
		h.call(b, `1`, "tools/call", "")
		if n := len(h.srv.conn(t).sent("tools/call")); n != 2 {
			t.Fatalf("%d calls sent, want 2", n)
		}
		if n := len(h.srv.conn(t).sent("tools/list")); n != 0 {
			t.Fatalf("the duplicate was sent")
		}
		// Once answered, the id may be used again.
		h.srv.conn(t).send(jsonrpc.NewResult(h.srv.conn(t).sent("tools/call")[0].ID, nil))
		h.call(a, `1`, "tools/list", "")
	})
}

func TestMemberCallRefusesInitialize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, _ := h.join("")
		_, err := a.Call(h.ctx, initMsg(`9`, serverVersion, ""))
		var e *jsonrpc.Error
		if !errors.As(err, &e) || e.Code != jsonrpc.InvalidRequest {
			t.Fatalf("initialize on a joined member: %v", err)
		}
	})
}

func TestProgress(t *testing.T) {
	tests := []struct {
		name  string
		token string // raw JSON; "" for no token
	}{
		{"string token", `"tok-A"`},
		{"integer token", `42`},
		{"no token", ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				a, da := h.join("")
				b, db := h.join("")
				params := `{"name":"x"}`
				if tt.token != "" {
					params = `{"name":"x","_meta":{"progressToken":` + tt.token + `,"other":1}}`
				}
				ca := h.call(a, `1`, "tools/call", params)
				cb := h.call(b, `1`, "tools/call", `{"name":"y","_meta":{"progressToken":"tok-B"}}`)
				sent := h.srv.conn(t).sent("tools/call")
				internalA, internalB := sent[0].ID, sent[1].ID
				if tt.token == "" {
					if jsonrpc.Member(sent[0].Params, "_meta") != nil {
						t.Fatalf("a _meta was added: %s", sent[0].Params)
					}
				} else {
					if got := raw(sent[0].Params, "_meta", "progressToken"); got != string(internalA) {
						t.Fatalf("token sent = %s, want the internal id %s", got, internalA)
					}
					if raw(sent[0].Params, "_meta", "other") != "1" {
						t.Fatalf("other _meta lost: %s", sent[0].Params)
					}
				}
				progress := func(tok json.RawMessage, n int) {
					h.srv.conn(t).send(jsonrpc.NewNotification("notifications/progress",
						json.RawMessage(`{"progressToken":`+string(tok)+`,"progress":`+string(jsonrpc.IntID(int64(n)))+`}`)))
				}
				progress(internalA, 1)
				progress(internalB, 2)
				progress(json.RawMessage(`"tok-A"`), 3) // the client's token is not the server's
				progress(json.RawMessage(`12345`), 4)   // nobody's
				if tt.token != "" {
					p := next(t, ca)
					if p.Method != "notifications/progress" || raw(p.Params, "progressToken") != tt.token || raw(p.Params, "progress") != "1" {
						t.Errorf("a got %s", p)
					}
				}
				noNext(t, ca)
				if p := next(t, cb); raw(p.Params, "progressToken") != `"tok-B"` || raw(p.Params, "progress") != "2" {
					t.Errorf("b got %s", p)
				}
				noNext(t, cb)
				if m := append(da.take(), db.take()...); len(m) != 0 {
					t.Errorf("listen streams got %v", m)
				}
			})
		})
	}
}

// TestClientCancellation: a client's notifications/cancelled reaches the
// server only for that client's own request, under the internal id.
func TestClientCancellation(t *testing.T) {
	tests := []struct {
		name       string
		from       string // "a" or "b"
		requestID  string
		wantCancel bool
	}{
		{"own request", "a", `1`, true},
		{"id only the other member has", "a", `7`, false},
		{"same id, other member's own", "b", `1`, true},
		{"unknown id", "a", `99`, false},
		{"no requestId", "a", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				a, _ := h.join("")
				b, _ := h.join("")
				calls := map[string]*Call{
					"a1": h.call(a, `1`, "tools/call", `{"name":"a1"}`),
					"b1": h.call(b, `1`, "tools/call", `{"name":"b1"}`),
					"b7": h.call(b, `7`, "tools/call", `{"name":"b7"}`),
				}
				internal := map[string]json.RawMessage{}
				for _, s := range h.srv.conn(t).sent("tools/call") {
					internal[str(s.Params, "name")] = s.ID
				}
				from := map[string]*Member{"a": a, "b": b}[tt.from]
				params := `{"reason":"stop"}`
				if tt.requestID != "" {
					params = `{"requestId":` + tt.requestID + `,"reason":"stop"}`
				}
				if err := from.Notify(h.ctx, jsonrpc.NewNotification("notifications/cancelled", json.RawMessage(params))); err != nil {
					t.Fatalf("Notify: %v", err)
				}
				sent := h.srv.conn(t).sent("notifications/cancelled")
				if !tt.wantCancel {
					if len(sent) != 0 {
						t.Fatalf("cancellation forwarded: %v", sent)
					}
					for name, c := range calls {
						noNext(t, c)
						_ = name
					}
					return
				}
				key := tt.from + tt.requestID
				if len(sent) != 1 {
					t.Fatalf("%d cancellations sent, want 1", len(sent))
				}
				if got := raw(sent[0].Params, "requestId"); got != string(internal[key]) {
					t.Errorf("requestId = %s, want internal id %s", got, internal[key])
				}
				if str(sent[0].Params, "reason") != "stop" {
					t.Errorf("reason lost: %s", sent[0].Params)
				}
				r := next(t, calls[key])
				if string(r.ID) != tt.requestID || errCode(t, r) != mcp.CodeRequestRefused {
					t.Errorf("cancelled call got %s", r)
				}
				for name, c := range calls {
					if name != key {
						noNext(t, c)
					}
				}
				// The id is free again, and the late response is dropped.
				h.srv.conn(t).send(jsonrpc.NewResult(internal[key], nil))
				h.call(from, tt.requestID, "tools/list", "")
			})
		})
	}
}

func TestClientNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, _ := h.join(`{"roots":{"listChanged":true}}`)
		before := len(h.srv.conn(t).all())
		if err := a.Notify(h.ctx, jsonrpc.NewNotification("notifications/initialized", nil)); err != nil {
			t.Fatal(err)
		}
		if len(h.srv.conn(t).all()) != before {
			t.Fatalf("notifications/initialized was forwarded; Switchboard ran the handshake")
		}
		if err := a.Notify(h.ctx, jsonrpc.NewNotification("notifications/roots/list_changed", nil)); err != nil {
			t.Fatal(err)
		}
		if n := len(h.srv.conn(t).sent("notifications/roots/list_changed")); n != 1 {
			t.Fatalf("roots/list_changed sent %d times", n)
		}
	})
}

// TestServerRequestRouting: a server→client request goes to the session
// whose call caused it, and is refused when that cannot be told.
func TestServerRequestRouting(t *testing.T) {
	const withSampling = `{"sampling":{},"roots":{}}`
	tests := []struct {
		name    string
		caps    []string // one member per entry
		calls   []int    // members with a call in flight, in order
		detach  bool     // Abandon(false) the calls
		method  string
		want    string // "call:i", "listen:i", "refused", "nomethod"
		wantOn  int    // for "call": index in calls of the call that gets it
		twoMine bool   // member 0 has two calls; the newest gets it
	}{
		{name: "one owner: its call stream", caps: []string{withSampling, withSampling}, calls: []int{0}, method: "sampling/createMessage", want: "call"},
		{name: "one owner with two calls: the newest", caps: []string{withSampling, withSampling}, calls: []int{0, 0}, method: "sampling/createMessage", want: "call", wantOn: 1},
		{name: "owner's call detached: its listen stream", caps: []string{withSampling, withSampling}, calls: []int{1}, detach: true, method: "roots/list", want: "listen:1"},
		{name: "no calls, one member: listen stream", caps: []string{withSampling}, method: "sampling/createMessage", want: "listen:0"},
		{name: "no calls, two members: refused", caps: []string{withSampling, withSampling}, method: "sampling/createMessage", want: "refused"},
		{name: "two members with calls: refused", caps: []string{withSampling, withSampling}, calls: []int{0, 1}, method: "sampling/createMessage", want: "refused"},
		{name: "capability not declared", caps: []string{`{"roots":{}}`}, calls: []int{0}, method: "sampling/createMessage", want: "nomethod"},
		{name: "elicitation not declared", caps: []string{withSampling}, method: "elicitation/create", want: "nomethod"},
		{name: "elicitation declared", caps: []string{`{"elicitation":{}}`}, method: "elicitation/create", want: "listen:0"},
		{name: "a method needing no capability", caps: []string{""}, calls: []int{0}, method: "x/custom", want: "call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				var ms []*Member
				var ds []*fakeDown
				for _, c := range tt.caps {
					m, d := h.join(c)
					ms, ds = append(ms, m), append(ds, d)
				}
				var calls []*Call
				for i, mi := range tt.calls {
					c := h.call(ms[mi], string(jsonrpc.IntID(int64(i+1))), "tools/call", "")
					if tt.detach {
						c.Abandon(false)
					}
					calls = append(calls, c)
				}
				conn := h.srv.conn(t)
				conn.sendRaw(`{"jsonrpc":"2.0","id":"srv-1","method":"` + tt.method + `","params":{"x":1}}`)
				responses := conn.sent("")
				var got *jsonrpc.Message
				switch tt.want {
				case "refused", "nomethod":
					if len(responses) != 1 || string(responses[0].ID) != `"srv-1"` {
						t.Fatalf("server got %v, want one error response for srv-1", responses)
					}
					want := map[string]int{"refused": mcp.CodeRequestRefused, "nomethod": jsonrpc.MethodNotFound}[tt.want]
					if c := errCode(t, responses[0]); c != want {
						t.Fatalf("error code %d, want %d", c, want)
					}
					for i, d := range ds {
						if m := d.take(); len(m) != 0 {
							t.Errorf("member %d listen got %v", i, m)
						}
					}
					for _, c := range calls {
						if !tt.detach {
							noNext(t, c)
						}
					}
					return
				case "call":
					for i, c := range calls {
						if i == tt.wantOn {
							got = next(t, c)
						}
						noNext(t, c)
					}
					for i, d := range ds {
						if m := d.take(); len(m) != 0 {
							t.Errorf("member %d listen got %v", i, m)
						}
					}
				default: // listen:i
					want := int(tt.want[len(tt.want)-1] - '0')
					for i, d := range ds {
						m := d.take()
						if i != want {
							if len(m) != 0 {
								t.Errorf("member %d listen got %v", i, m)
							}
							continue
						}
						if len(m) != 1 {
							t.Fatalf("member %d listen got %v, want the request", i, m)
						}
						got = m[0]
					}
				}
				if len(responses) != 0 {
					t.Fatalf("server got responses %v", responses)
				}
				if got.Method != tt.method || raw(got.Params, "x") != "1" {
					t.Fatalf("client got %s", got)
				}
				if _, ok := jsonrpc.ParseIntID(got.ID); !ok || string(got.ID) == `"srv-1"` {
					t.Fatalf("request id %s was not rewritten", got.ID)
				}
			})
		})
	}
}

func TestServerPing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		_, da := h.join("")
		_, db := h.join("")
		conn := h.srv.conn(t)
		conn.sendRaw(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		r := conn.sent("")
		if len(r) != 1 || string(r[0].ID) != "5" || errCode(t, r[0]) != 0 {
			t.Fatalf("ping answered %v", r)
		}
		if m := append(da.take(), db.take()...); len(m) != 0 {
			t.Fatalf("ping reached clients: %v", m)
		}
	})
}

// TestClientResponse: a client's response to a server→client request goes
// back under the server's id, and only from the member that was asked.
func TestClientResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, _ := h.join(`{"sampling":{}}`)
		b, _ := h.join(`{"sampling":{}}`)
		ca := h.call(a, `1`, "tools/call", "")
		conn := h.srv.conn(t)
		conn.sendRaw(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`)
		sr := next(t, ca)
		answer := func(m *Member, id json.RawMessage) {
			t.Helper()
			if err := m.Respond(h.ctx, jsonrpc.NewResult(id, json.RawMessage(`{"model":"m"}`))); err != nil {
				t.Fatalf("Respond: %v", err)
			}
		}
		answer(b, sr.ID) // not B's to answer
		if r := conn.sent(""); len(r) != 0 {
			t.Fatalf("a response from the wrong member was forwarded: %v", r)
		}
		answer(a, json.RawMessage(`"s1"`)) // the server's id means nothing to the client side
		answer(a, json.RawMessage(`12345`))
		if r := conn.sent(""); len(r) != 0 {
			t.Fatalf("a response to an unknown id was forwarded: %v", r)
		}
		answer(a, sr.ID)
		r := conn.sent("")
		if len(r) != 1 || string(r[0].ID) != `"s1"` || str(r[0].Result, "model") != "m" {
			t.Fatalf("server got %v, want the result under id \"s1\"", r)
		}
		answer(a, sr.ID) // answered already
		if r := conn.sent(""); len(r) != 1 {
			t.Fatalf("a second response was forwarded: %v", r)
		}
	})
}

// TestServerCancelsServerRequest: the server's notifications/cancelled for
// its own request reaches the member under the rewritten id.
func TestServerCancelsServerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, da := h.join(`{"roots":{}}`)
		_, db := h.join(`{"roots":{}}`)
		ca := h.call(a, `1`, "tools/call", "")
		conn := h.srv.conn(t)
		conn.sendRaw(`{"jsonrpc":"2.0","id":"s2","method":"roots/list"}`)
		sr := next(t, ca)
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"other"}}`)
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`)
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s2","reason":"late"}}`)
		got := da.take()
		if len(got) != 1 || got[0].Method != "notifications/cancelled" || raw(got[0].Params, "requestId") != string(sr.ID) || str(got[0].Params, "reason") != "late" {
			t.Fatalf("a's listen got %v, want the cancellation under id %s", got, sr.ID)
		}
		if m := db.take(); len(m) != 0 {
			t.Fatalf("b got %v", m)
		}
		// The request is over: a's response is dropped.
		_ = a.Respond(h.ctx, jsonrpc.NewResult(sr.ID, nil))
		if r := conn.sent(""); len(r) != 0 {
			t.Fatalf("response to a cancelled request forwarded: %v", r)
		}
	})
}

func TestLogging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, da := h.join("")
		b, db := h.join("")
		c, dc := h.join("") // never sets a level: receives everything
		setLevel := func(m *Member, id, level string) *Call {
			t.Helper()
			call := h.call(m, id, "logging/setLevel", `{"level":"`+level+`"}`)
			synctest.Wait()
			r := next(t, call)
			if string(r.ID) != id || errCode(t, r) != 0 {
				t.Fatalf("setLevel %s answered %s", level, r)
			}
			return call
		}
		levelsSent := func() []string {
			var out []string
			for _, m := range h.srv.conn(t).sent("logging/setLevel") {
				out = append(out, str(m.Params, "level"))
			}
			return out
		}
		setLevel(a, `1`, "warning")
		if got := levelsSent(); !slices.Equal(got, []string{"warning"}) {
			t.Fatalf("levels sent %v", got)
		}
		setLevel(b, `1`, "error") // above the minimum: answered locally
		if got := levelsSent(); !slices.Equal(got, []string{"warning"}) {
			t.Fatalf("levels sent %v, want no new setLevel", got)
		}
		setLevel(b, `2`, "debug") // a new minimum
		if got := levelsSent(); !slices.Equal(got, []string{"warning", "debug"}) {
			t.Fatalf("levels sent %v", got)
		}

		if _, err := a.Call(h.ctx, req(`3`, "logging/setLevel", `{"level":"loud"}`)); err == nil {
			t.Fatal("invalid level accepted")
		} else if e, ok := err.(*jsonrpc.Error); !ok || e.Code != jsonrpc.InvalidParams {
			t.Fatalf("invalid level: %v", err)
		}

		logMsg := func(level string) {
			h.srv.conn(t).sendRaw(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"` + level + `","data":"x"}}`)
		}
		tests := []struct {
			level   string
			a, b, c bool
		}{
			{"debug", false, true, true},
			{"info", false, true, true},
			{"warning", true, true, true},
			{"emergency", true, true, true},
		}
		for _, tt := range tests {
			logMsg(tt.level)
			for _, x := range []struct {
				name string
				d    *fakeDown
				want bool
			}{{"a", da, tt.a}, {"b", db, tt.b}, {"c", dc, tt.c}} {
				if got := len(x.d.take()) == 1; got != x.want {
					t.Errorf("level %s: %s received %v, want %v", tt.level, x.name, got, x.want)
				}
			}
		}

		// With one call in flight the message belongs to it: only its
		// session gets it, on the call stream, if its level admits it.
		ca := h.call(a, `10`, "tools/call", "")
		logMsg("info")
		noNext(t, ca)
		logMsg("error")
		if m := next(t, ca); m.Method != "notifications/message" || str(m.Params, "level") != "error" {
			t.Fatalf("call got %s", m)
		}
		if m := append(append(da.take(), db.take()...), dc.take()...); len(m) != 0 {
			t.Fatalf("listen streams got %v", m)
		}
		h.srv.conn(t).send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))

		// The member with the minimum leaves: the server gets the new
		// minimum (an internal request).
		b.Leave()
		c.Leave()
		synctest.Wait()
		if got := levelsSent(); !slices.Equal(got, []string{"warning", "debug", "warning"}) {
			t.Fatalf("levels sent %v after b left", got)
		}
		if h.u.Members() != 1 {
			t.Fatalf("Members() = %d", h.u.Members())
		}
	})
}

func TestSubscriptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, da := h.join("")
		b, db := h.join("")
		_, dc := h.join("")
		conn := h.srv.conn(t)
		sub := func(m *Member, id, method, uri string) {
			t.Helper()
			c := h.call(m, id, method, `{"uri":"`+uri+`"}`)
			r := next(t, c)
			if string(r.ID) != id || errCode(t, r) != 0 {
				t.Fatalf("%s answered %s", method, r)
			}
		}
		count := func(method string) int { return len(conn.sent(method)) }
		updated := func(uri string) {
			conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"` + uri + `"}}`)
		}
		got := func() []int { return []int{len(da.take()), len(db.take()), len(dc.take())} }

		sub(a, `1`, "resources/subscribe", "file:///x")
		if count("resources/subscribe") != 1 {
			t.Fatal("first subscribe not forwarded")
		}
		sub(b, `1`, "resources/subscribe", "file:///x")
		sub(a, `2`, "resources/subscribe", "file:///x") // again: nothing changes
		if n := count("resources/subscribe"); n != 1 {
			t.Fatalf("subscribe sent %d times, want once", n)
		}
		updated("file:///x")
		if g := got(); !slices.Equal(g, []int{1, 1, 0}) {
			t.Fatalf("updated x delivered %v, want subscribers only", g)
		}
		updated("file:///y")
		if g := got(); !slices.Equal(g, []int{0, 0, 0}) {
			t.Fatalf("updated y delivered %v, want nobody", g)
		}
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
		if g := got(); !slices.Equal(g, []int{1, 1, 1}) {
			t.Fatalf("list_changed delivered %v, want everyone", g)
		}
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		if g := got(); !slices.Equal(g, []int{1, 1, 1}) {
			t.Fatalf("tools list_changed delivered %v, want everyone", g)
		}

		sub(a, `3`, "resources/unsubscribe", "file:///x")
		sub(a, `4`, "resources/unsubscribe", "file:///x") // not subscribed
		if n := count("resources/unsubscribe"); n != 0 {
			t.Fatalf("unsubscribe sent while b still subscribes")
		}
		updated("file:///x")
		if g := got(); !slices.Equal(g, []int{0, 1, 0}) {
			t.Fatalf("updated x delivered %v", g)
		}
		sub(b, `2`, "resources/unsubscribe", "file:///x") // the last one
		if n := count("resources/unsubscribe"); n != 1 {
			t.Fatalf("last unsubscribe sent %d times", n)
		}
		sub(a, `5`, "resources/subscribe", "file:///x")
		if n := count("resources/subscribe"); n != 2 {
			t.Fatalf("subscribe after all left sent %d times, want 2 in all", n)
		}
		if _, err := a.Call(h.ctx, req(`6`, "resources/subscribe", `{"uri":7}`)); err == nil {
			t.Fatal("non-string uri accepted")
		}

		// Leave releases the member's subscriptions.
		a.Leave()
		synctest.Wait()
		if n := count("resources/unsubscribe"); n != 2 {
			t.Fatalf("Leave: unsubscribe sent %d times in all, want 2", n)
		}
		if uri := str(h.lastSent("resources/unsubscribe").Params, "uri"); uri != "file:///x" {
			t.Fatalf("unsubscribed %q", uri)
		}
		updated("file:///x")
		if g := got(); !slices.Equal(g, []int{0, 0, 0}) {
			t.Fatalf("updated after leaving delivered %v", g)
		}
	})
}

func TestLeaveCancelsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, _ := h.join("")
		h.call(a, `1`, "tools/call", "")
		internal := h.lastSent("tools/call").ID
		a.Leave()
		a.Leave() // idempotent
		c := h.lastSent("notifications/cancelled")
		if raw(c.Params, "requestId") != string(internal) {
			t.Fatalf("cancelled %s, want %s", c.Params, internal)
		}
		if n := len(h.srv.conn(t).sent("notifications/cancelled")); n != 1 {
			t.Fatalf("%d cancellations", n)
		}
		if _, err := a.Call(h.ctx, req(`2`, "tools/call", "")); !errors.Is(err, ErrClosed) {
			t.Fatalf("Call after Leave: %v", err)
		}
	})
}

func TestAbandon(t *testing.T) {
	tests := []struct {
		name   string
		cancel bool
	}{
		{"cancel", true},
		{"detach", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				a, da := h.join(`{"sampling":{}}`)
				conn := h.srv.conn(t)
				c := h.call(a, `"q"`, "tools/call", `{"_meta":{"progressToken":"p"}}`)
				internal := h.lastSent("tools/call").ID
				// One progress queued and never read.
				conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(internal) + `,"progress":1}}`)
				c.Abandon(tt.cancel)
				cancels := conn.sent("notifications/cancelled")
				if tt.cancel {
					if len(cancels) != 1 || raw(cancels[0].Params, "requestId") != string(internal) {
						t.Fatalf("cancellations %v, want one for internal id %s", cancels, internal)
					}
					// The client's id is free at once.
					h.call(a, `"q"`, "tools/list", "")
				} else {
					if len(cancels) != 0 {
						t.Fatalf("detach sent %v", cancels)
					}
					if _, err := a.Call(h.ctx, req(`"q"`, "tools/list", "")); !errors.Is(err, ErrDuplicateID) {
						t.Fatalf("id reused while the detached call is in flight: %v", err)
					}
					// The unread progress moved to the listen stream.
					if m := da.take(); len(m) != 1 || raw(m[0].Params, "progressToken") != `"p"` {
						t.Fatalf("listen got %v, want the queued progress", m)
					}
					// Later related messages go there too.
					conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(internal) + `,"progress":2}}`)
					conn.sendRaw(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`)
					m := da.take()
					if len(m) != 2 || raw(m[0].Params, "progress") != "2" || m[1].Method != "sampling/createMessage" {
						t.Fatalf("listen got %v, want the progress and the request", m)
					}
				}
				// The late response is dropped.
				conn.send(jsonrpc.NewResult(internal, nil))
				if m := da.take(); len(m) != 0 {
					t.Fatalf("late response delivered: %v", m)
				}
				// Nothing but what was queued before Abandon, and never a
				// response.
				for m, ended := c.Poll(); !ended; m, ended = c.Poll() {
					if m == nil {
						t.Fatal("abandoned call is not closed")
					}
					if m.IsResponse() || !tt.cancel {
						t.Fatalf("abandoned call still yields %s", m)
					}
				}
				if !tt.cancel {
					h.call(a, `"q"`, "tools/list", "") // free after the response
				}
				c.Abandon(true) // again: nothing more is sent
				if n := len(conn.sent("notifications/cancelled")); n != len(cancels) {
					t.Fatalf("second Abandon sent a cancellation")
				}
			})
		})
	}
}

func TestAbandonLocalCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, _ := h.join("")
		b, _ := h.join("")
		h.call(a, `1`, "resources/subscribe", `{"uri":"u"}`)
		c := h.call(b, `1`, "resources/subscribe", `{"uri":"u"}`) // local
		before := len(h.srv.conn(t).all())
		c.Abandon(true)
		if len(h.srv.conn(t).all()) != before {
			t.Fatal("abandoning a local call wrote to the server")
		}
		if r := next(t, c); errCode(t, r) != 0 {
			t.Fatalf("local call answered %s", r)
		}
	})
}

func TestOversize(t *testing.T) {
	tests := []struct {
		name   string
		prefix func(internal string) string
		fails  bool
	}{
		{"response with readable id", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"aaaa`
		}, true},
		{"id after the result, cut", func(id string) string {
			return `{"jsonrpc":"2.0","result":{"content":"aaaa`
		}, false},
		{"id cut short", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id
		}, false},
		{"not an object", func(id string) string { return `[1,2` }, false},
		{"another id", func(id string) string {
			return `{"jsonrpc":"2.0","id":987654,"result":{"x":"`
		}, false},
		{"server request with the same id", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"method":"sampling/createMessage","params":{"messages":[{"content":"aaaa`
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				a, _ := h.join(`{"sampling":{}}`)
				c := h.call(a, `"big"`, "tools/call", "")
				internal := string(h.lastSent("tools/call").ID)
				h.srv.conn(t).oversizeFn([]byte(tt.prefix(internal)))
				if !tt.fails {
					noNext(t, c)
					return
				}
				r := next(t, c)
				if string(r.ID) != `"big"` || errCode(t, r) != mcp.CodeUpstreamTooLarge {
					t.Fatalf("call got %s, want -32006 under the client's id", r)
				}
				if m, ended := c.Poll(); m != nil || !ended {
					t.Fatal("call did not end")
				}
				h.call(a, `"big"`, "tools/call", "") // the id is free
			})
		})
	}
}

func TestInvalidServerMessageSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, da := h.join("")
		c := h.call(a, `1`, "tools/call", "")
		conn := h.srv.conn(t)
		conn.sendRaw(`{not json`)
		conn.sendRaw(`{"jsonrpc":"2.0","id":"nope","result":{}}`) // nobody's
		conn.sendRaw(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)
		noNext(t, c)
		if m := da.take(); len(m) != 0 {
			t.Fatalf("listen got %v", m)
		}
		conn.send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		if r := next(t, c); string(r.ID) != "1" {
			t.Fatalf("got %s", r)
		}
	})
}

func TestCallNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		a, _ := h.join("")
		c := h.call(a, `1`, "tools/call", "")
		ctx, cancel := context.WithTimeout(h.ctx, 1)
		defer cancel()
		if _, err := c.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next with nothing queued: %v", err)
		}
		go h.srv.conn(t).send(jsonrpc.NewResult(h.lastSent("tools/call").ID, nil))
		select {
		case <-c.Ready():
		case <-h.ctx.Done():
		}
		if m, err := c.Next(h.ctx); err != nil || string(m.ID) != "1" {
			t.Fatalf("Next = %v, %v", m, err)
		}
		if c.LongLived() {
			t.Fatal("tools/call is long-lived")
		}
	})
}

func TestReinitializerRestores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{Shared: true})
		h.srv.reinit = true
		a, _ := h.join("")
		h.call(a, `1`, "logging/setLevel", `{"level":"notice"}`)
		h.call(a, `2`, "resources/subscribe", `{"uri":"file:///r"}`)
		conn := h.srv.conn(t)
		before := len(conn.all())
		conn.reinit <- struct{}{}
		synctest.Wait()
		var got []string
		for _, m := range conn.all()[before:] {
			got = append(got, m.Method+" "+str(m.Params, "level")+str(m.Params, "uri"))
		}
		want := []string{"logging/setLevel notice", "resources/subscribe file:///r"}
		if !slices.Equal(got, want) {
			t.Fatalf("after reinitialization the server was sent %q, want %q", got, want)
		}
		if h.srv.numConns() != 1 {
			t.Fatal("a reinitialized connection was redialled")
		}
	})
}

func TestHasMethod(t *testing.T) {
	tests := []struct {
		prefix string
		want   bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"x":"aaa`, true},
		{`{"method":"x","id":1`, true},
		{`{"jsonrpc":"2.0","params":{"method":"inner"},"method":"m`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"method":"inner","text":"aaa`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"meth`, false},
		{`[{"method":"x"}`, false},
		{``, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			if got := HasMethod([]byte(tt.prefix)); got != tt.want {
				t.Errorf("HasMethod(%s) = %v, want %v", tt.prefix, got, tt.want)
			}
		})
	}
}
