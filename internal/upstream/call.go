package upstream

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Call is one client request in flight. Its messages — related
// notifications, server→client requests, and last the response — arrive in
// order through Next. Ids and progress tokens are already the client's own.
type Call struct {
	u        *Upstream
	member   *Member // nil for a stateless (2026-07-28) request
	id       int64   // internal id on the upstream connection
	clientID json.RawMessage
	token    json.RawMessage // the client's progress token; nil if none
	method   string
	q        jsonrpc.Queue // embedded: one allocation fewer per call
	// out is the request as written to the server, and idBuf the digits
	// of id it carries: both live in the call, which is allocated anyway.
	// Only call uses them, only while it writes.
	out   jsonrpc.Message
	idBuf [20]byte

	internal     bool       // Switchboard's own request (handshake, setLevel)
	elicitURL    bool       // the client takes a -32042 answer (see urlElicitationFallback)
	elicitDown   Downstream // a stateless call's client that takes it (WithURLElicitation); else nil
	local        bool       // answered by Switchboard without the server
	subscription bool       // subscriptions/listen: long-lived, never times out

	// parked is set while the call waits for a client that was handed
	// the server's request as a 2026-07-28 input_required result (package
	// era): the server waits on that answer, so a new server→client
	// request is not this call's.
	parked atomic.Bool

	// detached is set once nobody reads q: related messages then go to the
	// member's listen stream, and the response is dropped.
	detached atomic.Bool

	// sent is when the request was written to the server; took is how long
	// its response took to come back, set by the reader before the response
	// is queued (the queue orders it before Poll returns the response).
	sent time.Time
	took time.Duration
	// wrote is when (Unix ns) the write of the request returned; 0 until
	// then. stalledWrite (guarded by u.mu) is set once the watchdog has
	// reported the request stalled before the write (see stall.go).
	wrote        atomic.Int64
	stalledWrite bool
	// answered is when (Unix ns) the response was handed to q; 0 before.
	answered atomic.Int64
	// probe marks the watchdog's own ping; probedBy (guarded by u.mu) is
	// the id of a probe sent while this call waited (see StageServer).
	probe    bool
	probedBy int64
}

// SetParked marks the call as waiting for a client's input (see parked).
func (c *Call) SetParked(on bool) { c.parked.Store(on) }

// Method returns the request's method.
func (c *Call) Method() string { return c.method }

// UpstreamTime returns how long the server took to answer: from the request
// written to it to its response read back. It is valid once the response
// has been taken (Poll or Next returned it); zero if the server never
// answered (the call failed, was abandoned, or was answered by Switchboard).
func (c *Call) UpstreamTime() time.Duration { return c.took }

// LongLived reports whether the call is a subscription stream that has no
// response deadline.
func (c *Call) LongLived() bool { return c.subscription }

// Next returns the next message for the client. The response is the last
// message: after it Next returns io.EOF. On ctx expiry it returns ctx.Err()
// and the call stays in flight (Abandon it or call Next again).
func (c *Call) Next(ctx context.Context) (*jsonrpc.Message, error) {
	return c.q.Pop(ctx)
}

// Poll returns a queued message without waiting; ended is true after the
// response has been taken.
func (c *Call) Poll() (m *jsonrpc.Message, ended bool) { return c.q.Poll() }

// Ready receives when Poll may return something new.
func (c *Call) Ready() <-chan struct{} { return c.q.Ready() }

// Abandon tells the Upstream that nobody will read the call any more. If the
// response has not arrived and cancel is set, the server is sent
// notifications/cancelled; otherwise the response is dropped on arrival and
// related messages go to the session's listen stream.
func (c *Call) Abandon(cancel bool) {
	if c.local || c.internal {
		return
	}
	if a, after := c.answered.Load(), c.u.opts.StallAfter; a != 0 && after > 0 && c.q.Len() > 0 {
		// The answer is there and the front never took it.
		if age := time.Since(time.Unix(0, a)); age >= after {
			c.u.stall(stageTake, age, "id", c.id, "method", c.method)
		}
	}
	c.detached.Store(true)
	c.q.Close()
	if !cancel && c.member != nil {
		// Related messages queued but never read (a server→client request
		// the server is waiting on) go to the listen stream, as later
		// ones do; a response is dropped.
		for m, _ := c.q.Poll(); m != nil; m, _ = c.q.Poll() {
			if !m.IsResponse() {
				c.member.d.Deliver(m)
			}
		}
	}
	u := c.u
	u.mu.Lock()
	live := u.pending[c.id] == c
	if live && cancel {
		u.unpend(c)
		u.noteGaveUp(c.id, time.Now())
	}
	u.mu.Unlock()
	if live && cancel {
		_ = u.write(jsonrpc.NewNotification("notifications/cancelled",
			jsonrpc.Marshal(map[string]any{"requestId": c.id, "reason": "cancelled by the client or timed out"})))
	}
}

// noteGaveUp records that the call id was given up at t; mu held.
func (u *Upstream) noteGaveUp(id int64, t time.Time) {
	if u.gaveUp == nil || len(u.gaveUp) >= maxGaveUp {
		u.gaveUp = map[int64]time.Time{}
	}
	u.gaveUp[id] = t
}

// maxGaveUp bounds Upstream.gaveUp.
const maxGaveUp = 256

// fail ends the call with an error response.
func (c *Call) fail(e *jsonrpc.Error) {
	if c.internal {
		c.q.PushLast(jsonrpc.NewError(jsonrpc.IntID(c.id), e))
	} else {
		c.q.PushLast(jsonrpc.NewError(c.clientID, e))
	}
}

// deliver hands a related message to the client: on the call's own stream
// while it is read, else on the member's listen stream.
func (c *Call) deliver(m *jsonrpc.Message) {
	if !c.detached.Load() && c.q.Push(m, false) {
		return
	}
	if c.member != nil {
		c.member.d.Deliver(m)
	}
}
