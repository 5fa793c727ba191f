package era

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// LegacyOverModern serves legacy sessions over a 2026-07-28 server. Join is
// the gateway destination's Join for a modern server.
//
// Switchboard holds the session the server does not have: initialize is
// answered from server/discover; every request carries the session's
// protocol version, client capabilities, client info and log level in
// _meta; the GET stream is fed by subscriptions/listen (reopened when
// resources/subscribe changes the set); an input_required result is
// turned into real sampling/createMessage, elicitation/create and
// roots/list requests to the client, whose answers go back as
// inputResponses on the retried request.
type LegacyOverModern struct {
	srv  StatelessServer
	opts Options
}

// NewLegacyOverModern returns a translator in front of the modern server srv.
func NewLegacyOverModern(srv StatelessServer, opts Options) *LegacyOverModern {
	opts.defaults()
	return &LegacyOverModern{srv: srv, opts: opts}
}

// Join answers the client's initialize from server/discover and returns
// the session's backend.
func (t *LegacyOverModern) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	requested, _ := jsonrpc.StringMember(init.Params, "protocolVersion")
	caps := orEmpty(jsonrpc.Member(init.Params, "capabilities"))
	info := jsonrpc.Member(init.Params, "clientInfo")
	s := &legacySession{t: t, down: down, caps: caps, pending: map[string]chan *jsonrpc.Message{}, calls: map[string]*legacyCall{}}
	s.elicitURL = mcp.ElicitsURL(mcp.NegotiateLegacy(requested), caps)
	s.setMeta(info, "")

	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	if s.elicitURL {
		ctx = upstream.WithURLElicitation(ctx, down)
	}
	req := jsonrpc.NewRequest(json.RawMessage(`"switchboard-discover"`), "server/discover", s.params(nil))
	c, err := t.srv.Stateless(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	resp, err := session.Drain(ctx, c, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: server/discover: %v", upstream.ErrUnavailable, t.opts.Name, err)
	}
	if e := resp.ErrorOf(); e != nil {
		if e.Code == mcp.CodeURLElicitationRequired || e.Code == mcp.CodeOpenURL {
			// A login for the client's person (or its fallback): the
			// client is answered with it.
			return nil, nil, fmt.Errorf("%w: %s: server/discover: %w", upstream.ErrUnavailable, t.opts.Name, e)
		}
		return nil, nil, fmt.Errorf("%w: %s: server/discover: %s", upstream.ErrUnavailable, t.opts.Name, e.Message)
	}
	s.serverCaps = orEmpty(jsonrpc.Member(resp.Result, "capabilities"))
	s.relisten() // the GET stream gets the server's list changes
	return s, jsonrpc.NewResult(init.ID, initFromDiscover(resp.Result, requested)), nil
}

// initFromDiscover builds the InitializeResult for a client that asked for
// version requested.
func initFromDiscover(d json.RawMessage, requested string) json.RawMessage {
	caps := map[string]json.RawMessage{}
	_ = json.Unmarshal(orEmpty(jsonrpc.Member(d, "capabilities")), &caps)
	// Switchboard holds the session state the server does not: the log
	// level (sent in each request's _meta) and subscriptions (fed from
	// subscriptions/listen).
	if _, ok := caps["logging"]; !ok {
		caps["logging"] = json.RawMessage(`{}`)
	}
	var info any = map[string]string{"name": "switchboard", "version": "1"}
	if si := jsonrpc.Member(d, "_meta", mcp.MetaServerInfo); len(si) > 0 {
		info = si
	}
	out := map[string]any{"protocolVersion": mcp.NegotiateLegacy(requested), "capabilities": caps, "serverInfo": info}
	if s, ok := jsonrpc.StringMember(d, "instructions"); ok {
		out["instructions"] = s
	}
	return jsonrpc.Marshal(out)
}

// legacySession is one legacy client's session over a modern server.
type legacySession struct {
	t          *LegacyOverModern
	down       upstream.Downstream
	caps       json.RawMessage // the client's capabilities
	serverCaps json.RawMessage
	elicitURL  bool // the client takes MCP's -32042 (upstream.WithURLElicitation)

	meta atomic.Pointer[[]byte] // the _meta members every request carries
	next atomic.Int64           // ids of Switchboard's requests to the client

	mu      sync.Mutex
	info    json.RawMessage
	level   string
	pending map[string]chan *jsonrpc.Message // server→client requests by the id the client got
	calls   map[string]*legacyCall           // tools/call, prompts/get, resources/read in flight, by client id
	subs    []string                         // resources subscribed to
	listen  session.Call                     // the subscriptions/listen feeding the GET stream
	left    bool
}

// setMeta recomputes the _meta members from the client info and log level.
func (s *legacySession) setMeta(info json.RawMessage, level string) {
	s.mu.Lock()
	if info != nil {
		s.info = info
	}
	if level != "" {
		s.level = level
	}
	b := make([]byte, 0, 160+len(s.caps)+len(s.info))
	b = append(b, `"`+mcp.MetaProtocolVersion+`":"`+mcp.ModernVersion+`","`+mcp.MetaClientCapabilities+`":`...)
	b = append(b, s.caps...)
	if len(s.info) > 0 {
		b = append(b, `,"`+mcp.MetaClientInfo+`":`...)
		b = append(b, s.info...)
	}
	// A legacy client that set no level gets every message (the legacy
	// default); a modern server sends none without a level.
	level = s.level
	if level == "" {
		level = "debug"
	}
	b = append(b, `,"`+mcp.MetaLogLevel+`":`...)
	b = append(b, jsonrpc.Quote(level)...)
	s.mu.Unlock()
	s.meta.Store(&b)
}

// params returns params with the session's _meta added.
func (s *legacySession) params(params []byte) []byte {
	return withMeta(params, *s.meta.Load())
}

func (s *legacySession) has(capability string) bool {
	return jsonrpc.Member(s.caps, capability) != nil
}

// Call serves a legacy request.
func (s *legacySession) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	switch req.Method {
	case "initialize":
		return nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "session is already initialized")
	case "ping":
		return result(req, json.RawMessage(`{}`)), nil
	case "logging/setLevel":
		level, ok := jsonrpc.StringMember(req.Params, "level")
		if !ok || level == "" {
			return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid log level")
		}
		s.setMeta(nil, level)
		return result(req, json.RawMessage(`{}`)), nil
	case "resources/subscribe", "resources/unsubscribe":
		uri, ok := jsonrpc.StringMember(req.Params, "uri")
		if !ok {
			return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "%s: params.uri must be a string", req.Method)
		}
		s.subscribe(uri, req.Method == "resources/subscribe")
		return result(req, json.RawMessage(`{}`)), nil
	}
	fwd := &jsonrpc.Message{ID: req.ID, Method: req.Method, Params: s.params(req.Params)}
	if s.elicitURL {
		ctx = upstream.WithURLElicitation(ctx, s.down)
	}
	inner, err := s.t.srv.Stateless(ctx, fwd)
	if err != nil {
		return nil, err
	}
	if !mcp.InputMethod(req.Method) {
		return inner, nil
	}
	c := &legacyCall{s: s, req: fwd, inner: inner}
	s.mu.Lock()
	s.calls[string(req.ID)] = c
	s.mu.Unlock()
	return c, nil
}

// Notify takes a client notification. notifications/cancelled of a call
// in flight closes its upstream stream (a stateless server's
// cancellation); nothing else reaches a stateless server (roots changes
// are asked per call).
func (s *legacySession) Notify(ctx context.Context, n *jsonrpc.Message) error {
	if n.Method != "notifications/cancelled" {
		return nil
	}
	id := jsonrpc.Member(n.Params, "requestId")
	s.mu.Lock()
	c := s.calls[string(id)]
	s.mu.Unlock()
	if c != nil {
		c.cancel(true)
	}
	return nil
}

// done forgets a call that ended.
func (s *legacySession) done(c *legacyCall) {
	s.mu.Lock()
	if s.calls[string(c.req.ID)] == c {
		delete(s.calls, string(c.req.ID))
	}
	s.mu.Unlock()
}

// Respond takes the client's answer to a server→client request.
func (s *legacySession) Respond(ctx context.Context, r *jsonrpc.Message) error {
	s.mu.Lock()
	ch := s.pending[string(r.ID)]
	delete(s.pending, string(r.ID))
	s.mu.Unlock()
	if ch != nil {
		ch <- r // buffered
	}
	return nil
}

// Leave ends the session's subscription stream.
func (s *legacySession) Leave() {
	s.mu.Lock()
	s.left = true
	l := s.listen
	s.listen = nil
	s.mu.Unlock()
	if l != nil {
		l.Abandon(true)
	}
}

// ask sends the client a request and returns the channel its answer comes on.
func (s *legacySession) ask(method string, params json.RawMessage) (*jsonrpc.Message, chan *jsonrpc.Message) {
	id := jsonrpc.Quote("sb-" + strconv.FormatInt(s.next.Add(1), 10))
	ch := make(chan *jsonrpc.Message, 1)
	s.mu.Lock()
	s.pending[string(id)] = ch
	s.mu.Unlock()
	return jsonrpc.NewRequest(id, method, params), ch
}

func (s *legacySession) forget(id json.RawMessage) {
	s.mu.Lock()
	delete(s.pending, string(id))
	s.mu.Unlock()
}

// legacyCall is a legacy tools/call, prompts/get or resources/read on a
// modern server: an input_required result is answered by asking the client
// (real server→client requests on the call's stream) and retrying with
// inputResponses. It passes the inner call through untouched until an
// input_required result arrives; from then on a goroutine, owned by the
// call and ended by Abandon or the final response, drives the rounds.
type legacyCall struct {
	s     *legacySession
	req   *jsonrpc.Message // as sent upstream (with _meta)
	inner session.Call

	driving   atomic.Bool
	cancelled atomic.Bool   // the client cancelled it before any input round
	q         jsonrpc.Queue // the driver's output, once driving
	ctx       context.Context
	stop      context.CancelFunc
}

func (c *legacyCall) LongLived() bool { return false }

func (c *legacyCall) Ready() <-chan struct{} {
	if c.driving.Load() {
		return c.q.Ready()
	}
	return c.inner.Ready()
}

func (c *legacyCall) Poll() (*jsonrpc.Message, bool) {
	if c.driving.Load() {
		return c.q.Poll()
	}
	m, ended := c.inner.Poll()
	switch {
	case m == nil && ended && c.cancelled.CompareAndSwap(true, false):
		// Cancelled by the client (its notifications/cancelled): the
		// stream upstream was closed; the client's request still gets
		// its answer, as from a legacy server.
		return jsonrpc.NewError(c.req.ID, jsonrpc.Errorf(mcp.CodeRequestRefused, "request cancelled by the client")), false
	case m == nil:
		return nil, ended
	case !m.IsResponse():
		return m, ended
	case m.Result == nil:
		c.s.done(c)
		return m, ended
	}
	if v, _ := jsonrpc.StringMember(m.Result, "resultType"); v != "input_required" {
		c.s.done(c)
		return m, ended
	}
	c.q.Init(1024)
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.driving.Store(true)
	go c.drive(m)
	return c.q.Poll()
}

func (c *legacyCall) Abandon(cancel bool) { c.cancel(false) }

// cancel stops the call upstream; byClient (notifications/cancelled)
// leaves the client an error answer to read.
func (c *legacyCall) cancel(byClient bool) {
	c.s.done(c)
	if c.driving.Load() {
		c.stop()
		if byClient {
			c.q.PushLast(jsonrpc.NewError(c.req.ID, jsonrpc.Errorf(mcp.CodeRequestRefused, "request cancelled by the client")))
		}
		c.q.Close()
		return
	}
	c.cancelled.Store(byClient)
	c.inner.Abandon(true)
}

// maxRounds bounds the input rounds of one call.
const maxRounds = 32

// drive answers input_required results until the final one.
func (c *legacyCall) drive(first *jsonrpc.Message) {
	defer c.stop()
	defer c.s.done(c)
	resp := first
	for round := 0; ; round++ {
		if round >= maxRounds {
			c.q.PushLast(jsonrpc.NewError(c.req.ID, jsonrpc.Errorf(jsonrpc.InternalError, "switchboard: more than %d input rounds", maxRounds)))
			return
		}
		inputs, err := c.ask(jsonrpc.Member(resp.Result, "inputRequests"))
		if err != nil {
			if c.ctx.Err() == nil {
				c.q.PushLast(jsonrpc.NewError(c.req.ID, jsonrpc.Errorf(jsonrpc.InternalError, "switchboard: %v", err)))
			}
			return
		}
		params := withoutMembers(c.req.Params, "inputResponses", "requestState")
		add := []byte(`"inputResponses":`)
		add = append(add, jsonrpc.Marshal(inputs)...)
		if st := jsonrpc.Member(resp.Result, "requestState"); st != nil {
			add = append(add, `,"requestState":`...)
			add = append(add, st...)
		}
		retry := &jsonrpc.Message{ID: c.req.ID, Method: c.req.Method, Params: prependMembers(params, add)}
		inner, err := c.s.t.srv.Stateless(c.ctx, retry)
		if err != nil {
			c.q.PushLast(jsonrpc.NewError(c.req.ID, mcp.RPCError(fmt.Errorf("%s: %w", c.s.t.opts.Name, err))))
			return
		}
		// Its related messages pass on; abandoned (ctx), it is cancelled.
		resp, err = session.Drain(c.ctx, inner, func(m *jsonrpc.Message) { c.q.Push(m, false) })
		if err != nil {
			if c.ctx.Err() == nil { // it ended without a response
				c.q.PushLast(jsonrpc.NewError(c.req.ID, jsonrpc.Errorf(jsonrpc.InternalError, "switchboard: %v", err)))
			}
			return
		}
		if v, _ := jsonrpc.StringMember(resp.Result, "resultType"); resp.Result == nil || v != "input_required" {
			c.q.PushLast(resp)
			return
		}
	}
}

// ask sends each input request to the client (checking its capabilities)
// and collects the answers by key.
func (c *legacyCall) ask(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &reqs); err != nil {
		return nil, fmt.Errorf("invalid inputRequests from %s: %v", c.s.t.opts.Name, err)
	}
	type waiting struct {
		key string
		id  json.RawMessage
		ch  chan *jsonrpc.Message
	}
	var all []waiting
	defer func() {
		for _, w := range all {
			c.s.forget(w.id)
		}
	}()
	for _, key := range slices.Sorted(maps.Keys(reqs)) {
		r := reqs[key]
		need := upstream.CapabilityFor(r.Method)
		if need == "" {
			return nil, fmt.Errorf("%s asked for input with an unknown method %q", c.s.t.opts.Name, r.Method)
		}
		if !c.s.has(need) {
			return nil, fmt.Errorf("%s asked for %s, which the client did not declare (capability %s)", c.s.t.opts.Name, r.Method, need)
		}
		m, ch := c.s.ask(r.Method, r.Params)
		all = append(all, waiting{key: key, id: m.ID, ch: ch})
		c.q.Push(m, true)
	}
	timeout := time.NewTimer(c.s.t.opts.StateTTL)
	defer timeout.Stop()
	out := map[string]json.RawMessage{}
	for _, w := range all {
		select {
		case r := <-w.ch:
			if e := r.ErrorOf(); e != nil {
				return nil, fmt.Errorf("the client refused %s: %s", reqs[w.key].Method, e.Message)
			}
			out[w.key] = r.Result
		case <-timeout.C:
			return nil, fmt.Errorf("no answer from the client to %s within %s", reqs[w.key].Method, c.s.t.opts.StateTTL)
		case <-c.ctx.Done():
			return nil, c.ctx.Err()
		}
	}
	return out, nil
}

// subscribe updates the session's subscribed resources and reopens the
// subscriptions/listen stream that feeds the GET stream.
func (s *legacySession) subscribe(uri string, on bool) {
	s.mu.Lock()
	i := slices.Index(s.subs, uri)
	switch {
	case on && i < 0:
		s.subs = append(s.subs, uri)
	case !on && i >= 0:
		s.subs = slices.Delete(s.subs, i, i+1)
	default:
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.relisten()
}

// relisten (re)opens the session's subscriptions/listen with the list
// changes the server offers and the resources subscribed to.
func (s *legacySession) relisten() {
	want := offeredListen(s.serverCaps)
	s.mu.Lock()
	if s.left {
		s.mu.Unlock()
		return
	}
	want.URIs = slices.Clone(s.subs)
	old := s.listen
	s.listen = nil
	s.mu.Unlock()
	if old != nil {
		old.Abandon(true)
	}
	if !want.Tools && !want.Prompts && !want.Resources && len(want.URIs) == 0 {
		return
	}
	params := s.params(jsonrpc.Marshal(map[string]any{"notifications": want}))
	id := jsonrpc.Quote("sb-listen-" + strconv.FormatInt(s.next.Add(1), 10))
	c, err := s.t.srv.Stateless(context.Background(), jsonrpc.NewRequest(id, "subscriptions/listen", params))
	if err != nil {
		s.t.opts.Logger.Warn("subscriptions/listen failed", "destination", s.t.opts.Name, "err", err)
		return
	}
	s.mu.Lock()
	if s.left {
		s.mu.Unlock()
		c.Abandon(true)
		return
	}
	s.listen = c
	s.mu.Unlock()
	go s.feed(c)
}

// feed passes the listen stream's notifications to the session's GET
// stream, without the subscription tag. It ends with the stream (Abandon).
func (s *legacySession) feed(c session.Call) {
	for {
		m, ended := c.Poll()
		if m != nil {
			if m.IsNotification() && m.Method != "notifications/subscriptions/acknowledged" {
				s.down.Deliver(&jsonrpc.Message{Method: m.Method, Params: withoutMeta(m.Params, mcp.MetaSubscriptionID)})
			}
			continue
		}
		if ended {
			return
		}
		<-c.Ready()
	}
}
