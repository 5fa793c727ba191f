package router

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// listenCall is a merged 2026-07-28 subscriptions/listen: the request goes
// to every server; the client gets one notifications/subscriptions/
// acknowledged (the union of what the servers agreed to) and then every
// server's notifications (each upstream already tags them with the
// client's request id). The stream ends when every server's does.
type listenCall struct {
	q      *jsonrpc.Queue
	cancel context.CancelFunc

	mu    sync.Mutex
	calls []session.Call
	done  bool
}

func (c *listenCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *listenCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *listenCall) LongLived() bool                { return true }

// Abandon ends every server's stream (closing the client's stream cancels
// the subscription).
func (c *listenCall) Abandon(cancel bool) {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.done = true
	calls := c.calls
	c.mu.Unlock()
	c.cancel()
	for _, call := range calls {
		call.Abandon(cancel)
	}
	c.q.Close()
}

func (c *listenCall) abandoned() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// listen starts a merged subscriptions/listen.
func (r *Router) listen(ctx context.Context, cat *catalog, req *jsonrpc.Message) session.Call {
	lctx, cancel := context.WithCancel(context.Background())
	c := &listenCall{q: jsonrpc.NewQueue(1024), cancel: cancel}
	for _, m := range cat.live("") {
		call, err := m.invoke(ctx, req)
		if err != nil {
			r.log.Debug("subscriptions/listen failed", "view", r.view.Name, "server", m.name, "err", err)
			continue
		}
		c.calls = append(c.calls, call)
	}
	if len(c.calls) == 0 {
		cancel()
		return failure(req, jsonrpc.Errorf(jsonrpc.MethodNotFound, "subscriptions/listen: no server of %s serves it", r.viewLabel()))
	}
	go r.runListen(lctx, c, req)
	return c
}

func (r *Router) runListen(ctx context.Context, c *listenCall, req *jsonrpc.Message) {
	// Phase 1: each server's first message is its acknowledgement (or an
	// error response: that server is left out).
	actx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	type first struct {
		msg  *jsonrpc.Message
		call session.Call
	}
	firsts := make([]first, len(c.calls))
	var wg sync.WaitGroup
	for i, call := range c.calls {
		wg.Go(func() {
			m, err := next(actx, call)
			if err == nil {
				firsts[i] = first{m, call}
			}
		})
	}
	wg.Wait()
	cancel()
	if c.abandoned() {
		return
	}
	var live []session.Call
	var acks []json.RawMessage
	var lastErr *jsonrpc.Message
	var early []*jsonrpc.Message
	for _, f := range firsts {
		switch {
		case f.msg == nil:
		case f.msg.IsResponse():
			lastErr = f.msg
		case f.msg.Method == "notifications/subscriptions/acknowledged":
			acks = append(acks, jsonrpc.Member(f.msg.Params, "notifications"))
			live = append(live, f.call)
		default: // no acknowledgement first: take the stream anyway
			early = append(early, f.msg)
			live = append(live, f.call)
		}
	}
	if len(live) == 0 {
		if lastErr == nil {
			lastErr = jsonrpc.NewError(req.ID, jsonrpc.Errorf(jsonrpc.InternalError, "subscriptions/listen: no server acknowledged"))
		}
		c.q.Push(lastErr, true)
		c.q.Close()
		return
	}
	c.q.Push(jsonrpc.NewNotification("notifications/subscriptions/acknowledged", jsonrpc.Marshal(map[string]any{
		"notifications": mergeAcks(acks),
		"_meta":         map[string]json.RawMessage{metaSubscriptionID: req.ID},
	})), true)
	for _, m := range early {
		c.q.Push(m, false)
	}

	// Phase 2: every server's notifications, until all streams end.
	var pumps sync.WaitGroup
	for _, call := range live {
		pumps.Go(func() {
			for {
				m, err := next(ctx, call)
				if err != nil || m.IsResponse() {
					return
				}
				c.q.Push(m, false)
			}
		})
	}
	pumps.Wait()
	if c.abandoned() {
		return
	}
	c.q.Push(jsonrpc.NewResult(req.ID, jsonrpc.Marshal(map[string]any{
		"resultType": "complete",
		"_meta":      map[string]json.RawMessage{metaSubscriptionID: req.ID},
	})), true)
	c.q.Close()
}

// next waits for a call's next message.
func next(ctx context.Context, c session.Call) (*jsonrpc.Message, error) {
	for {
		m, ended := c.Poll()
		if m != nil {
			return m, nil
		}
		if ended {
			return nil, errNoResponse
		}
		select {
		case <-c.Ready():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// mergeAcks is the union of the servers' agreed notification sets.
func mergeAcks(acks []json.RawMessage) map[string]any {
	out := map[string]any{}
	var uris []string
	for _, a := range acks {
		var m map[string]json.RawMessage
		if json.Unmarshal(a, &m) != nil {
			continue
		}
		for k, v := range m {
			if k == "resourceSubscriptions" {
				var us []string
				_ = json.Unmarshal(v, &us)
				for _, u := range us {
					if !slices.Contains(uris, u) {
						uris = append(uris, u)
					}
				}
				continue
			}
			if string(v) == "true" {
				out[k] = true
			} else if _, ok := out[k]; !ok {
				out[k] = json.RawMessage(v)
			}
		}
	}
	if uris != nil {
		out["resourceSubscriptions"] = uris
	}
	return out
}
