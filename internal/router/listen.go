package router

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// listenCall is a merged 2026-07-28 subscriptions/listen: the request goes
// to every server; the client gets one notifications/subscriptions/
// acknowledged (the union of what the servers agreed to) and then every
// server's notifications (each upstream already tags them with the
// client's request id). The stream ends when every server's does.
//
// The stream follows the view: Update opens the request on servers added
// to the view (their acknowledgement is not passed on), ends the streams
// of servers removed from it, and sends the client the list_changed it
// asked for (notifications.toolsListChanged, …) for what may have changed.
type listenCall struct {
	r      *Router
	req    *jsonrpc.Message
	q      *jsonrpc.Queue
	ctx    context.Context // the pumps'; cancelled when the stream ends
	cancel context.CancelFunc

	resyncing sync.Mutex // serialises update

	mu      sync.Mutex
	streams []*listenStream // the servers' streams still open
	pumps   int             // phase 2: pumps running
	acked   bool            // phase 2 began: the acknowledgement was sent
	stale   bool            // Update ran before acked
	pending [nKinds]bool    // the kinds those Updates changed
	done    bool
}

// listenStream is one server's subscriptions/listen.
type listenStream struct {
	m    *member
	call session.Call
}

func (c *listenCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *listenCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *listenCall) LongLived() bool                { return true }

// Abandon ends every server's stream (closing the client's stream cancels
// the subscription).
func (c *listenCall) Abandon(cancel bool) { c.end(cancel, false) }

// end ends the stream and every server's stream; with complete the client
// is sent the final result first (the subscription ended gracefully).
func (c *listenCall) end(cancel, complete bool) {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.done = true
	streams := c.streams
	c.streams = nil
	c.mu.Unlock()
	c.cancel()
	for _, s := range streams {
		s.call.Abandon(cancel)
	}
	if complete {
		c.q.Push(c.complete(), true)
	}
	c.q.Close()
	c.r.mu.Lock()
	delete(c.r.listens, c)
	c.r.mu.Unlock()
}

func (c *listenCall) complete() *jsonrpc.Message {
	return jsonrpc.NewResult(c.req.ID, jsonrpc.Marshal(map[string]any{
		"resultType": "complete",
		"_meta":      map[string]json.RawMessage{mcp.MetaSubscriptionID: c.req.ID},
	}))
}

func (c *listenCall) abandoned() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// listen starts a merged subscriptions/listen.
func (r *Router) listen(ctx context.Context, req *jsonrpc.Message) session.Call {
	lctx, cancel := context.WithCancel(context.Background())
	c := &listenCall{r: r, req: req, q: jsonrpc.NewQueue(1024), ctx: lctx, cancel: cancel}
	// Registered with the catalog it starts from: an Update from now on
	// reaches it.
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		cancel()
		return failure(req, jsonrpc.Errorf(jsonrpc.InvalidRequest, "subscriptions/listen: %s was removed", r.viewLabel()))
	}
	cat := r.stateless.Load()
	r.listens[c] = struct{}{}
	r.mu.Unlock()
	var streams []*listenStream
	if cat != nil {
		for _, m := range cat.live("") {
			call, err := m.invoke(ctx, req)
			if err != nil {
				r.log.Debug("subscriptions/listen failed", "view", r.Name(), "server", m.name, "err", err)
				continue
			}
			streams = append(streams, &listenStream{m: m, call: call})
		}
	}
	c.mu.Lock()
	c.streams = streams
	c.mu.Unlock()
	if len(streams) == 0 {
		c.end(true, false)
		return failure(req, jsonrpc.Errorf(jsonrpc.MethodNotFound, "subscriptions/listen: no server of %s serves it", r.viewLabel()))
	}
	go r.runListen(lctx, c, streams)
	return c
}

func (r *Router) runListen(ctx context.Context, c *listenCall, streams []*listenStream) {
	req := c.req
	// Phase 1: each server's first message is its acknowledgement (or an
	// error response: that server is left out).
	actx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	firsts := make([]*jsonrpc.Message, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			if m, err := next(actx, s.call); err == nil {
				firsts[i] = m
			}
		})
	}
	wg.Wait()
	cancel()
	if c.abandoned() {
		return
	}
	var live []*listenStream
	var acks []json.RawMessage
	var lastErr *jsonrpc.Message
	var early []*jsonrpc.Message
	for i, m := range firsts {
		switch {
		case m != nil && m.IsResponse():
			lastErr = m
			fallthrough
		case m == nil: // no first message: that server is left out
			streams[i].call.Abandon(true)
			continue
		case m.Method == "notifications/subscriptions/acknowledged":
			acks = append(acks, jsonrpc.Member(m.Params, "notifications"))
		default: // no acknowledgement first: take the stream anyway
			early = append(early, m)
		}
		live = append(live, streams[i])
	}
	if len(live) == 0 {
		if lastErr == nil {
			lastErr = jsonrpc.NewError(req.ID, jsonrpc.Errorf(jsonrpc.InternalError, "subscriptions/listen: no server acknowledged"))
		}
		c.q.Push(lastErr, true)
		c.end(true, false)
		return
	}
	c.q.Push(jsonrpc.NewNotification("notifications/subscriptions/acknowledged", jsonrpc.Marshal(map[string]any{
		"notifications": mergeAcks(acks),
		"_meta":         map[string]json.RawMessage{mcp.MetaSubscriptionID: req.ID},
	})), true)
	for _, m := range early {
		c.q.Push(m, false)
	}

	// Phase 2: every server's notifications, until all streams end.
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.streams = live
	c.pumps = len(live)
	c.acked = true
	stale, pending := c.stale, c.pending
	c.mu.Unlock()
	for _, s := range live {
		go c.pump(s, false)
	}
	if stale {
		c.update(r.stateless.Load(), pending)
	}
}

// pump passes one server's notifications on until its stream ends; the
// last pump to end completes the client's stream. With ack, a first
// acknowledgement is dropped (a server added by Update).
func (c *listenCall) pump(s *listenStream, ack bool) {
	for {
		m, err := next(c.ctx, s.call)
		if err != nil || m.IsResponse() {
			break
		}
		if ack {
			ack = false
			if m.Method == "notifications/subscriptions/acknowledged" {
				continue
			}
		}
		c.q.Push(m, false)
	}
	c.mu.Lock()
	c.streams = slices.DeleteFunc(c.streams, func(o *listenStream) bool { return o == s })
	c.pumps--
	last := c.pumps == 0 && !c.done
	c.mu.Unlock()
	if last {
		c.end(true, true)
	}
}

// listKeys are the subscriptions/listen opt-ins of list_changed.
var listKeys = map[kind]string{kTools: "toolsListChanged", kPrompts: "promptsListChanged", kResources: "resourcesListChanged"}

// update moves the stream to the servers of cat (the new stateless
// catalog): servers it lacks are asked to listen too, those gone are
// ended; then the client gets the list_changed it opted in to for the
// kinds in ks. Before the acknowledgement was sent, it only records the
// update (runListen applies it when phase 2 begins).
func (c *listenCall) update(cat *catalog, ks [nKinds]bool) {
	c.resyncing.Lock()
	defer c.resyncing.Unlock()
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	if !c.acked {
		c.stale = true
		for k, ch := range ks {
			c.pending[k] = c.pending[k] || ch
		}
		c.mu.Unlock()
		return
	}
	old := slices.Clone(c.streams)
	c.mu.Unlock()
	var members []*member
	if cat != nil {
		members = cat.live("")
	}
	var add []*member
	for _, m := range members {
		if !slices.ContainsFunc(old, func(s *listenStream) bool { return sameServer(s.m.srv, m.srv) }) {
			add = append(add, m)
		}
	}
	var drop []*listenStream
	for _, s := range old {
		if !slices.ContainsFunc(members, func(m *member) bool { return sameServer(s.m.srv, m.srv) }) {
			drop = append(drop, s)
		}
	}
	// Added first: a stream whose every server was replaced stays open.
	for _, m := range add {
		call, err := m.invoke(c.ctx, c.req) // the stream's context, as the client's request is for the others
		if err != nil {
			c.r.log.Debug("subscriptions/listen failed", "view", c.r.Name(), "server", m.name, "err", err)
			continue
		}
		s := &listenStream{m: m, call: call}
		c.mu.Lock()
		if c.done {
			c.mu.Unlock()
			call.Abandon(true)
			return
		}
		c.streams = append(c.streams, s)
		c.pumps++
		c.mu.Unlock()
		go c.pump(s, true)
	}
	for _, s := range drop {
		s.call.Abandon(true) // its pump ends
	}
	for _, k := range []kind{kTools, kPrompts, kResources} {
		if ks[k] && string(jsonrpc.Member(c.req.Params, "notifications", listKeys[k])) == "true" {
			c.q.Push(jsonrpc.NewNotification(kinds[k].changed, jsonrpc.Marshal(map[string]any{
				"_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: c.req.ID},
			})), false)
		}
	}
}

// next waits for a call's next message.
func next(ctx context.Context, c session.Call) (*jsonrpc.Message, error) {
	for {
		m, ended := c.Poll()
		if m != nil {
			return m, nil
		}
		if ended {
			return nil, session.ErrNoResponse
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
