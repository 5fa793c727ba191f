package era

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Joiner attaches a downstream to a legacy server (one shared connection;
// each Join is a member with its own capabilities) and returns the member's
// backend and the InitializeResult response.
type Joiner interface {
	Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
}

// Options configure Modern and Legacy translators.
type Options struct {
	Name string // destination name, for errors and logs
	// StateTTL is how long a parked MRTR state waits for the client's
	// retry. Zero means 5 minutes.
	StateTTL time.Duration
	// MaxParked bounds the parked states. Zero means 1024.
	MaxParked int
	// Timeout bounds Switchboard's own upstream calls (discover,
	// subscribe). Zero means 30 s.
	Timeout time.Duration
	Logger  *slog.Logger // nil discards
}

func (o *Options) defaults() {
	if o.StateTTL <= 0 {
		o.StateTTL = 5 * time.Minute
	}
	if o.MaxParked <= 0 {
		o.MaxParked = 1024
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ModernOverLegacy serves 2026-07-28 requests over a legacy server (see the package
// documentation). It implements StatelessServer.
type ModernOverLegacy struct {
	join   Joiner
	opts   Options
	states *states
}

// NewModernOverLegacy returns a translator in front of the legacy server join reaches.
func NewModernOverLegacy(join Joiner, opts Options) *ModernOverLegacy {
	opts.defaults()
	return &ModernOverLegacy{join: join, opts: opts, states: newStates(opts.MaxParked, opts.StateTTL)}
}

// Close cancels every parked call.
func (t *ModernOverLegacy) Close() { t.states.close() }

// Parked returns the number of parked MRTR states (for tests and status).
func (t *ModernOverLegacy) Parked() int { return t.states.len() }

// CheckMeta checks the _meta every 2026-07-28 request must carry.
func CheckMeta(req *jsonrpc.Message) *jsonrpc.Error {
	v, ok := req.MetaString(MetaProtocolVersion)
	if !ok || v == "" {
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "missing _meta %q", MetaProtocolVersion)
	}
	if v != ModernVersion {
		return &jsonrpc.Error{Code: jsonrpc.UnsupportedProtocolVersion,
			Message: "unsupported protocol version " + strconv.Quote(v),
			Data:    jsonrpc.Marshal(map[string]any{"supported": []string{ModernVersion}, "requested": v})}
	}
	if c, _, _, ok := req.LookupMeta(MetaClientCapabilities); !ok || len(c) == 0 || c[0] != '{' {
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "missing or invalid _meta %q", MetaClientCapabilities)
	}
	return nil
}

// removedMethods are legacy methods 2026-07-28 no longer has: a modern
// client gets -32601 for them, as from a modern server.
var removedMethods = []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
	"tasks/list", "tasks/result"}

// inputMethods are the requests that may be answered with input_required.
func inputMethod(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}

// cacheable are the methods whose 2026-07-28 results carry ttlMs and
// cacheScope.
func cacheable(method string) bool {
	switch method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover":
		return true
	}
	return false
}

// Stateless serves one 2026-07-28 request.
func (t *ModernOverLegacy) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if !req.IsRequest() {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "not a request")
	}
	if e := CheckMeta(req); e != nil {
		return failure(req, e), nil
	}
	switch {
	case req.Method == "server/discover":
		return t.discover(ctx, req), nil
	case req.Method == "subscriptions/listen":
		return t.listen(ctx, req), nil
	case slices.Contains(removedMethods, req.Method):
		return failure(req, jsonrpc.Errorf(jsonrpc.MethodNotFound, "method not found: %s (removed in protocol %s)", req.Method, ModernVersion)), nil
	}
	if inputMethod(req.Method) {
		if st, ok := jsonrpc.StringMember(req.Params, "requestState"); ok && isToken(st) {
			return t.resume(ctx, req), nil
		}
	}
	b, err := t.member(ctx, req)
	if err != nil {
		return nil, err
	}
	inner, err := b.Call(ctx, legacyRequest(req))
	if err != nil {
		b.Leave()
		return nil, err
	}
	return t.newCall(ctx, req, b, inner), nil
}

// member joins the legacy server as a member with the request's client
// capabilities and info.
func (t *ModernOverLegacy) member(ctx context.Context, req *jsonrpc.Message) (session.Backend, error) {
	b, _, err := t.join.Join(ctx, discard{}, initFor(req))
	return b, err
}

// initFor builds the initialize request of a modern request's member.
func initFor(req *jsonrpc.Message) *jsonrpc.Message {
	caps, _, _, _ := req.LookupMeta(MetaClientCapabilities)
	info, _, _, ok := req.LookupMeta(MetaClientInfo)
	if !ok {
		info = []byte(`{"name":"2026-07-28 client","version":"0"}`)
	}
	params := make([]byte, 0, 96+len(caps)+len(info))
	params = append(params, `{"protocolVersion":"`+upstream.LatestVersion+`","capabilities":`...)
	params = append(params, caps...)
	params = append(params, `,"clientInfo":`...)
	params = append(params, info...)
	params = append(params, '}')
	return jsonrpc.NewRequest(json.RawMessage(`0`), "initialize", params)
}

// legacyRequest is req as a legacy server gets it: without _meta's
// protocolVersion, which marks a request as 2026-07-28 (to an HTTP
// upstream connection too, which would send it without the session). The
// other 2026-07-28 _meta members stay: _meta is open to any member, and a
// legacy server reads the era from its session's initialize; removing
// them would cost a decode and an encode per call.
func legacyRequest(req *jsonrpc.Message) *jsonrpc.Message {
	_, s, e, ok := req.LookupMeta(MetaProtocolVersion)
	if !ok {
		return req
	}
	params, ok := removeMember(req.Params, MetaProtocolVersion, s, e)
	if !ok {
		params = withoutMeta(req.Params, MetaProtocolVersion) // an escaped key: the slow way
	}
	return &jsonrpc.Message{ID: req.ID, Method: req.Method, Params: params}
}

// discard is the downstream of a transient member: nothing outlives its
// one call.
type discard struct{}

func (discard) Deliver(*jsonrpc.Message) {}
func (discard) End(error)                {}

// discover answers server/discover from the server's InitializeResult.
func (t *ModernOverLegacy) discover(ctx context.Context, req *jsonrpc.Message) session.Call {
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	b, res, err := t.join.Join(ctx, discard{}, initFor(req))
	if err != nil {
		return failure(req, jsonrpc.Errorf(jsonrpc.UpstreamUnavailable, "%s: %v", t.opts.Name, err))
	}
	b.Leave()
	return result(req, DiscoverFromInit(res.Result))
}

// DiscoverFromInit builds a DiscoverResult from a legacy InitializeResult.
// Legacy versions stay listed: Switchboard serves them through initialize.
func DiscoverFromInit(init json.RawMessage) json.RawMessage {
	versions := []string{ModernVersion}
	for i := len(upstream.KnownVersions) - 1; i >= 0; i-- {
		versions = append(versions, upstream.KnownVersions[i])
	}
	out := map[string]any{
		"resultType":        "complete",
		"supportedVersions": versions,
		"capabilities":      json.RawMessage(orEmpty(jsonrpc.Member(init, "capabilities"))),
		"ttlMs":             0,
		"cacheScope":        "private",
	}
	if s, ok := jsonrpc.StringMember(init, "instructions"); ok {
		out["instructions"] = s
	}
	if info := jsonrpc.Member(init, "serverInfo"); info != nil {
		out["_meta"] = map[string]json.RawMessage{MetaServerInfo: info}
	}
	return jsonrpc.Marshal(out)
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte(`{}`)
	}
	return b
}

// call is a modern request in flight on a legacy member: it passes the
// server's progress (and log messages, when the request asked for them),
// turns a server→client request into an input_required result (parking
// the call), and amends the final result for the modern era.
type call struct {
	t        *ModernOverLegacy
	method   string
	name     string // params.name or params.uri: part of the state's binding
	caller   string // the authenticated caller ("" without auth): part of it too
	clientID json.RawMessage
	wantLog  bool
	b        session.Backend
	inner    session.Call

	mu   sync.Mutex
	done bool // the final message was returned (or the call abandoned)
}

func (t *ModernOverLegacy) newCall(ctx context.Context, req *jsonrpc.Message, b session.Backend, inner session.Call) *call {
	_, _, _, wantLog := req.LookupMeta(MetaLogLevel)
	return &call{t: t, method: req.Method, name: nameOf(req), caller: auth.FromContext(ctx).Name(),
		clientID: req.ID, wantLog: wantLog, b: b, inner: inner}
}

func nameOf(req *jsonrpc.Message) string {
	if req.Method == "resources/read" {
		s, _ := jsonrpc.StringMember(req.Params, "uri")
		return s
	}
	s, _ := jsonrpc.StringMember(req.Params, "name")
	return s
}

func (c *call) Ready() <-chan struct{} { return c.inner.Ready() }
func (c *call) LongLived() bool        { return false }

// UpstreamTime is the server's share, when the inner call knows it.
func (c *call) UpstreamTime() time.Duration {
	if u, ok := c.inner.(interface{ UpstreamTime() time.Duration }); ok {
		return u.UpstreamTime()
	}
	return 0
}

func (c *call) Poll() (*jsonrpc.Message, bool) {
	for {
		m, ended := c.inner.Poll()
		if m == nil {
			return nil, ended
		}
		switch {
		case m.IsResponse():
			c.finish()
			m.ID = c.clientID // the message is this call's alone
			if m.Result != nil {
				m.Result = amendResult(m.Result, c.method)
			}
			return m, false
		case m.IsRequest():
			if r := c.serverRequest(m); r != nil {
				return r, false
			}
		case m.Method == "notifications/message" && !c.wantLog:
			// 2026-07-28: no log messages for a request without a logLevel.
		default:
			return m, false
		}
	}
}

// amendResult adds what a 2026-07-28 result must carry. A legacy server
// that returns MRTR fields itself (a dual-era SDK shim's later rounds)
// gets its result marked input_required.
func amendResult(res []byte, method string) []byte {
	if inputMethod(method) && hasMember(res, "inputRequests") {
		return ensureMembers(res, [2]string{"resultType", `"input_required"`})
	}
	if cacheable(method) {
		return ensureMembers(res, [2]string{"resultType", `"complete"`}, [2]string{"ttlMs", "0"}, [2]string{"cacheScope", `"private"`})
	}
	if hasMember(res, "resultType") {
		return res
	}
	return prependMembers(res, resultComplete) // the common case: one copy, nothing else
}

var resultComplete = []byte(`"resultType":"complete"`)

func hasMember(obj []byte, key string) bool {
	_, _, _, ok := jsonrpc.Lookup(obj, key)
	return ok
}

// gatherWindow is how long a call that raised a server→client request
// waits for more before it parks: a server that asks several things at
// once (concurrently) gets them into one input_required round.
const gatherWindow = 20 * time.Millisecond

// serverRequest handles a server→client request raised during the call:
// for tools/call, prompts/get and resources/read it parks the call (with
// every other request the server raises at once) and returns the
// input_required result; otherwise the server is refused and nil is
// returned.
func (c *call) serverRequest(m *jsonrpc.Message) *jsonrpc.Message {
	if !inputMethod(c.method) || upstream.CapabilityFor(m.Method) == "" {
		c.refuse(m)
		return nil
	}
	p := &parked{method: c.method, name: c.name, caller: c.caller, b: c.b, inner: c.inner}
	p.add(m)
	timer := time.NewTimer(gatherWindow)
	defer timer.Stop()
gather:
	for {
		more, ended := c.inner.Poll()
		switch {
		case more == nil && ended:
			break gather // the connection ended: the parked call fails on retry
		case more == nil:
			select {
			case <-c.inner.Ready():
				continue
			case <-timer.C:
				break gather
			}
		case more.IsRequest() && upstream.CapabilityFor(more.Method) != "":
			p.add(more)
		case more.IsRequest():
			c.refuse(more)
		case more.IsResponse():
			// The server answered after all (it gave up waiting):
			// nothing to park.
			for _, r := range p.reqs {
				c.b.Respond(context.Background(), jsonrpc.NewError(r.req.ID, jsonrpc.Errorf(jsonrpc.RequestRefused, "switchboard: the call ended")))
			}
			c.finish()
			out := *more
			out.ID = c.clientID
			if more.Result != nil {
				out.Result = amendResult(more.Result, c.method)
			}
			return &out
		}
		// Related notifications meanwhile are dropped: the answer to
		// this request is the input_required result.
	}
	token, err := c.t.states.park(p)
	if err != nil {
		// Too many parked: refuse the server's requests; the call goes on.
		for _, r := range p.reqs {
			_ = c.b.Respond(context.Background(), jsonrpc.NewError(r.req.ID, jsonrpc.Errorf(jsonrpc.RequestRefused, "switchboard: %v", err)))
		}
		return nil
	}
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	return jsonrpc.NewResult(c.clientID, inputRequired(p, token))
}

// refuse answers a server→client request the modern client cannot get.
func (c *call) refuse(m *jsonrpc.Message) {
	_ = c.b.Respond(context.Background(), jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.MethodNotFound,
		"switchboard: a %s client cannot receive %s during %s", ModernVersion, m.Method, c.method)))
}

// inputKey names an input request in inputRequests: the capability it
// needs (sampling, elicitation, roots), else "input".
func inputKey(method string) string {
	if c := upstream.CapabilityFor(method); c != "" {
		return c
	}
	return "input"
}

// inputRequired is the result that asks the client for p's input.
func inputRequired(p *parked, token string) json.RawMessage {
	reqs := map[string]any{}
	for _, r := range p.reqs {
		ir := map[string]any{"method": r.req.Method}
		if len(r.req.Params) > 0 {
			ir["params"] = r.req.Params
		}
		reqs[r.key] = ir
	}
	return jsonrpc.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": reqs,
		"requestState":  token,
	})
}

// finish ends the member once the response arrived.
func (c *call) finish() {
	c.mu.Lock()
	done := c.done
	c.done = true
	c.mu.Unlock()
	if !done {
		c.b.Leave()
	}
}

func (c *call) Abandon(cancel bool) {
	c.mu.Lock()
	done := c.done
	c.done = true
	c.mu.Unlock()
	if done {
		return // parked (the state owns the call) or finished
	}
	c.inner.Abandon(true) // a modern request's stream closed: cancelled
	c.b.Leave()
}

// resume serves the retry of a parked call.
func (t *ModernOverLegacy) resume(ctx context.Context, req *jsonrpc.Message) session.Call {
	token, ok := jsonrpc.StringMember(req.Params, "requestState")
	if !ok {
		return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "requestState must be a string"))
	}
	p, why := t.states.take(token, req.Method, nameOf(req), auth.FromContext(ctx).Name())
	if p == nil {
		return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid requestState: %s; send the request again without requestState and inputResponses", why))
	}
	// Answers go to the server as they come; the ones missing are asked
	// again (spec: SHOULD re-ask, not fail).
	var missing []pendingRequest
	var answers []*jsonrpc.Message
	for _, r := range p.reqs {
		resp := jsonrpc.Member(req.Params, "inputResponses", r.key)
		if resp == nil {
			missing = append(missing, r)
			continue
		}
		answers = append(answers, &jsonrpc.Message{ID: r.req.ID, Result: resp})
	}
	if len(missing) > 0 {
		for _, a := range answers {
			if err := p.b.Respond(ctx, a); err != nil {
				t.states.drop(p)
				return failure(req, jsonrpc.Errorf(jsonrpc.UpstreamUnavailable, "%s: %v", t.opts.Name, err))
			}
		}
		p.reqs = missing
		token, err := t.states.park(p)
		if err != nil {
			t.states.drop(p)
			return failure(req, jsonrpc.Errorf(jsonrpc.InternalError, "switchboard: %v", err))
		}
		return result(req, inputRequired(p, token))
	}
	// Unparked first: the server's next request, which may follow the
	// answers at once, belongs to this call.
	unpark(p.inner)
	for _, a := range answers {
		if err := p.b.Respond(ctx, a); err != nil {
			t.states.drop(p)
			return failure(req, jsonrpc.Errorf(jsonrpc.UpstreamUnavailable, "%s: %v", t.opts.Name, err))
		}
	}
	c := t.newCall(ctx, req, p.b, p.inner)
	return c
}
