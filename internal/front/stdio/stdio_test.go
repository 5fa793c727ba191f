package stdio

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

type doneCall struct {
	msgs  []*jsonrpc.Message
	ready chan struct{}
}

func newDone(msgs ...*jsonrpc.Message) *doneCall {
	c := &doneCall{msgs: msgs, ready: make(chan struct{})}
	close(c.ready)
	return c
}

func (c *doneCall) Poll() (*jsonrpc.Message, bool) {
	if len(c.msgs) == 0 {
		return nil, true
	}
	m := c.msgs[0]
	c.msgs = c.msgs[1:]
	return m, false
}
func (c *doneCall) Ready() <-chan struct{} { return c.ready }
func (c *doneCall) Abandon(bool)           {}
func (c *doneCall) LongLived() bool        { return false }

type fakeDest struct {
	mu        sync.Mutex
	s         *session.Session
	notified  []string
	responded []string
	left      chan struct{}
}

func (d *fakeDest) Open(_ context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	d.mu.Lock()
	d.s = s
	d.mu.Unlock()
	return &fakeBackend{d}, jsonrpc.NewResult(init.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)), nil
}

func (d *fakeDest) Stateless(_ context.Context, req *jsonrpc.Message) (session.Call, error) {
	return newDone(jsonrpc.NewResult(req.ID, json.RawMessage(`{"resultType":"complete","stateless":true}`))), nil
}

type fakeBackend struct{ d *fakeDest }

func (b *fakeBackend) Call(_ context.Context, req *jsonrpc.Message) (session.Call, error) {
	progress := jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":"p","progress":1}`))
	return newDone(progress, jsonrpc.NewResult(req.ID, json.RawMessage(`{"echo":`+string(jsonrpc.Quote(req.Method))+`}`))), nil
}

func (b *fakeBackend) Notify(_ context.Context, n *jsonrpc.Message) error {
	b.d.mu.Lock()
	b.d.notified = append(b.d.notified, n.Method)
	b.d.mu.Unlock()
	return nil
}

func (b *fakeBackend) Respond(_ context.Context, r *jsonrpc.Message) error {
	b.d.mu.Lock()
	b.d.responded = append(b.d.responded, string(r.ID))
	b.d.mu.Unlock()
	return nil
}

func (b *fakeBackend) Leave() { close(b.d.left) }

func TestServe(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	d := &fakeDest{left: make(chan struct{})}
	served := make(chan error, 1)
	go func() {
		served <- Serve(context.Background(), d, inR, outW, Options{Name: "t", Timeout: 5 * time.Second})
	}()
	lines := make(chan map[string]json.RawMessage, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("not one JSON message per line: %q", sc.Text())
				continue
			}
			lines <- m
		}
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]json.RawMessage {
		t.Helper()
		select {
		case m := <-lines:
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("no output")
			return nil
		}
	}
	expect := func(what, id, member, contains string) {
		t.Helper()
		m := next()
		if string(m["id"]) != id || !strings.Contains(string(m[member]), contains) {
			t.Errorf("%s: got %v, want id %s with %s containing %q", what, m, id, member, contains)
		}
	}

	send("")
	send("not json")
	expect("garbage", "null", "error", "-32700")
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	expect("before initialize", "1", "error", "initialize first")
	send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	expect("ping before initialize", "2", "result", "{}")
	send(`{"jsonrpc":"2.0","id":3,"method":"server/discover"}`)
	expect("server/discover goes stateless", "3", "result", "stateless")
	send(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	expect("initialize", "4", "result", "fake")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}`)
	if m := next(); string(m["method"]) != `"notifications/progress"` {
		t.Errorf("want the call's progress first, got %v", m)
	}
	expect("tools/call", "5", "result", "tools/call")
	send(`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{}}`)
	expect("second initialize", "6", "error", "already initialized")
	send(`{"jsonrpc":"2.0","id":"s1","result":{}}`)
	// Messages the session receives outside calls are written too.
	d.mu.Lock()
	s := d.s
	d.mu.Unlock()
	s.Deliver(jsonrpc.NewNotification("notifications/tools/list_changed", nil))
	if m := next(); string(m["method"]) != `"notifications/tools/list_changed"` {
		t.Errorf("listen message: got %v", m)
	}
	inW.Close() // EOF ends the front
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return at EOF")
	}
	select {
	case <-d.left:
	case <-time.After(5 * time.Second):
		t.Error("the backend was not left")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.notified) != 1 || d.notified[0] != "notifications/initialized" || len(d.responded) != 1 || d.responded[0] != `"s1"` {
		t.Errorf("notified %v, responded %v", d.notified, d.responded)
	}
}
