package era

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// scriptedServer is a 2026-07-28 server whose answers a test scripts: it
// records every request (with its _meta) and answers by method.
type scriptedServer struct {
	mu     sync.Mutex
	reqs   []*jsonrpc.Message
	answer func(req *jsonrpc.Message) session.Call
}

func (s *scriptedServer) Stateless(_ context.Context, req *jsonrpc.Message) (session.Call, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if req.Method == "server/discover" {
		return result(req, json.RawMessage(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"`+mcp.MetaServerInfo+`":{"name":"s","version":"9"}}}`)), nil
	}
	return s.answer(req), nil
}

func (s *scriptedServer) requests(method string) []*jsonrpc.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*jsonrpc.Message
	for _, r := range s.reqs {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

type sink struct{ q *jsonrpc.Queue }

func (s sink) Deliver(m *jsonrpc.Message) { s.q.Push(m, true) }
func (s sink) End(error)                  {}

// next polls c until it has a message (or the deadline passes).
func next(t *testing.T, c session.Call) *jsonrpc.Message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		m, ended := c.Poll()
		if m != nil {
			return m
		}
		if ended {
			t.Fatal("the call ended without a message")
		}
		select {
		case <-c.Ready():
		case <-deadline:
			t.Fatal("no message within 10 s")
		}
	}
}

func legacyJoin(t *testing.T, srv *scriptedServer, caps string) session.Backend {
	t.Helper()
	tr := NewLegacyOverModern(srv, Options{Name: "m"})
	init := jsonrpc.NewRequest(json.RawMessage(`1`), "initialize", json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":`+caps+`,"clientInfo":{"name":"c","version":"1"}}`))
	b, res, err := tr.Join(context.Background(), sink{jsonrpc.NewQueue(16)}, init)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Leave)
	if v, _ := jsonrpc.StringMember(res.Result, "protocolVersion"); v != "2025-06-18" {
		t.Errorf("initialize answered version %q; want the client's 2025-06-18", v)
	}
	if v, _ := jsonrpc.StringMember(res.Result, "serverInfo", "name"); v != "s" {
		t.Errorf("serverInfo from server/discover: got %s", res.Result)
	}
	return b
}

// TestLegacyInputRequired: an input_required result becomes a real
// elicitation/create to the legacy client, whose answer goes back as
// inputResponses (with the server's requestState) on the retried request;
// every request carries the session's capabilities and log level.
func TestLegacyInputRequired(t *testing.T) {
	srv := &scriptedServer{}
	srv.answer = func(req *jsonrpc.Message) session.Call {
		if jsonrpc.Member(req.Params, "inputResponses", "who") == nil {
			return result(req, json.RawMessage(`{"resultType":"input_required","inputRequests":{"who":{"method":"elicitation/create","params":{"message":"name?"}}},"requestState":"st-1"}`))
		}
		name, _ := jsonrpc.StringMember(req.Params, "inputResponses", "who", "content", "name")
		return result(req, jsonrpc.Marshal(map[string]any{"resultType": "complete", "content": []any{map[string]string{"type": "text", "text": "hi " + name}}}))
	}
	b := legacyJoin(t, srv, `{"elicitation":{}}`)
	if _, err := b.Call(context.Background(), jsonrpc.NewRequest(json.RawMessage(`2`), "logging/setLevel", json.RawMessage(`{"level":"warning"}`))); err != nil {
		t.Fatal(err)
	}
	c, err := b.Call(context.Background(), jsonrpc.NewRequest(json.RawMessage(`3`), "tools/call", json.RawMessage(`{"name":"t"}`)))
	if err != nil {
		t.Fatal(err)
	}
	ask := next(t, c)
	if ask.Method != "elicitation/create" || !ask.IsRequest() {
		t.Fatalf("first message %s; want an elicitation/create request", ask.Encode())
	}
	if err := b.Respond(context.Background(), jsonrpc.NewResult(ask.ID, json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`))); err != nil {
		t.Fatal(err)
	}
	final := next(t, c)
	if string(final.ID) != "3" || !strings.Contains(string(final.Result), "hi Ada") {
		t.Fatalf("final %s", final.Encode())
	}
	calls := srv.requests("tools/call")
	if len(calls) != 2 {
		t.Fatalf("%d tools/call upstream; want 2 (the call and its retry)", len(calls))
	}
	if st, _ := jsonrpc.StringMember(calls[1].Params, "requestState"); st != "st-1" {
		t.Errorf("retry requestState %q; want the server's st-1", st)
	}
	for _, r := range calls {
		if v, _ := jsonrpc.StringMember(r.Params, "_meta", mcp.MetaProtocolVersion); v != mcp.ModernVersion {
			t.Errorf("request without _meta protocolVersion: %s", r.Params)
		}
		if jsonrpc.Member(r.Params, "_meta", mcp.MetaClientCapabilities, "elicitation") == nil {
			t.Errorf("request without the client's capabilities: %s", r.Params)
		}
		if v, _ := jsonrpc.StringMember(r.Params, "_meta", mcp.MetaLogLevel); v != "warning" {
			t.Errorf("logLevel %q; want the session's warning", v)
		}
	}
}

// TestLegacyInputRequiredUndeclared: a server asking for a capability the
// client did not declare gets no request through; the client gets an error.
func TestLegacyInputRequiredUndeclared(t *testing.T) {
	srv := &scriptedServer{answer: func(req *jsonrpc.Message) session.Call {
		return result(req, json.RawMessage(`{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage","params":{}}}}`))
	}}
	b := legacyJoin(t, srv, `{}`)
	c, err := b.Call(context.Background(), jsonrpc.NewRequest(json.RawMessage(`5`), "tools/call", json.RawMessage(`{"name":"t"}`)))
	if err != nil {
		t.Fatal(err)
	}
	m := next(t, c)
	if e := m.ErrorOf(); e == nil || !strings.Contains(e.Message, "did not declare") {
		t.Fatalf("got %s; want an error naming the undeclared capability", m.Encode())
	}
}

// TestLegacyCancel: notifications/cancelled closes the call upstream and the
// client's request is answered with an error.
func TestLegacyCancel(t *testing.T) {
	inner := newFakeCall()
	srv := &scriptedServer{answer: func(*jsonrpc.Message) session.Call { return inner }}
	b := legacyJoin(t, srv, `{}`)
	c, err := b.Call(context.Background(), jsonrpc.NewRequest(json.RawMessage(`"x"`), "tools/call", json.RawMessage(`{"name":"slow"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Notify(context.Background(), jsonrpc.NewNotification("notifications/cancelled", json.RawMessage(`{"requestId":"x"}`))); err != nil {
		t.Fatal(err)
	}
	if inner.abandoned.Load() != 1 {
		t.Fatalf("the upstream call was abandoned %d times; want 1", inner.abandoned.Load())
	}
	inner.q.Close() // what an abandoned upstream call does
	m := next(t, c)
	if e := m.ErrorOf(); e == nil || string(m.ID) != `"x"` || !strings.Contains(e.Message, "cancelled") {
		t.Fatalf("got %s; want the cancelled error for id x", m.Encode())
	}
}
