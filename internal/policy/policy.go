// Package policy enforces what an authenticated caller may see and call,
// and how often, on the MCP messages themselves.
//
// Contracts:
//   - Access (access.go) is the one authorization decision: what a caller
//     may open, which servers it reaches through an endpoint (destinations
//     bound every endpoint; namespaces add views), whether its tool rules
//     admit a tool, and its rate limit. Every tool call on every path is
//     decided by Access.Decide: here for a destination's endpoints, by the
//     router for views and for each call a script makes (the caller's
//     Access travels in the context, NewContext/FromContext). An Authority
//     compiles the clients of one config generation.
//   - Wrap puts a Destination (a per-destination route or an aggregating
//     router, as the fronts see them) behind a client's Rules: lists are
//     filtered, and a call naming something filtered out gets the same
//     JSON-RPC error an unknown name gets, so a hidden tool cannot be
//     called by name (see Wrap).
//   - A session belongs to the caller that opened it: a request on it from
//     another caller is refused (JSON-RPC error), whatever its rules.
//   - Access is looked up per request (a reload applies to open sessions).
//     With authentication off nothing is wrapped; an anonymous caller costs
//     one context lookup per request.
//   - Limiter (limits.go) is a token bucket per key; DestinationLimiter
//     bounds one destination's requests, per tool and in flight.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Filter selects names with path.Match globs, matched against the exposed
// (prefixed) name: a name passes when Allow is empty or one Allow pattern
// matches, and no Deny pattern matches. The zero Filter passes everything.
type Filter struct {
	Allow, Deny []string
}

// Rate is a token bucket: Rate requests a second on average, bursts of up
// to Burst.
type Rate struct {
	Rate  float64
	Burst int
}

// Client is what one configured client may reach: its credentials
// (auth.ClientSpec) and its grants. Nil lists grant nothing.
type Client struct {
	auth.ClientSpec
	// Destinations are the destinations it may use ("*": all); they bound
	// what it reaches through views too, unless empty.
	Destinations []string
	// Namespaces are the views it may use ("mcp" the default view, "*"
	// all).
	Namespaces []string
	// Tools, Prompts and Resources filter what it sees and calls.
	Tools, Prompts, Resources Filter
	// ReadOnly allows only tools annotated readOnlyHint: true.
	ReadOnly bool
	// RateLimit bounds its requests; nil means none.
	RateLimit *Rate
}

// Rules are one client's filters.
type Rules struct {
	Tools, Prompts, Resources Filter
	ReadOnly                  bool
}

// RulesOf returns c's rules, or nil when it has none (everything passes).
func RulesOf(c *Client) *Rules {
	if c == nil {
		return nil
	}
	r := &Rules{Tools: c.Tools, Prompts: c.Prompts, Resources: c.Resources, ReadOnly: c.ReadOnly}
	if len(r.Tools.Allow)+len(r.Tools.Deny)+len(r.Prompts.Allow)+len(r.Prompts.Deny)+
		len(r.Resources.Allow)+len(r.Resources.Deny) == 0 && !r.ReadOnly {
		return nil
	}
	return r
}

// admits reports whether name passes f: no Allow or one matching, and no
// Deny matching.
func admits(f Filter, name string) bool {
	match := func(glob string) bool {
		m, _ := path.Match(glob, name)
		return m
	}
	return (len(f.Allow) == 0 || slices.ContainsFunc(f.Allow, match)) && !slices.ContainsFunc(f.Deny, match)
}

// Destination is what the fronts serve (streamable.Destination, which
// also satisfies sse.Destination).
type Destination interface {
	Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
	Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error)
}

// Owners records which caller opened each session, for the routes that
// reach a session without its backend (a GET listen stream, DELETE).
// The zero value is ready; it is shared by every wrapped destination.
type Owners struct{ m sync.Map } // session id -> caller name

// Of returns the caller that opened session id, if it is a session opened
// through a wrapped destination.
func (o *Owners) Of(id string) (string, bool) {
	v, ok := o.m.Load(id)
	name, _ := v.(string)
	return name, ok
}

// Options configure Wrap.
type Options struct {
	// Access returns the access of a request's caller under the current
	// config (required). It is asked once per request, so a reload
	// applies to open sessions.
	Access func(ctx context.Context) *Access
	// Endpoint is what the wrapped destination serves. On a view the
	// router below decides tools (it knows each tool's server): the
	// wrapper passes tools/list and tools/call on with the caller's
	// Access in the context (FromContext).
	Endpoint Endpoint
	// ChargeRequests takes a token of the caller's rate limit per request
	// (the stdio front, which has no HTTP layer to do it); a request over
	// the limit is answered with JSON-RPC error -32007.
	ChargeRequests bool
	Owners         *Owners // learns who opens each session; nil: nobody
	// IdentityMeta, when set, is the params._meta key every request going
	// on gets, holding the caller's name (removed for an anonymous one).
	IdentityMeta string
}

// Wrap returns d behind the rules of each request's caller: list results
// (tools, prompts, resources, resource templates) are filtered, and a call
// naming something filtered out (tools/call, prompts/get, resources/read
// and subscribe, completion/complete) is answered with the same JSON-RPC
// error an unknown name gets. Read-only rules show and allow only tools
// annotated readOnlyHint: true; a call to a tool not listed yet lists the
// tools first.
func Wrap(d Destination, opts Options) Destination {
	return &guarded{Options: opts, inner: d, stateless: &toolCache{}}
}

type guarded struct {
	Options
	inner     Destination
	stateless *toolCache // annotations seen on 2026-07-28 lists
}

// withIdentity returns req with params._meta[IdentityMeta] set to the caller's
// name (or removed when there is none); req itself when no key is
// configured or its params are not an object.
func (g *guarded) withIdentity(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
	if g.IdentityMeta == "" {
		return req
	}
	name := auth.FromContext(ctx).Name()
	params := map[string]json.RawMessage{}
	if len(req.Params) > 0 && json.Unmarshal(req.Params, &params) != nil {
		return req
	}
	meta := map[string]json.RawMessage{}
	if m, ok := params["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return req
	}
	if name == "" {
		if _, had := meta[g.IdentityMeta]; !had {
			return req
		}
		delete(meta, g.IdentityMeta)
	} else {
		meta[g.IdentityMeta] = jsonrpc.Marshal(name)
	}
	params["_meta"] = jsonrpc.Marshal(meta)
	out := *req
	out.Params = jsonrpc.Marshal(params)
	return &out
}

// admit resolves the caller's access for one request: nil and the
// context the inner destination gets, or the answer that refuses the
// request (the endpoint is not granted, or the rate limit is spent).
func (g *guarded) admit(ctx context.Context, req *jsonrpc.Message) (*Access, context.Context, session.Call) {
	acc := g.Access(ctx)
	if acc == nil {
		return nil, ctx, nil
	}
	if !acc.MayOpen(g.Endpoint) {
		return nil, nil, refuse(req, jsonrpc.InvalidRequest, fmt.Sprintf("client %s may not use %s", acc.Client(), g.Endpoint))
	}
	if g.ChargeRequests && req.IsRequest() {
		if ok, wait := acc.Take(time.Now()); !ok {
			return nil, nil, rateRefusal(req, "client "+acc.Client(), wait)
		}
	}
	return acc, NewContext(ctx, acc), nil
}

func (g *guarded) Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	acc := g.Access(ctx)
	if acc != nil && !acc.MayOpen(g.Endpoint) {
		return nil, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "client %s may not use %s", acc.Client(), g.Endpoint)
	}
	ctx = NewContext(ctx, acc)
	b, res, err := g.inner.Open(ctx, s, init)
	if err != nil {
		return nil, nil, err
	}
	owner := auth.FromContext(ctx).Name()
	bk := &backend{Backend: b, g: g, owner: owner, tools: &toolCache{}}
	if g.Owners != nil {
		bk.session = s.ID
		g.Owners.m.Store(s.ID, owner)
	}
	return bk, res, nil
}

func (g *guarded) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	acc, ctx, refused := g.admit(ctx, req)
	if refused != nil {
		return refused, nil
	}
	req = g.withIdentity(ctx, req)
	if acc == nil {
		return g.inner.Stateless(ctx, req)
	}
	send := func(ctx context.Context, m *jsonrpc.Message) (session.Call, error) { return g.inner.Stateless(ctx, m) }
	return g.apply(ctx, acc, req, g.stateless, send, jsonrpc.Member(req.Params, "_meta"))
}

// backend is a session's backend behind the rules.
type backend struct {
	session.Backend
	g       *guarded
	owner   string // the caller that opened the session
	session string // its id, registered in g.Owners ("" when not)
	tools   *toolCache
}

func (b *backend) Leave() {
	if b.session != "" {
		b.g.Owners.m.Delete(b.session)
	}
	b.Backend.Leave()
}

func (b *backend) check(ctx context.Context) error {
	if who := auth.FromContext(ctx).Name(); who != b.owner {
		return jsonrpc.Errorf(jsonrpc.InvalidRequest, "this session belongs to another client")
	}
	return nil
}

func (b *backend) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	acc, ctx, refused := b.g.admit(ctx, req)
	if refused != nil {
		return refused, nil
	}
	req = b.g.withIdentity(ctx, req)
	if acc == nil {
		return b.Backend.Call(ctx, req)
	}
	return b.g.apply(ctx, acc, req, b.tools, b.Backend.Call, nil)
}

func (b *backend) Notify(ctx context.Context, n *jsonrpc.Message) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	return b.Backend.Notify(ctx, n)
}

func (b *backend) Respond(ctx context.Context, m *jsonrpc.Message) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	return b.Backend.Respond(ctx, m)
}

type sendFunc func(context.Context, *jsonrpc.Message) (session.Call, error)

// apply enforces acc on one request: refuses a call to something filtered
// out, filters a list's answer, and sends the rest as they are. A tool
// call on a destination's endpoint is decided here (Access.Decide); on a
// view, by the router below.
func (g *guarded) apply(ctx context.Context, acc *Access, req *jsonrpc.Message, tools *toolCache, send sendFunc, meta json.RawMessage) (session.Call, error) {
	r := acc.Rules()
	switch req.Method {
	case "tools/list":
		if g.Endpoint.View || r == nil {
			return send(ctx, req)
		}
		fallthrough
	case "prompts/list", "resources/list", "resources/templates/list":
		if r == nil {
			return send(ctx, req)
		}
		c, err := send(ctx, req)
		if err != nil {
			return nil, err
		}
		return &filtered{Call: c, acc: acc, method: req.Method, tools: tools}, nil
	case "tools/call":
		if g.Endpoint.View {
			break
		}
		name := paramString(req, "name")
		ro := false
		if acc.ReadOnly() {
			known := false
			if ro, known = tools.readOnly(name); !known {
				if err := fetchTools(ctx, tools, send, meta); err != nil {
					return nil, err
				}
				ro, _ = tools.readOnly(name)
			}
		}
		if d := acc.Decide(ToolCall{Endpoint: g.Endpoint, Server: g.Endpoint.Name, Tool: name, ReadOnly: ro}); d != nil {
			return refuse(req, jsonrpc.InvalidParams, "Unknown tool: "+name), nil
		}
	case "prompts/get":
		if name := paramString(req, "name"); r != nil && !admits(r.Prompts, name) {
			return refuse(req, jsonrpc.InvalidParams, "Unknown prompt: "+name), nil
		}
	case "resources/read", "resources/subscribe":
		if uri := paramString(req, "uri"); r != nil && !admits(r.Resources, uri) {
			return refuse(req, -32002, "Resource not found: "+uri), nil
		}
	case "completion/complete":
		if r == nil {
			break
		}
		ref, _, _, _ := jsonrpc.Lookup(req.Params, "ref")
		var rf struct{ Type, Name, URI string }
		_ = json.Unmarshal(ref, &rf)
		if rf.Type == "ref/prompt" && !admits(r.Prompts, rf.Name) || rf.Type == "ref/resource" && !admits(r.Resources, rf.URI) {
			return refuse(req, jsonrpc.InvalidParams, "Unknown reference"), nil
		}
	}
	return send(ctx, req)
}

func paramString(req *jsonrpc.Message, key string) string {
	s, _ := jsonrpc.StringMember(req.Params, key)
	return s
}

// refuse answers req with a JSON-RPC error of its own.
func refuse(req *jsonrpc.Message, code int, msg string) session.Call {
	return session.NewAnswer(jsonrpc.NewError(req.ID, &jsonrpc.Error{Code: code, Message: msg}))
}

// toolCache remembers which tools are annotated readOnlyHint: true.
type toolCache struct {
	mu sync.Mutex
	ro map[string]bool
}

func (t *toolCache) readOnly(name string) (ro, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ro, known = t.ro[name]
	return ro, known
}

func (t *toolCache) note(name string, ro bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ro == nil {
		t.ro = map[string]bool{}
	}
	t.ro[name] = ro
}

// fetchTools lists every tool (all pages) to learn their annotations.
func fetchTools(ctx context.Context, tools *toolCache, send sendFunc, meta json.RawMessage) error {
	return session.ListPages(ctx, send, "tools/list", "switchboard-policy-", meta, func(_ int, res json.RawMessage) error {
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return jsonrpc.Errorf(jsonrpc.InternalError, "tools/list: %v", err)
		}
		for _, t := range page.Tools {
			name, ro := toolInfo(t)
			tools.note(name, ro)
		}
		return nil
	})
}

func toolInfo(raw json.RawMessage) (name string, readOnly bool) {
	var t struct {
		Name        string `json:"name"`
		Annotations struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	}
	_ = json.Unmarshal(raw, &t)
	return t.Name, t.Annotations.ReadOnlyHint
}

// filtered is a list call whose response is filtered.
type filtered struct {
	session.Call
	acc    *Access // its Rules are not nil
	method string
	tools  *toolCache
}

func (c *filtered) Poll() (*jsonrpc.Message, bool) {
	m, ended := c.Call.Poll()
	if m != nil && m.IsResponse() && len(m.Result) > 0 {
		out := *m
		out.Result = c.filter(m.Result)
		return &out, ended
	}
	return m, ended
}

// UpstreamTime passes on the wrapped call's upstream time.
func (c *filtered) UpstreamTime() time.Duration { return session.UpstreamTime(c.Call) }

func (c *filtered) filter(result json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(result, &obj) != nil {
		return result
	}
	var key, field string
	var f Filter
	r := c.acc.Rules()
	switch c.method {
	case "tools/list":
		key, field = "tools", "name"
	case "prompts/list":
		key, field, f = "prompts", "name", r.Prompts
	case "resources/list":
		key, field, f = "resources", "uri", r.Resources
	case "resources/templates/list":
		key, field, f = "resourceTemplates", "uriTemplate", r.Resources
	}
	var items []json.RawMessage
	if json.Unmarshal(obj[key], &items) != nil {
		return result
	}
	kept := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		var named map[string]json.RawMessage
		if json.Unmarshal(it, &named) != nil {
			continue
		}
		var name string
		_ = json.Unmarshal(named[field], &name)
		if c.method == "tools/list" {
			n, ro := toolInfo(it)
			c.tools.note(n, ro)
			if !c.acc.Admits(n, ro) {
				continue
			}
		} else if !admits(f, name) {
			continue
		}
		kept = append(kept, it)
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return result
	}
	obj[key] = b
	out, err := json.Marshal(obj)
	if err != nil {
		return result
	}
	return out
}
