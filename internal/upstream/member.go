package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// Member is one client session attached to an Upstream.
type Member struct {
	u *Upstream
	d Downstream

	// Set at Join, read-only after.
	version string          // protocol version negotiated with this client
	caps    map[string]bool // the capabilities of capabilityFor the client declared
	// elicitURL: the client takes MCP's URLElicitationRequired error
	// (mcp.ElicitsURL); the others get its fallback (see response).
	elicitURL bool

	// The fields below are guarded by u.mu.
	calls map[string]int64 // client request id → internal id, for cancellation and duplicates
	level int              // index in logLevels of the client's level; -1 unset (receives all)
	subs  map[string]bool  // resource URIs this client subscribed to
	left  bool
}

var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelIndex(s string) int { return slices.Index(logLevels, s) }

// Version returns the protocol version negotiated with the client.
func (m *Member) Version() string { return m.version }

// negotiate picks the version for a client that asked for requested when the
// server speaks server: the client's own if Switchboard knows it and the
// server is not older, else the server's.
func negotiate(requested, server string) string {
	ri, si := mcp.LegacyRank(requested), mcp.LegacyRank(server)
	if ri >= 0 && (si < 0 || ri <= si) {
		return requested
	}
	if server != "" {
		return server
	}
	return mcp.LatestLegacyVersion
}

// Join attaches a client session, starting and initializing the server if
// needed, and returns the InitializeResult to send to the client (as a
// response to init, under the client's own id).
func (u *Upstream) Join(ctx context.Context, d Downstream, init *jsonrpc.Message) (*Member, *jsonrpc.Message, error) {
	if u.opts.Era != Legacy {
		return nil, nil, fmt.Errorf("%w: %s speaks protocol 2026-07-28 only", ErrUnavailable, u.opts.Name)
	}
	requested, _ := jsonrpc.StringMember(init.Params, "protocolVersion")
	if err := u.ensure(ctx, init.Params); err != nil {
		return nil, nil, forClient(err, mcp.ElicitsURL(requested, jsonrpc.Member(init.Params, "capabilities")))
	}
	m := &Member{u: u, d: d, calls: map[string]int64{}, level: -1, subs: map[string]bool{}, caps: map[string]bool{}}
	caps := jsonrpc.Member(init.Params, "capabilities")
	for _, c := range capabilityFor {
		m.caps[c] = jsonrpc.Member(caps, c) != nil
	}
	u.mu.Lock()
	if u.state == Closed {
		u.mu.Unlock()
		return nil, nil, ErrClosed
	}
	res, server := u.initRes, u.version
	u.members[m] = struct{}{}
	u.mu.Unlock()
	m.version = negotiate(requested, server)
	m.elicitURL = mcp.ElicitsURL(m.version, caps)
	if m.version != server {
		_, s, e, ok := jsonrpc.Lookup(res, "protocolVersion")
		if ok {
			res = jsonrpc.Splice(res, s, e, jsonrpc.Quote(m.version))
		}
	}
	return m, jsonrpc.NewResult(init.ID, res), nil
}

// Leave detaches the member; its in-flight calls are cancelled upstream and
// its subscriptions released.
func (m *Member) Leave() {
	u := m.u
	u.mu.Lock()
	if m.left {
		u.mu.Unlock()
		return
	}
	m.left = true
	delete(u.members, m)
	for id, ms := range u.elicited {
		if ms = slices.DeleteFunc(ms, func(x elicitee) bool { return x.m == m }); len(ms) == 0 {
			delete(u.elicited, id)
		} else {
			u.elicited[id] = ms
		}
	}
	var calls []*Call
	for _, id := range m.calls {
		if c := u.pending[id]; c != nil {
			calls = append(calls, c)
		}
	}
	var unsub []string
	for uri := range m.subs {
		if u.subs[uri]--; u.subs[uri] <= 0 {
			delete(u.subs, uri)
			unsub = append(unsub, uri)
		}
	}
	u.mu.Unlock()
	for _, c := range calls {
		c.Abandon(true)
	}
	if len(unsub) > 0 {
		go u.unsubscribe(unsub)
	}
	u.updateLevel()
}

// Idle reports whether the member could serve another client as it is: it
// has not left, has no request in flight and no subscription. A pool of
// members (package era's translation) lends only idle members.
func (m *Member) Idle() bool {
	u := m.u
	u.mu.Lock()
	defer u.mu.Unlock()
	return !m.left && len(m.calls) == 0 && len(m.subs) == 0 && m.level < 0
}

func (u *Upstream) unsubscribe(uris []string) {
	ctx, cancel := context.WithTimeout(context.Background(), u.opts.HandshakeTimeout)
	defer cancel()
	for _, uri := range uris {
		if _, err := u.internalCall(ctx, "resources/unsubscribe", jsonrpc.Marshal(map[string]string{"uri": uri})); err != nil {
			u.log.Debug("resources/unsubscribe failed", "uri", uri, "err", err)
		}
	}
}

// minLevel returns the lowest level any member set; mu held.
func (u *Upstream) minLevel() string {
	lo := -1
	for m := range u.members {
		if m.level >= 0 && (lo < 0 || m.level < lo) {
			lo = m.level
		}
	}
	if lo < 0 {
		return ""
	}
	return logLevels[lo]
}

// updateLevel sends logging/setLevel when the lowest member level changed.
func (u *Upstream) updateLevel() {
	u.mu.Lock()
	want := u.minLevel()
	if want == "" || want == u.level || u.state != Ready {
		u.mu.Unlock()
		return
	}
	u.level = want
	u.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), u.opts.HandshakeTimeout)
		defer cancel()
		if _, err := u.internalCall(ctx, "logging/setLevel", jsonrpc.Marshal(map[string]string{"level": want})); err != nil {
			u.log.Debug("logging/setLevel failed", "err", err)
		}
	}()
}

// Call sends a client request and returns the Call that carries its related
// messages and response. The caller must read it to the end or Abandon it.
func (m *Member) Call(ctx context.Context, req *jsonrpc.Message) (*Call, error) {
	u := m.u
	switch req.Method {
	case "logging/setLevel":
		return m.setLevel(ctx, req)
	case "resources/subscribe", "resources/unsubscribe":
		return m.subscription(ctx, req)
	case "initialize":
		return nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "session is already initialized")
	}
	return u.call(ctx, m, req)
}

// CallStateless sends a request that belongs to no session (protocol
// 2026-07-28).
func (u *Upstream) CallStateless(ctx context.Context, req *jsonrpc.Message) (*Call, error) {
	return u.call(ctx, nil, req)
}

type elicitURLKey struct{}

// WithURLElicitation marks ctx as that of a stateless request made for a
// legacy client that takes MCP's URLElicitationRequired error (package
// era, for a 2025-11-25 client over a 2026-07-28 server), reached by
// down: its -32042 answer reaches the client as it is, and
// ElicitationComplete tells down. Any other stateless request gets the
// error's fallback (mcp.URLElicitationFallback).
func WithURLElicitation(ctx context.Context, down Downstream) context.Context {
	return context.WithValue(ctx, elicitURLKey{}, down)
}

// elicitingDown returns the Downstream WithURLElicitation put in ctx, or
// nil.
func elicitingDown(ctx context.Context) Downstream {
	d, _ := ctx.Value(elicitURLKey{}).(Downstream)
	return d
}

func (u *Upstream) call(ctx context.Context, m *Member, req *jsonrpc.Message) (*Call, error) {
	var down Downstream
	elicitURL := m != nil && m.elicitURL
	if m == nil {
		down = elicitingDown(ctx)
		elicitURL = down != nil
	}
	if err := u.ensure(ctx, nil); err != nil {
		return nil, forClient(err, elicitURL)
	}
	c := u.newCall(m, req.ID, req.Method)
	c.subscription = req.Method == "subscriptions/listen"
	c.elicitURL, c.elicitDown = elicitURL, down
	params := req.Params
	if tok, s, e, ok := req.LookupMeta("progressToken"); ok {
		c.token = tok
		params = jsonrpc.Splice(params, s, e, jsonrpc.IntID(c.id))
	}
	u.mu.Lock()
	if m != nil {
		if m.left {
			u.mu.Unlock()
			return nil, ErrClosed
		}
		key := string(req.ID)
		if _, dup := m.calls[key]; dup {
			u.mu.Unlock()
			return nil, fmt.Errorf("%w %s: a request with this id is still in flight", ErrDuplicateID, req.ID)
		}
		m.calls[key] = c.id
	}
	c.sent = time.Now() // before pending holds it: the reader's response sees it
	u.pending[c.id] = c
	u.watchStalls()
	u.mu.Unlock()
	// The request is built in the call (which the reader may already hold:
	// it reads only the fields set before pending did) and encoded straight
	// into the connection's buffer: no allocation of its own.
	c.out = jsonrpc.Message{ID: strconv.AppendInt(c.idBuf[:0], c.id, 10), Method: req.Method, Params: params}
	err := u.write(&c.out)
	c.out = jsonrpc.Message{}
	if err != nil {
		u.forget(c)
		return nil, err
	}
	c.wrote.Store(time.Now().UnixNano())
	return c, nil
}

// localCall returns a Call already holding its response.
func (u *Upstream) localCall(m *Member, req *jsonrpc.Message, result json.RawMessage) *Call {
	c := &Call{u: u, member: m, clientID: req.ID, method: req.Method, local: true}
	c.q.Init(1)
	c.q.PushLast(jsonrpc.NewResult(req.ID, result))
	return c
}

func (m *Member) setLevel(ctx context.Context, req *jsonrpc.Message) (*Call, error) {
	u := m.u
	level, _ := jsonrpc.StringMember(req.Params, "level")
	li := levelIndex(level)
	if li < 0 {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid log level %q", level)
	}
	if err := u.ensure(ctx, nil); err != nil {
		return nil, err
	}
	u.mu.Lock()
	m.level = li
	want := u.minLevel()
	if want == u.level {
		u.mu.Unlock()
		return u.localCall(m, req, nil), nil
	}
	u.level = want
	u.mu.Unlock()
	fwd := *req
	fwd.Params = jsonrpc.Marshal(map[string]string{"level": want})
	return u.call(ctx, m, &fwd)
}

func (m *Member) subscription(ctx context.Context, req *jsonrpc.Message) (*Call, error) {
	u := m.u
	uri, ok := jsonrpc.StringMember(req.Params, "uri")
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "%s: params.uri must be a string", req.Method)
	}
	if err := u.ensure(ctx, nil); err != nil {
		return nil, err
	}
	sub := req.Method == "resources/subscribe"
	u.mu.Lock()
	forward := false
	switch {
	case sub && !m.subs[uri]:
		m.subs[uri] = true
		u.subs[uri]++
		forward = u.subs[uri] == 1
	case !sub && m.subs[uri]:
		delete(m.subs, uri)
		u.subs[uri]--
		forward = u.subs[uri] <= 0
		if forward {
			delete(u.subs, uri)
		}
	}
	u.mu.Unlock()
	if !forward {
		return u.localCall(m, req, nil), nil
	}
	return u.call(ctx, m, req)
}

// Notify forwards a client notification: cancellation of the client's own
// requests (mapped to internal ids), progress and roots/list_changed.
// notifications/initialized is absorbed: Switchboard ran the handshake.
func (m *Member) Notify(ctx context.Context, n *jsonrpc.Message) error {
	u := m.u
	switch n.Method {
	case "notifications/initialized":
		return nil
	case "notifications/cancelled":
		rid, s, e, ok := jsonrpc.Lookup(n.Params, "requestId")
		if !ok {
			return nil // invalid cancellations SHOULD be ignored
		}
		u.mu.Lock()
		id, found := m.calls[string(rid)]
		c := u.pending[id]
		u.mu.Unlock()
		if !found || c == nil {
			return nil
		}
		out := &jsonrpc.Message{Method: n.Method, Params: jsonrpc.Splice(n.Params, s, e, jsonrpc.IntID(id))}
		u.forget(c)
		c.fail(jsonrpc.Errorf(mcp.CodeRequestRefused, "request cancelled by the client"))
		return u.write(out)
	}
	if err := u.ensure(ctx, nil); err != nil {
		return err
	}
	return u.write(n)
}

// Respond forwards the client's response to a server→client request.
func (m *Member) Respond(ctx context.Context, r *jsonrpc.Message) error {
	u := m.u
	n, ok := jsonrpc.ParseIntID(r.ID)
	u.mu.Lock()
	sr := u.reverse[n]
	if !ok || sr == nil || sr.member != m {
		u.mu.Unlock()
		u.log.Debug("response to an unknown server request dropped", "id", string(r.ID))
		return nil
	}
	delete(u.reverse, n)
	u.mu.Unlock()
	out := *r
	out.ID = sr.upID
	return u.write(&out)
}
