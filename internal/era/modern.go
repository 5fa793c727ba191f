package era

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Joiner reaches a legacy server for ModernOverLegacy: members of
// connections initialized with a request's client capabilities.
type Joiner interface {
	// Join attaches a member with a downstream of its own (a
	// subscriptions/listen stream, or none for server/discover) and
	// returns its backend and the InitializeResult response; Leave
	// detaches it.
	Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
	// Lend returns a member of the connection initialized with exactly
	// the client capabilities caps (and, when it starts that connection,
	// the client info info) for one request: the member is that request's
	// alone until Leave gives it back, and may then serve later requests,
	// never two at once. A server→client request on a shared connection
	// goes to the one member with a call in flight (and is refused when
	// several have), so it reaches exactly the call that raised it.
	// Members marked parked (SetParked) wait for a client's retry: the
	// Joiner may end them to make room (DropParked).
	Lend(ctx context.Context, caps, info json.RawMessage) (session.Backend, error)
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
	// States mints the requestState tokens of parked calls. Nil: random
	// tokens, which only this process knows (a single replica). A
	// cluster's are sealed and name this replica, so that a retry landing
	// on another replica is forwarded here.
	States StateMinter
}

// StateMinter mints a parked call's requestState (*replica.Replica in a
// cluster). The token is the parked call's key here: it must be unique.
type StateMinter interface {
	// MintState returns a token, prefixed with "sb1.", for a call of
	// method and name by caller ("" without auth), parked for ttl.
	MintState(method, name, caller string, ttl time.Duration) (string, error)
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

// ModernOverLegacy serves 2026-07-28 requests over a legacy
// (initialize-handshake) server. It implements StatelessServer.
//
// server/discover is answered from the server's cached InitializeResult;
// each request borrows a member of the connection initialized with its
// _meta clientCapabilities (Joiner.Lend), so the server may ask only what
// the client declared, and a member serves one request at a time, so a
// server→client request reaches exactly the call that raised it. A
// server→client request (sampling, elicitation, roots) raised during
// tools/call, prompts/get or resources/read becomes an MRTR input_required
// result whose requestState names the upstream call, held open (parked)
// until the client retries with inputResponses or the state expires;
// subscriptions/listen becomes a member that subscribes to the resources
// asked for and passes list_changed and resources/updated on, tagged with
// the subscription id.
type ModernOverLegacy struct {
	join   Joiner
	opts   Options
	states *states
}

// NewModernOverLegacy returns a translator in front of the legacy server join reaches.
func NewModernOverLegacy(join Joiner, opts Options) *ModernOverLegacy {
	opts.defaults()
	st := newStates(opts.MaxParked, opts.StateTTL)
	st.mint = opts.States
	return &ModernOverLegacy{join: join, opts: opts, states: st}
}

// Close cancels every parked call.
func (t *ModernOverLegacy) Close() { t.states.close() }

// Parked returns the number of parked MRTR states (for tests and status).
func (t *ModernOverLegacy) Parked() int { return t.states.len() }

// Stateless serves one 2026-07-28 request.
func (t *ModernOverLegacy) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if !req.IsRequest() {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "not a request")
	}
	r := readModern(req)
	if e := r.check(); e != nil {
		return failure(req, e), nil
	}
	switch {
	case req.Method == "server/discover":
		return t.discover(ctx, req), nil
	case req.Method == "subscriptions/listen":
		return t.listen(ctx, req), nil
	case mcp.Removed(req.Method):
		return failure(req, jsonrpc.Errorf(jsonrpc.MethodNotFound, "method not found: %s (removed in protocol %s)", req.Method, mcp.ModernVersion)), nil
	}
	if mcp.InputMethod(req.Method) {
		if token, ok := r.stateToken(); ok {
			return t.resume(ctx, req, &r, token), nil
		}
	}
	// A member lent for this request alone: the server's requests during
	// it are this call's.
	b, err := t.join.Lend(ctx, r.caps, r.info)
	if err != nil {
		return nil, err
	}
	c := t.newCall(ctx, req, &r, b)
	if c.inner, err = b.Call(ctx, r.legacy(req, &c.out)); err != nil {
		b.Leave()
		return nil, err
	}
	c.out = jsonrpc.Message{} // sent: the upstream call keeps what it needs
	return c, nil
}

// initFor builds the initialize request of a modern request's member.
func initFor(req *jsonrpc.Message) *jsonrpc.Message {
	caps, _, _, _ := req.LookupMeta(mcp.MetaClientCapabilities)
	info, _, _, _ := req.LookupMeta(mcp.MetaClientInfo)
	return InitRequest(caps, info)
}

// InitRequest is the legacy initialize request a translated 2026-07-28
// client's connection or member is opened with: its declared capabilities
// and client info (a default one when info is empty).
func InitRequest(caps, info json.RawMessage) *jsonrpc.Message {
	if len(info) == 0 {
		info = json.RawMessage(`{"name":"2026-07-28 client","version":"0"}`)
	}
	params := make([]byte, 0, 96+len(caps)+len(info))
	params = append(params, `{"protocolVersion":"`+mcp.LatestLegacyVersion+`","capabilities":`...)
	params = append(params, caps...)
	params = append(params, `,"clientInfo":`...)
	params = append(params, info...)
	params = append(params, '}')
	return jsonrpc.NewRequest(json.RawMessage(`0`), "initialize", params)
}

// discard is the downstream of a transient member: nothing outlives its
// one call.
type discard struct{}

func (discard) Deliver(*jsonrpc.Message) {}
func (discard) End(error)                {}
func (discard) CallBound()               {} // a server→client request without a call is refused

// discover answers server/discover from the server's InitializeResult.
func (t *ModernOverLegacy) discover(ctx context.Context, req *jsonrpc.Message) session.Call {
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	b, res, err := t.join.Join(ctx, discard{}, initFor(req))
	if err != nil {
		return failure(req, mcp.RPCError(fmt.Errorf("%s: %w", t.opts.Name, err)))
	}
	b.Leave()
	return result(req, DiscoverFromInit(res.Result))
}

// DiscoverFromInit builds a DiscoverResult from a legacy InitializeResult.
// Legacy versions stay listed: Switchboard serves them through initialize.
func DiscoverFromInit(init json.RawMessage) json.RawMessage {
	versions := mcp.SupportedVersions()
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
		out["_meta"] = map[string]json.RawMessage{mcp.MetaServerInfo: info}
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
	params   []byte // the client's; read only while the front polls (for the binding)
	caller   string // the authenticated caller ("" without auth): part of the binding
	clientID json.RawMessage
	wantLog  bool
	b        session.Backend
	inner    session.Call
	held     []*jsonrpc.Message // notifications from before a park, returned first (a resumed call's)
	out      jsonrpc.Message    // the request as the legacy server gets it, while it is sent

	mu   sync.Mutex
	done bool // the final message was returned (or the call abandoned)
}

func (t *ModernOverLegacy) newCall(ctx context.Context, req *jsonrpc.Message, r *modernRequest, b session.Backend) *call {
	return &call{t: t, method: req.Method, params: req.Params, caller: auth.FromContext(ctx).Name(),
		clientID: req.ID, wantLog: r.wantLog, b: b}
}

func (c *call) Ready() <-chan struct{} { return c.inner.Ready() }
func (c *call) LongLived() bool        { return false }

// UpstreamTime is the server's share, when the inner call knows it.
func (c *call) UpstreamTime() time.Duration { return session.UpstreamTime(c.inner) }

func (c *call) Poll() (*jsonrpc.Message, bool) {
	for {
		var m *jsonrpc.Message
		var ended bool
		if len(c.held) > 0 {
			m, c.held = c.held[0], c.held[1:]
		} else {
			m, ended = c.inner.Poll()
		}
		if m == nil {
			return nil, ended
		}
		switch {
		case m.IsResponse():
			c.finish()
			if !bytes.Equal(m.ID, c.clientID) {
				m.ID = c.clientID // the message is this call's alone
			}
			if m.Result != nil {
				amendResponse(m, c.method)
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

// amendResponse adds what a 2026-07-28 result must carry to a response,
// reading its result once and rewriting it in place: a detached response
// (the upstream's) stays ready to write, in one copy. A legacy server that
// returns MRTR fields itself (a dual-era SDK shim's later rounds) gets its
// result marked input_required.
func amendResponse(m *jsonrpc.Message, method string) {
	add := resultAddition(m.Result, method)
	if add == nil {
		return
	}
	res := m.Result
	i := skipWS(res, 0)
	if i >= len(res) || res[i] != '{' {
		m.Result = prependMembers(res, add) // not an object: replaced
		return
	}
	if j := skipWS(res, i+1); j < len(res) && res[j] != '}' {
		if bytes.Equal(add, resultComplete) {
			add = resultCompleteComma
		} else {
			add = append(add[:len(add):len(add)], ',')
		}
	}
	m.SpliceResult(i+1, i+1, add)
}

// resultAddition returns the members (`"k":v,…`) amendResult adds to res,
// nil for none.
func resultAddition(res []byte, method string) []byte {
	var typ, inputs, ttl, scope bool
	if !mcp.Cacheable(method) && !bytes.Contains(res, []byte(`\u`)) &&
		!bytes.Contains(res, []byte(`Type"`)) && !bytes.Contains(res, []byte(`Requests"`)) {
		// Neither member can be there (as in mayHave; the tails of their
		// keys start with capitals, rare in JSON, so each search stops
		// rarely): the common case, decided without walking the result.
		return resultComplete
	}
	jsonrpc.EachMember(res, func(k, _ []byte) {
		switch string(k) {
		case "resultType":
			typ = true
		case "inputRequests":
			inputs = true
		case "ttlMs":
			ttl = true
		case "cacheScope":
			scope = true
		}
	})
	switch {
	case mcp.InputMethod(method) && inputs:
		if typ {
			return nil
		}
		return resultInputRequired
	case mcp.Cacheable(method):
		var add []byte
		for _, m := range [...]struct {
			has    bool
			member string
		}{{typ, `"resultType":"complete"`}, {ttl, `"ttlMs":0`}, {scope, `"cacheScope":"private"`}} {
			if m.has {
				continue
			}
			if len(add) > 0 {
				add = append(add, ',')
			}
			add = append(add, m.member...)
		}
		return add
	case typ:
		return nil
	}
	return resultComplete // the common case: one copy, nothing else
}

var (
	resultComplete      = []byte(`"resultType":"complete"`)
	resultCompleteComma = []byte(`"resultType":"complete",`)
	resultInputRequired = []byte(`"resultType":"input_required"`)
)

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
	if !mcp.InputMethod(c.method) || upstream.CapabilityFor(m.Method) == "" {
		c.refuse(m)
		return nil
	}
	p := &parked{method: c.method, name: nameOf(c.method, c.params), caller: c.caller, b: c.b, inner: c.inner}
	c.params = nil // the binding is made: nothing of the request is read later
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
		case !more.IsResponse():
			// A related notification meanwhile (progress, a log line):
			// kept for the retry's answer, which comes first there.
			p.held = append(p.held, more)
		default:
			// The server answered after all (it gave up waiting):
			// nothing to park. Poll returns what was held, then the
			// response.
			c.refuseAll(p, "the call ended")
			c.held = append(p.held, more)
			return nil
		}
	}
	token, err := c.t.states.park(p)
	if err != nil {
		// Too many parked: refuse the server's requests; the call goes on.
		c.refuseAll(p, err.Error())
		return nil
	}
	c.markDone()
	return jsonrpc.NewResult(c.clientID, inputRequired(p, token))
}

// refuseAll answers every server→client request p gathered with an error.
func (c *call) refuseAll(p *parked, why string) {
	for _, r := range p.reqs {
		_ = c.b.Respond(context.Background(), jsonrpc.NewError(r.req.ID, jsonrpc.Errorf(mcp.CodeRequestRefused, "switchboard: %s", why)))
	}
}

// refuse answers a server→client request the modern client cannot get.
func (c *call) refuse(m *jsonrpc.Message) {
	_ = c.b.Respond(context.Background(), jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.MethodNotFound,
		"switchboard: a %s client cannot receive %s during %s", mcp.ModernVersion, m.Method, c.method)))
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
		// params always: a server may send roots/list without them, but
		// a client may decode an input request's params unconditionally
		// (the go-sdk fails the whole result on a missing one).
		ir := map[string]any{"method": r.req.Method, "params": json.RawMessage(`{}`)}
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

func (c *call) markDone() (was bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was, c.done = c.done, true
	return was
}

// finish ends the member once the response arrived.
func (c *call) finish() {
	if !c.markDone() {
		c.b.Leave()
	}
}

func (c *call) Abandon(cancel bool) {
	if c.markDone() {
		return // parked (the state owns the call) or finished
	}
	c.inner.Abandon(true) // a modern request's stream closed: cancelled
	c.b.Leave()
}

// resume serves the retry of a parked call.
func (t *ModernOverLegacy) resume(ctx context.Context, req *jsonrpc.Message, r *modernRequest, token string) session.Call {
	p, why := t.states.take(token, req.Method, nameOf(req.Method, req.Params), auth.FromContext(ctx).Name())
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
	if len(missing) == 0 {
		// Unparked first: the server's next request, which may follow the
		// answers at once, belongs to this call.
		setParked(p.inner, false)
	}
	for _, a := range answers {
		if err := p.b.Respond(ctx, a); err != nil {
			t.states.drop(p)
			return failure(req, mcp.RPCError(fmt.Errorf("%s: %w", t.opts.Name, err)))
		}
	}
	if len(missing) > 0 {
		p.reqs = missing
		token, err := t.states.park(p)
		if err != nil {
			t.states.drop(p)
			return failure(req, jsonrpc.Errorf(jsonrpc.InternalError, "switchboard: %v", err))
		}
		return result(req, inputRequired(p, token))
	}
	c := t.newCall(ctx, req, r, p.b)
	c.inner, c.held = p.inner, p.held
	return c
}

// DropParked ends the parked calls whose member match picks (a Joiner
// retiring their connection): their upstream calls are cancelled and a
// retry with their requestState gets the error of an expired one. It
// returns how many it ended.
func (t *ModernOverLegacy) DropParked(match func(session.Backend) bool) int {
	return t.states.dropWhere(func(p *parked) bool { return match(p.b) })
}
