package destination

import (
	"context"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Tracing (internal/tracing): every upstream call a traced request makes
// gets a client span (send, tracedCall) and carries its context in
// params._meta.traceparent, which streamable HTTP connections copy into
// their traceparent header.

// send sends req with send: under a client span when the destination
// traces and ctx carries a traced request, the span's context in the
// params._meta of what is sent; else as it is.
func (d *Destination) send(ctx context.Context, req *jsonrpc.Message, send func(context.Context, *jsonrpc.Message) (*upstream.Call, error)) (session.Call, error) {
	var q *tracing.Request
	if d.traced {
		q = tracing.FromContext(ctx)
	}
	if q == nil {
		c, err := send(ctx, req)
		if err != nil {
			return nil, err // not a nil *upstream.Call inside a non-nil session.Call
		}
		return c, nil
	}
	var sid string
	if rec := audit.FromContext(ctx); rec != nil {
		sid = rec.Session
	}
	out, span := q.Upstream(d.name, sid, req)
	c, err := send(ctx, out)
	if err != nil {
		span.End(nil)
		return nil, err
	}
	return &tracedCall{Call: c, span: span}, nil
}

// tracedCall ends its client span when the response is taken or the call
// is abandoned, whichever comes first.
type tracedCall struct {
	*upstream.Call
	span *tracing.Call
}

func (c *tracedCall) Poll() (*jsonrpc.Message, bool) {
	m, ended := c.Call.Poll()
	switch {
	case m != nil && m.IsResponse():
		c.span.End(m)
	case ended: // the queue closed without a response
		c.span.End(nil)
	}
	return m, ended
}

func (c *tracedCall) Next(ctx context.Context) (*jsonrpc.Message, error) {
	m, err := c.Call.Next(ctx)
	if err == nil && m != nil && m.IsResponse() {
		c.span.End(m)
	}
	return m, err
}

func (c *tracedCall) Abandon(cancel bool) {
	c.span.End(nil)
	c.Call.Abandon(cancel)
}
