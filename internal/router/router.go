// Package router aggregates several MCP servers into one: the merged
// endpoints of Switchboard (/mcp, /mcp/{namespace}, /sse, …) and its stdio
// mode serve a Router.
//
// A Router serves one View (a namespace, a group, or the default view). For
// each client session it joins every server of the view concurrently and
// answers initialize itself, with the union of their capabilities. The
// session's backend (an aggregate) holds one member per server:
//
//	client ─▶ front ─▶ aggregate ─┬─ member ─▶ Server.Join backend ─▶ upstream
//	                              ├─ member ─▶ …
//	                              └─ member ─▶ …
//
// Lists (tools, prompts, resources, resource templates) are fanned out to
// every member, merged, renamed ({server}__{name} under the view's
// tool_prefix policy), filtered and paged with the router's own cursors;
// calls are routed by exposed name or URI. Server→client requests get
// router-unique ids so the client's response finds its member; list_changed
// from any member re-lists it and is passed on to the client.
//
// A view may shape its tools (shape.go) and add meta-tools (meta.go: search,
// inspect, and code mode's execute, whose scripts' calls take the same
// routes as a client's). Update replaces the view under live sessions, for
// a reload: each joins the servers it lacks, leaves those gone, and its
// client is told what changed (update.go).
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Server is one upstream MCP server that a view merges. The gateway's
// destinations satisfy it (and so does a *Router).
type Server interface {
	Name() string
	// Join attaches a downstream and returns its backend and the server's
	// InitializeResult (a response to init).
	Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
}

// StatelessServer is a Server that also serves 2026-07-28 requests.
type StatelessServer interface {
	Server
	Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error)
}

// Options configure a Router.
type Options struct {
	// Version is Switchboard's version, sent as serverInfo.version.
	Version string
	// PageSize is the number of items per page of a merged list. Zero
	// means DefaultPageSize.
	PageSize int
	// Timeout bounds joining the servers and the router's own upstream
	// calls (list fan-outs, setLevel). Zero means 30 s.
	Timeout time.Duration
	Logger  *slog.Logger // nil discards
	// Audit receives one record per tool call a code-mode script makes
	// (nil: none). The gateway writes them to the audit log.
	Audit func(*audit.Record)
}

// Router serves one view. It implements streamable.Destination and
// sse.Destination.
type Router struct {
	opts Options
	log  *slog.Logger

	view      atomic.Pointer[View]    // stored under mu
	stateless atomic.Pointer[catalog] // the 2026-07-28 catalog; nil when no server is stateless; stored under mu
	noted     sync.Map                // shortened names already logged

	updating sync.Mutex // serialises Update and Close

	sbMu     sync.Mutex
	sb       *sandbox.Runner // code mode's runner, for sbLimits
	sbLimits sandbox.Limits

	mu       sync.Mutex
	sessions map[*aggregate]struct{}  // live sessions (joined, not yet left)
	listens  map[*listenCall]struct{} // open 2026-07-28 subscriptions/listen streams
	closed   bool
}

// New returns a Router for view.
func New(view *View, opts Options) *Router {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.Version == "" {
		opts.Version = "(devel)"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if view == nil {
		view = &View{}
	}
	r := &Router{opts: opts, log: log, sessions: map[*aggregate]struct{}{}, listens: map[*listenCall]struct{}{}}
	r.view.Store(view)
	r.stateless.Store(r.newStatelessCatalog(view))
	return r
}

// Name returns the view's name ("" for the default view).
func (r *Router) Name() string { return r.view.Load().Name }

// View returns the view served (the last one given to Update).
func (r *Router) View() *View { return r.view.Load() }

func (r *Router) viewLabel() string {
	if n := r.Name(); n != "" {
		return "view " + n
	}
	return "the default view"
}

func (r *Router) noteShortened(server, name, exposed string) {
	key := server + "\x00" + name
	if _, loaded := r.noted.LoadOrStore(key, true); !loaded {
		r.log.Info("exposed name shortened or sanitised to fit ^[a-zA-Z0-9_-]{1,64}$",
			"view", r.Name(), "server", server, "name", name, "exposed", exposed)
	}
}

// Open attaches a client session (streamable.Destination, sse.Destination).
func (r *Router) Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return r.Join(ctx, s, init)
}

// errViewClosed is why sessions end, and joins fail, once Close was called.
var errViewClosed = fmt.Errorf("%w: the view was removed", upstream.ErrClosed)

// Join attaches a downstream: it joins every server of the view at once
// with the client's initialize and answers it. A server that fails is left
// out (and logged); calls to its tools fail at once naming it. Join fails
// only when every server failed.
//
// The session then follows the router's view: Update joins and leaves its
// servers. A view replaced while Join runs is caught up with before Join
// returns.
func (r *Router) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	a := &aggregate{r: r, down: down, init: init, reverse: map[int64]reverseEntry{}}
	a.cat = &catalog{r: r, other: a.deliverFrom}
	v := r.view.Load()
	ms := a.join(ctx, v.Servers)
	a.cat.mu.Lock()
	a.cat.members, a.cat.view = ms, v
	a.cat.mu.Unlock()
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			a.Leave()
			return nil, nil, errViewClosed
		}
		if cur := r.view.Load(); cur != v {
			// Update ran while the servers were joined: catch up (the
			// client has seen nothing yet, so it is told nothing).
			r.mu.Unlock()
			a.update(ctx, cur, false)
			v = cur
			continue
		}
		r.sessions[a] = struct{}{}
		r.mu.Unlock()
		break
	}
	a.cat.mu.Lock()
	members := a.cat.members
	alive, failed := serving(members)
	a.cat.mu.Unlock()
	if len(members) > 0 && alive == 0 {
		a.Leave()
		return nil, nil, jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "every server of %s is unavailable: %s", r.viewLabel(), strings.Join(failed, "; "))
	}
	return a, jsonrpc.NewResult(init.ID, r.initializeResult(init, members)), nil
}

// join joins servers concurrently with the client's initialize (within
// the router's Timeout). The members returned, parallel to servers, are
// not installed in the catalog yet; those that failed carry their error
// (logged) and no backend.
func (a *aggregate) join(ctx context.Context, servers []Server) []*member {
	r := a.r
	ms := make([]*member, len(servers))
	jctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, s := range servers {
		m := &member{name: s.Name(), srv: s, cat: a.cat, fwd: map[string]int64{}}
		ms[i] = m
		wg.Go(func() {
			b, res, err := s.Join(jctx, &memberDown{a: a, m: m}, a.init)
			if err == nil && (res == nil || b == nil) {
				err = fmt.Errorf("no InitializeResult")
			}
			if err == nil {
				if e := res.ErrorOf(); e != nil {
					err = e
					b.Leave()
				}
			}
			a.cat.mu.Lock()
			defer a.cat.mu.Unlock()
			if err != nil {
				if m.err == nil {
					m.err = err
				}
				return
			}
			if m.err != nil { // ended while joining
				go b.Leave()
				return
			}
			m.backend = b
			m.caps = jsonrpc.Member(res.Result, "capabilities")
			if m.caps == nil {
				m.caps = json.RawMessage("{}")
			}
			if s, ok := jsonrpc.StringMember(res.Result, "instructions"); ok {
				m.instr = strings.TrimSpace(s)
			}
			m.call = b.Call
		})
	}
	wg.Wait()
	for _, m := range ms {
		if err := m.failed(); err != nil {
			r.log.Warn("server unavailable; the session goes on without it", "view", r.Name(), "server", m.name, "err", err)
		}
	}
	return ms
}

// mergeCapabilities is the union of server capabilities the router can
// route. With listChanged, list capabilities announce it (sessions: the
// router passes every member's list_changed on).
func mergeCapabilities(caps []json.RawMessage, listChanged bool) map[string]any {
	out := map[string]any{}
	subscribe := false
	for _, c := range caps {
		for _, name := range []string{"tools", "prompts", "resources", "logging", "completions"} {
			switch {
			case jsonrpc.Member(c, name) == nil:
			case name == "logging" || name == "completions":
				out[name] = map[string]any{}
			default:
				out[name] = map[string]any{"listChanged": listChanged}
			}
		}
		subscribe = subscribe || string(jsonrpc.Member(c, "resources", "subscribe")) == "true"
	}
	if subscribe {
		out["resources"] = map[string]any{"listChanged": listChanged, "subscribe": true}
	}
	return out
}

// initializeResult answers init from the members that joined.
func (r *Router) initializeResult(init *jsonrpc.Message, members []*member) json.RawMessage {
	requested, _ := jsonrpc.StringMember(init.Params, "protocolVersion")
	var caps []json.RawMessage
	var instr []string
	for _, m := range members {
		if m.failed() != nil {
			continue
		}
		caps = append(caps, m.caps)
		if m.instr != "" {
			instr = append(instr, fmt.Sprintf("## %s\n%s", m.name, m.instr))
		}
	}
	out := map[string]any{
		"protocolVersion": mcp.NegotiateLegacy(requested),
		"capabilities":    mergeCapabilities(caps, true),
		"serverInfo":      r.serverInfo(),
	}
	if len(instr) > 0 {
		out["instructions"] = strings.Join(instr, "\n\n")
	}
	return jsonrpc.Marshal(out)
}

func (r *Router) serverInfo() map[string]string {
	info := map[string]string{"name": "switchboard", "version": r.opts.Version}
	if n := r.Name(); n != "" {
		info["title"] = "Switchboard: " + n
	}
	return info
}

// reverseEntry is a server→client request waiting for the client's answer.
type reverseEntry struct {
	m  *member
	id json.RawMessage // the member's id for it
}

// aggregate is the session.Backend of one client session of a Router.
type aggregate struct {
	r    *Router
	down upstream.Downstream
	init *jsonrpc.Message // the client's initialize: every server is joined with it
	cat  *catalog         // its members follow the view (Update)

	updating sync.Mutex // serialises update

	mu      sync.Mutex
	nextRev int64
	reverse map[int64]reverseEntry // router id → member request
	left    bool
}

// memberDown is a member's Downstream: what its server sends outside any
// call of the router's.
type memberDown struct {
	a *aggregate
	m *member
}

// ClientSession returns the client session behind the member (nil when
// there is none): a server that starts a process for the member binds it
// to the session (session.Session.OwnChild).
func (d *memberDown) ClientSession() *session.Session {
	if s, ok := d.a.down.(interface{ ClientSession() *session.Session }); ok {
		return s.ClientSession()
	}
	return nil
}

func (d *memberDown) Deliver(msg *jsonrpc.Message) {
	a, m := d.a, d.m
	switch msg.Method {
	case "notifications/tools/list_changed":
		a.changed(m, msg.Method, kTools)
	case "notifications/prompts/list_changed":
		a.changed(m, msg.Method, kPrompts)
	case "notifications/resources/list_changed":
		a.changed(m, msg.Method, kResources, kTemplates)
	default:
		a.down.Deliver(a.fromMember(m, msg))
	}
}

// End marks the member unavailable; the session ends only when no member
// is left.
func (d *memberDown) End(err error) {
	a, m := d.a, d.m
	a.cat.mu.Lock()
	if m.err != nil {
		a.cat.mu.Unlock()
		return
	}
	m.err = err
	if err == nil {
		m.err = fmt.Errorf("ended")
	}
	if !slices.Contains(a.cat.members, m) {
		// Still joining (the join leaves it out), or already left by
		// Update: nothing the client sees changes.
		a.cat.mu.Unlock()
		return
	}
	had := m.have
	for k := range nKinds {
		m.lists[k], m.have[k] = nil, false
		m.gen[k]++
		a.cat.merged[k] = nil
		a.cat.listGen[k]++
	}
	alive, _ := serving(a.cat.members)
	a.cat.mu.Unlock()
	logf := a.r.log.Warn
	if errors.Is(err, upstream.ErrClosed) {
		logf = a.r.log.Debug // shutdown, or the session's own process released
	}
	logf("server left the session", "view", a.r.Name(), "server", m.name, "err", err)
	if alive == 0 {
		a.down.End(err)
		return
	}
	// Its tools, prompts and resources are gone from the merged lists.
	for _, k := range []kind{kTools, kPrompts, kResources} {
		if had[k] || (k == kResources && had[kTemplates]) {
			a.down.Deliver(jsonrpc.NewNotification(kinds[k].changed, nil))
		}
	}
}

// changed handles a member's list_changed: its cached lists are dropped and
// listed again, then the client is told. A member not (or no longer) in
// the session is ignored: Update tells the client when it is installed.
func (a *aggregate) changed(m *member, method string, ks ...kind) {
	if !a.cat.installed(m) {
		return
	}
	for _, k := range ks {
		a.cat.invalidate(m, k)
	}
	a.mu.Lock()
	left := a.left
	a.mu.Unlock()
	if left {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), a.r.opts.Timeout)
		defer cancel()
		for _, k := range ks {
			a.cat.list(ctx, k, nil, false)
		}
		a.down.Deliver(jsonrpc.NewNotification(method, nil))
	}()
}

// deliverFrom passes a message of an internal call (a list fan-out) to the
// client's listen stream.
func (a *aggregate) deliverFrom(m *member, msg *jsonrpc.Message) {
	a.down.Deliver(a.fromMember(m, msg))
}

// fromMember rewrites what a member sends to the client: a server→client
// request gets a router-unique id; the server cancelling one of them names
// that id.
func (a *aggregate) fromMember(m *member, msg *jsonrpc.Message) *jsonrpc.Message {
	switch {
	case msg.IsRequest():
		a.mu.Lock()
		a.nextRev++
		n := a.nextRev
		a.reverse[n] = reverseEntry{m: m, id: msg.ID}
		m.fwd[string(msg.ID)] = n
		a.mu.Unlock()
		out := *msg
		out.ID = jsonrpc.IntID(n)
		return &out
	case msg.Method == "notifications/cancelled":
		rid, s, e, ok := jsonrpc.Lookup(msg.Params, "requestId")
		if !ok {
			return msg
		}
		a.mu.Lock()
		n, found := m.fwd[string(rid)]
		if found {
			delete(m.fwd, string(rid))
			delete(a.reverse, n)
		}
		a.mu.Unlock()
		if !found {
			return msg
		}
		return &jsonrpc.Message{Method: msg.Method, Params: jsonrpc.Splice(msg.Params, s, e, jsonrpc.IntID(n))}
	}
	return msg
}

// Call answers or routes one client request.
func (a *aggregate) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	ctx, cancel := context.WithTimeout(ctx, a.r.opts.Timeout)
	defer cancel()
	meta := listMeta(req.Params)
	if k, ok := kindOf(req.Method); ok {
		return a.r.listAnswer(ctx, a.cat, req, k, meta, false, nil), nil
	}
	switch req.Method {
	case "ping":
		return result(req, nil), nil
	case "initialize":
		return failure(req, jsonrpc.Errorf(jsonrpc.InvalidRequest, "session is already initialized")), nil
	case "logging/setLevel":
		return a.setLevel(ctx, req)
	case "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe", "completion/complete":
		return a.r.routeCall(ctx, a.cat, req, meta, a.forward, a.fromMember)
	}
	return failure(req, jsonrpc.Errorf(jsonrpc.MethodNotFound, "method not found: %s (not served by aggregated endpoints)", req.Method)), nil
}

// forward sends req to member m and returns its call with server→client
// request ids rewritten. The call is failed at once if Update removes m
// while it is in flight.
func (a *aggregate) forward(ctx context.Context, m *member, req *jsonrpc.Message) (session.Call, error) {
	c, err := m.invoke(ctx, req)
	if errors.Is(err, upstream.ErrDuplicateID) {
		return nil, err
	}
	if err != nil {
		return failure(req, unavailable(m.name, err)), nil
	}
	rc := &routedCall{Call: c, m: m, id: req.ID, rewrite: func(msg *jsonrpc.Message) *jsonrpc.Message { return a.fromMember(m, msg) }}
	m.cat.track(rc)
	return rc, nil
}

// setLevel fans logging/setLevel out to every member that logs.
func (a *aggregate) setLevel(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	level, _ := jsonrpc.StringMember(req.Params, "level")
	if !slices.Contains([]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}, level) {
		return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid log level %q", level)), nil
	}
	a.cat.fanOut(ctx, a.cat.live("logging"), req)
	return result(req, nil), nil
}

// Notify passes client notifications to every member (each upstream maps
// cancellations to its own requests and ignores the others).
func (a *aggregate) Notify(ctx context.Context, n *jsonrpc.Message) error {
	if n.Method == "notifications/initialized" {
		return nil
	}
	for _, m := range a.cat.live("") {
		if m.backend == nil {
			continue
		}
		if err := m.backend.Notify(ctx, n); err != nil {
			a.r.log.Debug("notification not forwarded", "server", m.name, "method", n.Method, "err", err)
		}
	}
	return nil
}

// serving counts the members that serve and lists the others, each as
// "name: why". The catalog's mu held.
func serving(ms []*member) (alive int, failed []string) {
	for _, m := range ms {
		if m.err == nil {
			alive++
		} else {
			failed = append(failed, fmt.Sprintf("%s: %s", m.name, errString(m.err)))
		}
	}
	return alive, failed
}

// failed returns why the member is unavailable (nil when it serves).
func (m *member) failed() error {
	m.cat.mu.Lock()
	defer m.cat.mu.Unlock()
	return m.err
}

// Respond routes the client's response to a server→client request back to
// the member that asked, under the member's own id.
func (a *aggregate) Respond(ctx context.Context, resp *jsonrpc.Message) error {
	n, ok := jsonrpc.ParseIntID(resp.ID)
	a.mu.Lock()
	e, found := a.reverse[n]
	if ok && found {
		delete(a.reverse, n)
		delete(e.m.fwd, string(e.id))
	}
	a.mu.Unlock()
	if !ok || !found {
		a.r.log.Debug("response to an unknown server request dropped", "view", a.r.Name(), "id", string(resp.ID))
		return nil
	}
	a.cat.mu.Lock()
	b := e.m.backend // a request may come while the member still joins
	a.cat.mu.Unlock()
	if b == nil {
		return nil
	}
	out := *resp
	out.ID = e.id
	return b.Respond(ctx, &out)
}

// Leave detaches every member; the session no longer follows the view.
func (a *aggregate) Leave() {
	a.mu.Lock()
	if a.left {
		a.mu.Unlock()
		return
	}
	a.left = true
	a.mu.Unlock()
	a.r.mu.Lock()
	delete(a.r.sessions, a)
	a.r.mu.Unlock()
	// An update installing members after this snapshot sees left and
	// leaves them itself.
	leaveAll(a.cat.snapshot())
}

// listMeta returns the client's _meta without its progress token (the
// router answers list calls itself), or nil.
func listMeta(params json.RawMessage) json.RawMessage {
	meta := jsonrpc.Member(params, "_meta")
	if meta == nil {
		return nil
	}
	if jsonrpc.Member(meta, "progressToken") != nil {
		var mm map[string]json.RawMessage
		if json.Unmarshal(meta, &mm) != nil {
			return nil
		}
		delete(mm, "progressToken")
		if len(mm) == 0 {
			return nil
		}
		return jsonrpc.Marshal(mm)
	}
	return meta
}

// listAnswer answers a list request from the merged list. extra members are
// added to the result (2026-07-28: resultType, ttlMs, cacheScope).
func (r *Router) listAnswer(ctx context.Context, cat *catalog, req *jsonrpc.Message, k kind, meta json.RawMessage, fresh bool, extra map[string]any) session.Call {
	// Check the cursor's form before any fan-out.
	if v := jsonrpc.Member(req.Params, "cursor"); v != nil && string(v) != "null" {
		if _, ok := jsonrpc.String(v); !ok {
			return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid cursor: must be a string"))
		}
	}
	mg := cat.list(ctx, k, meta, fresh)
	if mg.err != nil {
		return failure(req, mg.err)
	}
	items, version := mg.items, mg.version
	if k == kTools && cat.codeMode() == CodeModeOnly {
		items, version = onlyMeta(mg)
	}
	items = r.visibleItems(policy.FromContext(ctx), k, mg, items)
	res, e := page(req.Params, kinds[k].key, kinds[k].key, items, version, r.opts.PageSize, extra)
	if e != nil {
		return failure(req, e)
	}
	return result(req, res)
}

// routeCall routes tools/call and prompts/get by exposed name, resource
// calls by URI and completion/complete by its ref. A call routed to one
// member is recorded as that member's (the request's audit Destination), so
// metrics and the status page count it under the server that served it; a
// code-mode script's calls have records of their own (metaCall).
func (r *Router) routeCall(ctx context.Context, cat *catalog, req *jsonrpc.Message, meta json.RawMessage,
	toMember func(context.Context, *member, *jsonrpc.Message) (session.Call, error),
	rewrite func(*member, *jsonrpc.Message) *jsonrpc.Message) (session.Call, error) {
	acc := policy.FromContext(ctx)
	reach := func(m *member) bool { return acc.MayReach(r.endpoint(), m.name) }
	forward := func(ctx context.Context, m *member, req *jsonrpc.Message) (session.Call, error) {
		if rec, ok := ctx.Value(audit.RecordKey{}).(*audit.Record); ok {
			rec.Destination = m.name
		}
		return toMember(ctx, m, req)
	}
	switch req.Method {
	case "tools/call", "prompts/get":
		k := kTools
		if req.Method == "prompts/get" {
			k = kPrompts
		}
		name, ok := req.ParamName()
		if !ok {
			return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "%s: params.name must be a string", req.Method)), nil
		}
		rt, e := cat.routeName(ctx, k, name, meta)
		if e != nil {
			return failure(req, e), nil
		}
		// What the caller may not reach or call is answered as unknown.
		if k == kTools && r.decideTool(ctx, acc, cat, rt, name, meta, false) != nil ||
			k == kPrompts && !reach(rt.m) {
			return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "unknown %s %q", strings.TrimSuffix(kinds[k].key, "s"), name)), nil
		}
		if k == kTools && rt.m == nil {
			return r.metaCall(ctx, cat, req, rt.name, meta, toMember)
		}
		if k == kTools && cat.codeMode() == CodeModeOnly {
			return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams,
				"unknown tool %q (code_mode only: call it from execute)", name)), nil
		}
		return forward(ctx, rt.m, withParam(req, rt.name, "name"))

	case "completion/complete":
		ref := jsonrpc.Member(req.Params, "ref")
		typ, _ := jsonrpc.StringMember(ref, "type")
		switch typ {
		case "ref/prompt":
			name, _ := jsonrpc.StringMember(ref, "name")
			rt, e := cat.routeName(ctx, kPrompts, name, meta)
			if e != nil {
				return failure(req, e), nil
			}
			if !reach(rt.m) {
				return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "unknown prompt %q", name)), nil
			}
			return forward(ctx, rt.m, withParam(req, rt.name, "ref", "name"))
		case "ref/resource":
			uri, _ := jsonrpc.StringMember(ref, "uri")
			mg := cat.list(ctx, kTemplates, meta, false)
			if rt, ok := mg.routes[uri]; ok && reach(rt.m) {
				return forward(ctx, rt.m, req)
			}
			if m := cat.routeURI(ctx, uri, meta); m != nil && reach(m) {
				return forward(ctx, m, req)
			}
			return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "unknown resource template %q", uri)), nil
		}
		return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "completion/complete: unknown ref type %q", typ)), nil
	}

	// resources/read, resources/subscribe, resources/unsubscribe
	uri, ok := jsonrpc.StringMember(req.Params, "uri")
	if !ok {
		return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "%s: params.uri must be a string", req.Method)), nil
	}
	if m := cat.routeURI(ctx, uri, meta); m != nil && reach(m) {
		return forward(ctx, m, req)
	}
	capability := "resources"
	var members []*member
	for _, m := range r.reachable(acc, cat.live(capability)) {
		if req.Method != "resources/read" && m.caps != nil && string(jsonrpc.Member(m.caps, "resources", "subscribe")) != "true" {
			continue
		}
		members = append(members, m)
	}
	return cat.tryInOrder(ctx, req, members, rewrite)
}

// withParam returns req with the string at path in its params replaced.
func withParam(req *jsonrpc.Message, value string, path ...string) *jsonrpc.Message {
	_, s, e, ok := jsonrpc.Lookup(req.Params, path...)
	if !ok {
		return req
	}
	out := *req
	out.Params = jsonrpc.Splice(req.Params, s, e, jsonrpc.Quote(value))
	return &out
}
