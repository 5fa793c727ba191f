package router

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

func result(req *jsonrpc.Message, res []byte) *session.Answer {
	return session.NewAnswer(jsonrpc.NewResult(req.ID, res))
}

func failure(req *jsonrpc.Message, e *jsonrpc.Error) *session.Answer {
	return session.NewAnswer(jsonrpc.NewError(req.ID, e))
}

// routedCall is a call forwarded to one member: server→client requests on
// its stream get router-unique ids, so the client's answer finds the member.
// While in flight it is tracked by its member: when Update removes the
// member, the call is answered with an error naming the server (fail).
type routedCall struct {
	session.Call
	m       *member
	id      json.RawMessage // the client's request id
	rewrite func(*jsonrpc.Message) *jsonrpc.Message

	mu     sync.Mutex
	failed *jsonrpc.Message // the error answer, until taken
	ended  bool             // the response (or the error answer) was taken
}

func (c *routedCall) Poll() (*jsonrpc.Message, bool) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return nil, true
	}
	if f := c.failed; f != nil {
		c.failed, c.ended = nil, true
		c.mu.Unlock()
		c.untrack()
		return f, false
	}
	m, ended := c.Call.Poll()
	if ended || (m != nil && m.IsResponse()) {
		c.ended = true
	}
	done := c.ended
	c.mu.Unlock()
	if done {
		c.untrack()
	}
	if m != nil && c.rewrite != nil {
		m = c.rewrite(m)
	}
	return m, ended
}

// UpstreamTime is the member's call's (see upstream.Call.UpstreamTime):
// how long the server took to answer; zero when it cannot tell.
func (c *routedCall) UpstreamTime() time.Duration { return session.UpstreamTime(c.Call) }

// Abandon passes on to the member's call; the call is no longer tracked.
func (c *routedCall) Abandon(cancel bool) {
	c.Call.Abandon(cancel)
	c.untrack()
}

// fail answers the call with e unless its response was taken already; the
// member's call is abandoned (which wakes the reader).
func (c *routedCall) fail(e *jsonrpc.Error) {
	c.mu.Lock()
	if c.ended || c.failed != nil {
		c.mu.Unlock()
		return
	}
	c.failed = jsonrpc.NewError(c.id, e)
	c.mu.Unlock()
	c.Call.Abandon(true)
}

func (c *routedCall) untrack() {
	if c.m != nil {
		c.m.cat.untrack(c)
	}
}

// drainAll reads a call to its end and returns every message, response last.
func drainAll(ctx context.Context, c session.Call) ([]*jsonrpc.Message, error) {
	var msgs []*jsonrpc.Message
	resp, err := session.Drain(ctx, c, func(m *jsonrpc.Message) { msgs = append(msgs, m) })
	if err != nil {
		return msgs, err
	}
	return append(msgs, resp), nil
}
