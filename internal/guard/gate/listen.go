package gate

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// A 2026-07-28 client learns of list changes on its subscriptions/listen
// stream, not on a session. A stream that asked for toolsListChanged
// through a gate with pinning on is wrapped in a listening call the gate
// keeps while it lasts: Update (an approval, a reload) pushes
// notifications/tools/list_changed onto it, tagged with its subscription
// id, as it is sent to the sessions joined through the gate. Its
// acknowledgement says toolsListChanged: the gate sends it even when the
// server itself does not.

// listening is a subscriptions/listen stream behind the gate. A pump
// goroutine of its own moves the wrapped call's messages to q; it ends
// when that call ends or the stream is abandoned (stop).
type listening struct {
	inner session.Call
	g     *Gate
	id    json.RawMessage
	q     *jsonrpc.Queue
	stop  chan struct{}
	once  sync.Once
}

// listen sends a subscriptions/listen request and, when it asks for tool
// list changes, wraps its stream so that the gate's updates reach it.
func (g *Gate) listen(ctx context.Context, req *jsonrpc.Message, send sendFunc) (session.Call, error) {
	c, err := send(ctx, req)
	if err != nil || string(jsonrpc.Member(req.Params, "notifications", "toolsListChanged")) != "true" {
		return c, err
	}
	l := &listening{inner: c, g: g, id: req.ID, q: jsonrpc.NewQueue(1024), stop: make(chan struct{})}
	g.mu.Lock()
	g.streams[l] = struct{}{}
	g.mu.Unlock()
	go l.pump()
	return l, nil
}

// pump moves the wrapped call's messages to q until it ends or the
// stream is abandoned.
func (l *listening) pump() {
	defer l.leave()
	for {
		m, ended := l.inner.Poll()
		if m != nil {
			l.q.Push(l.acknowledged(m), m.IsResponse())
			continue
		}
		if ended {
			l.q.Close()
			return
		}
		select {
		case <-l.inner.Ready():
		case <-l.stop:
			return
		}
	}
}

// acknowledged returns m, or, for the stream's acknowledgement, m saying
// toolsListChanged: true (the gate tells of approvals itself).
func (l *listening) acknowledged(m *jsonrpc.Message) *jsonrpc.Message {
	if m.Method != "notifications/subscriptions/acknowledged" {
		return m
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(m.Params, &p) != nil {
		return m
	}
	var n map[string]json.RawMessage
	if json.Unmarshal(p["notifications"], &n) != nil || n == nil {
		n = map[string]json.RawMessage{}
	}
	n["toolsListChanged"] = json.RawMessage("true")
	p["notifications"] = jsonrpc.Marshal(n)
	out := *m
	out.Params = jsonrpc.Marshal(p)
	return &out
}

// changed tells the stream that the tools changed.
func (l *listening) changed() {
	l.q.Push(jsonrpc.NewNotification("notifications/tools/list_changed", jsonrpc.Marshal(map[string]any{
		"_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: l.id}})), false)
}

// leave removes the stream from the gate.
func (l *listening) leave() {
	l.g.mu.Lock()
	delete(l.g.streams, l)
	l.g.mu.Unlock()
}

func (l *listening) Poll() (*jsonrpc.Message, bool) { return l.q.Poll() }
func (l *listening) Ready() <-chan struct{}         { return l.q.Ready() }
func (l *listening) LongLived() bool                { return true }

// Abandon ends the pump and the wrapped stream.
func (l *listening) Abandon(cancel bool) {
	l.once.Do(func() { close(l.stop) })
	l.leave()
	l.q.Close()
	l.inner.Abandon(cancel)
}
