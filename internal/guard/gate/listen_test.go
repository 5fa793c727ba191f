package gate

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// listenServer answers subscriptions/listen with a stream the test pushes
// to (its acknowledgement first, agreeing to nothing).
type listenServer struct {
	*fakeServer
	mu      sync.Mutex
	streams []*queueCall
}

func (s *listenServer) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if req.Method != "subscriptions/listen" {
		return s.fakeServer.Stateless(ctx, req)
	}
	c := &queueCall{q: jsonrpc.NewQueue(16), abandoned: make(chan struct{})}
	c.q.Push(jsonrpc.NewNotification("notifications/subscriptions/acknowledged", jsonrpc.Marshal(map[string]any{
		"notifications": map[string]any{}, "_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: req.ID}})), false)
	s.mu.Lock()
	s.streams = append(s.streams, c)
	s.mu.Unlock()
	return c, nil
}

type queueCall struct {
	q         *jsonrpc.Queue
	once      sync.Once
	abandoned chan struct{}
}

func (c *queueCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *queueCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *queueCall) LongLived() bool                { return true }
func (c *queueCall) Abandon(bool) {
	c.once.Do(func() { close(c.abandoned) })
	c.q.Close()
}

// next waits for c's next message.
func next(t *testing.T, c session.Call) *jsonrpc.Message {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		m, ended := c.Poll()
		if m != nil {
			return m
		}
		if ended {
			t.Fatal("the stream ended")
		}
		select {
		case <-c.Ready():
		case <-timeout:
			t.Fatal("no message on the stream")
		}
	}
}

func listenReq(id int64, tools bool) *jsonrpc.Message {
	return jsonrpc.NewRequest(jsonrpc.IntID(id), "subscriptions/listen", jsonrpc.Marshal(map[string]any{
		"notifications": map[string]any{"toolsListChanged": tools, "resourceSubscriptions": []string{"file:///a"}}}))
}

// TestListenToldOfApproval: a 2026-07-28 subscriptions/listen stream
// through a gate with pinning on is acknowledged with toolsListChanged
// and gets notifications/tools/list_changed, tagged with its id, when the
// pins change (an approval); the server's own notifications pass; a
// stream that did not ask for tool changes, or a gate without pinning,
// is left as the server made it; an abandoned stream is forgotten and
// its server's stream abandoned.
func TestListenToldOfApproval(t *testing.T) {
	srv := &listenServer{fakeServer: &fakeServer{}}
	g := New(srv, &Settings{Pinning: guard.Block}, Options{})
	c, err := g.Stateless(context.Background(), listenReq(7, true))
	if err != nil {
		t.Fatal(err)
	}
	ack := next(t, c)
	if ack.Method != "notifications/subscriptions/acknowledged" || string(jsonrpc.Member(ack.Params, "notifications", "toolsListChanged")) != "true" {
		t.Errorf("acknowledgement: %s %s", ack.Method, ack.Params)
	}
	srv.streams[0].q.Push(jsonrpc.NewNotification("notifications/resources/updated", jsonrpc.Marshal(map[string]string{"uri": "file:///a"})), false)
	if m := next(t, c); m.Method != "notifications/resources/updated" {
		t.Errorf("the server's notification: %s", m.Method)
	}
	g.Update(&Settings{Pinning: guard.Block}) // nothing changed: nothing sent
	g.Update(&Settings{Pinning: guard.Block, Pins: guard.ServerPins{Tools: map[string]guard.Pin{"echo": {Digest: "sha256:1"}}}})
	m := next(t, c)
	if m.Method != "notifications/tools/list_changed" || string(jsonrpc.Member(m.Params, "_meta", mcp.MetaSubscriptionID)) != "7" {
		t.Errorf("after an approval: %s %s, want tools/list_changed tagged 7", m.Method, m.Params)
	}

	other, _ := g.Stateless(context.Background(), listenReq(8, false))
	if _, ok := other.(*queueCall); !ok {
		t.Errorf("a stream not asking for tool changes is wrapped: %T", other)
	}
	off := New(srv, &Settings{Detectors: []Detector{{"hidden", guard.Hidden{}}}}, Options{})
	if c, _ := off.Stateless(context.Background(), listenReq(9, true)); c == nil {
		t.Error("no stream")
	} else if _, ok := c.(*queueCall); !ok {
		t.Errorf("a stream through a gate without pinning is wrapped: %T", c)
	}

	c.Abandon(true)
	select {
	case <-srv.streams[0].abandoned:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's stream was not abandoned")
	}
	g.mu.Lock()
	n := len(g.streams)
	g.mu.Unlock()
	if n != 0 {
		t.Errorf("%d streams kept after Abandon", n)
	}
	if _, ended := c.Poll(); !ended {
		t.Error("an abandoned stream has not ended")
	}
}
