package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// kind is one of the merged lists.
type kind int

const (
	kTools kind = iota
	kPrompts
	kResources
	kTemplates
	nKinds
)

var kinds = [nKinds]struct {
	method     string // list method
	key        string // result member holding the items
	field      string // item member that identifies it
	capability string // server capability that offers it
	changed    string // list_changed notification
}{
	{"tools/list", "tools", "name", "tools", "notifications/tools/list_changed"},
	{"prompts/list", "prompts", "name", "prompts", "notifications/prompts/list_changed"},
	{"resources/list", "resources", "uri", "resources", "notifications/resources/list_changed"},
	{"resources/templates/list", "resourceTemplates", "uriTemplate", "resources", "notifications/resources/list_changed"},
}

func kindOf(method string) (kind, bool) {
	for k := range nKinds {
		if kinds[k].method == method {
			return k, true
		}
	}
	return 0, false
}

// maxPages bounds the pages followed on one upstream list.
const maxPages = 1000

// member is one server inside an aggregate (a session's) or inside the
// stateless catalog.
type member struct {
	name string
	srv  Server // the server joined (Update compares identities)
	cat  *catalog
	// call sends a request to the server; set once before the member is
	// used. Use invoke, which checks that the member still serves.
	call func(ctx context.Context, req *jsonrpc.Message) (session.Call, error)
	// caps are the server's capabilities (from its InitializeResult); nil
	// when unknown (stateless), which means "ask anyway".
	caps json.RawMessage
	// backend is the session's backend on the server (nil in the stateless
	// catalog, or when the join failed) and instr the server's
	// instructions. Like call and caps, they are set under the catalog's mu
	// before the member is installed, and never change.
	backend session.Backend
	instr   string

	// The fields below are guarded by the catalog's mu.
	err      error // why the member is unavailable; nil when it serves
	lists    [nKinds][]json.RawMessage
	have     [nKinds]bool
	gen      [nKinds]int
	inflight map[*routedCall]struct{} // calls forwarded to it, not yet answered

	fwd map[string]int64 // its server→client request ids → router ids; guarded by the aggregate's mu
}

// invoke sends req to the member's server, or fails at once naming the
// server when it is unavailable.
func (m *member) invoke(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	m.cat.mu.Lock()
	err, call := m.err, m.call
	m.cat.mu.Unlock()
	if err != nil || call == nil {
		return nil, fmt.Errorf("%w: server %s: %v", upstream.ErrUnavailable, m.name, err)
	}
	return call(ctx, req)
}

// has reports whether the member offers a capability ("tools", "logging", …).
func (m *member) has(capability string) bool {
	return m.caps == nil || jsonrpc.Member(m.caps, capability) != nil
}

// route is where an exposed name leads.
type route struct {
	m    *member
	name string // the member's own name for it (tools, prompts), or the URI
}

// merged is one merged list as the client sees it.
type merged struct {
	items     []json.RawMessage
	version   string
	routes    map[string]route
	byName    map[string]json.RawMessage // exposed item by name or URI
	templates []template                 // kTemplates only, most specific first
	err       *jsonrpc.Error
	// kTools only: each tool's name in scripts (its override's name, else
	// the server's own) by exposed name, and the exposed name by server and
	// name in scripts.
	scriptName  map[string]string
	scriptTools map[string]map[string]string
}

type template struct {
	re      *regexp.Regexp
	literal int // literal characters: more is more specific
	m       *member
	uri     string
}

// catalog holds the members of one aggregate and their merged lists.
type catalog struct {
	r *Router
	// other receives messages of internal calls that are not the response
	// (nil drops them).
	other func(m *member, msg *jsonrpc.Message)
	// quiet logs failed listings at debug level (the stateless catalog,
	// whose legacy-only servers fail every time).
	quiet bool

	mu sync.Mutex
	// members are the servers of view, in its order. Update replaces the
	// slice (never changes it in place) along with view.
	members []*member
	view    *View
	merged  [nKinds]*merged // cached; nil when stale
	listGen [nKinds]int
	ids     atomic.Int64
	mi      metaIndex // the manifest (search)
}

func (c *catalog) codeMode() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view == nil {
		return ""
	}
	return c.view.Meta.CodeMode
}

// id returns a request id for the router's own upstream calls.
func (c *catalog) id() json.RawMessage {
	return jsonrpc.Quote("switchboard-" + strconv.FormatInt(c.ids.Add(1), 10))
}

func (c *catalog) snapshot() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members
}

// installed reports whether m is one of the members (not still joining,
// not left).
func (c *catalog) installed(m *member) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.members, m)
}

// track records a call in flight to its member, or fails it at once when
// the member has been removed from the view meanwhile.
func (c *catalog) track(rc *routedCall) {
	m := rc.m
	c.mu.Lock()
	if errors.Is(m.err, errRemoved) {
		c.mu.Unlock()
		rc.fail(unavailable(m.name, m.err))
		return
	}
	if m.inflight == nil {
		m.inflight = map[*routedCall]struct{}{}
	}
	m.inflight[rc] = struct{}{}
	c.mu.Unlock()
}

func (c *catalog) untrack(rc *routedCall) {
	c.mu.Lock()
	delete(rc.m.inflight, rc)
	c.mu.Unlock()
}

// invalidate drops a member's cached list and the merged one.
func (c *catalog) invalidate(m *member, k kind) {
	c.mu.Lock()
	m.lists[k], m.have[k] = nil, false
	m.gen[k]++
	c.merged[k] = nil
	c.listGen[k]++
	c.mu.Unlock()
}

// list returns the merged list of kind k, from the cache unless fresh.
// meta is the client's _meta, sent along with the upstream requests.
// Members that fail are left out (and logged).
func (c *catalog) list(ctx context.Context, k kind, meta json.RawMessage, fresh bool) *merged {
	c.mu.Lock()
	if mg := c.merged[k]; mg != nil && !fresh {
		c.mu.Unlock()
		return mg
	}
	type job struct {
		i   int
		gen int
	}
	var jobs []job
	members := c.members
	lists := make([][]json.RawMessage, len(members))
	for i, m := range members {
		if m.err != nil || !m.has(kinds[k].capability) {
			continue
		}
		if m.have[k] && !fresh {
			lists[i] = m.lists[k]
			continue
		}
		jobs = append(jobs, job{i, m.gen[k]})
	}
	gen0 := c.listGen[k]
	c.mu.Unlock()

	errs := make([]error, len(jobs))
	got := make([][]json.RawMessage, len(jobs))
	var wg sync.WaitGroup
	for j, jb := range jobs {
		wg.Go(func() { got[j], errs[j] = c.fetch(ctx, members[jb.i], k, meta) })
	}
	wg.Wait()

	c.mu.Lock()
	defer c.mu.Unlock()
	complete := true
	for j, jb := range jobs {
		m := members[jb.i]
		if errs[j] != nil {
			complete = false
			logf := c.r.log.Warn
			if c.quiet || errors.Is(ctx.Err(), context.Canceled) {
				// The client left: the listing was cut short, nothing is
				// wrong with the server. (A server too slow for the
				// router's timeout is still worth a warning.)
				logf = c.r.log.Debug
			}
			logf("listing failed; the server is left out of this answer", "view", c.view.Name,
				"server", m.name, "method", kinds[k].method, "err", errs[j])
			continue
		}
		lists[jb.i] = got[j]
		if m.gen[k] == jb.gen {
			m.lists[k], m.have[k] = got[j], true
		}
	}
	mg := c.build(k, members, lists)
	// A session's list is cached only when every member answered (a failed
	// member is asked again next time). The stateless catalog lists afresh
	// for every list request and keeps the result only to route calls, so
	// it keeps it anyway: a legacy-only server must not cost a fan-out per
	// call.
	if (complete || c.quiet) && c.listGen[k] == gen0 {
		c.merged[k] = mg
	}
	return mg
}

// fetch lists kind k of one member, following its cursors to the end.
func (c *catalog) fetch(ctx context.Context, m *member, k kind, meta json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	cursor := ""
	seen := map[string]bool{}
	for range maxPages {
		params := map[string]json.RawMessage{}
		if meta != nil {
			params["_meta"] = meta
		}
		if cursor != "" {
			params["cursor"] = jsonrpc.Quote(cursor)
		}
		var p json.RawMessage
		if len(params) > 0 {
			p = jsonrpc.Marshal(params)
		}
		call, err := m.invoke(ctx, jsonrpc.NewRequest(c.id(), kinds[k].method, p))
		if err != nil {
			return nil, err
		}
		resp, err := session.Drain(ctx, call, func(msg *jsonrpc.Message) { c.deliver(m, msg) })
		if err != nil {
			return nil, err
		}
		if e := resp.ErrorOf(); e != nil {
			return nil, e
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return nil, fmt.Errorf("malformed %s result: %v", kinds[k].method, err)
		}
		var page []json.RawMessage
		if raw := res[kinds[k].key]; raw != nil && string(raw) != "null" {
			if err := json.Unmarshal(raw, &page); err != nil {
				return nil, fmt.Errorf("malformed %s result: %v", kinds[k].method, err)
			}
		}
		items = append(items, page...)
		next, _ := jsonrpc.String(res["nextCursor"])
		if next == "" || seen[next] {
			return items, nil
		}
		seen[next] = true
		cursor = next
	}
	return items, fmt.Errorf("%s: more than %d pages", kinds[k].method, maxPages)
}

// fanOut sends req to members at once and returns their results, parallel
// to members: nil where one failed (logged at debug level). Their other
// messages go to c.other.
func (c *catalog) fanOut(ctx context.Context, members []*member, req *jsonrpc.Message) []json.RawMessage {
	results := make([]json.RawMessage, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			mreq := *req // its own: reading a Message caches into it (jsonrpc.Message.MetaAt)
			call, err := m.invoke(ctx, &mreq)
			var resp *jsonrpc.Message
			if err == nil {
				resp, err = session.Drain(ctx, call, func(msg *jsonrpc.Message) { c.deliver(m, msg) })
			}
			if err == nil && resp.Error != nil {
				err = resp.ErrorOf()
			}
			if err != nil {
				c.r.log.Debug(req.Method+" failed", "view", c.r.Name(), "server", m.name, "err", err)
				return
			}
			results[i] = resp.Result
		})
	}
	wg.Wait()
	return results
}

// deliver passes a message of an internal call that is not its response
// to c.other.
func (c *catalog) deliver(m *member, msg *jsonrpc.Message) {
	if c.other != nil {
		c.other(m, msg)
	}
}

// build merges the members' lists (parallel to members; nil = none) under
// the catalog's view. mu held.
func (c *catalog) build(k kind, members []*member, lists [][]json.RawMessage) *merged {
	mg := &merged{routes: map[string]route{}, byName: map[string]json.RawMessage{}}
	field := kinds[k].field
	switch k {
	case kTools, kPrompts:
		var items []Item
		var raws []json.RawMessage
		var owners []*member
		if k == kTools {
			lists = c.unshadowed(members, lists)
			for _, raw := range metaTools(c.view, c.scriptServers(members, lists)) {
				name, _ := jsonrpc.StringMember(raw, "name")
				items = append(items, Item{Server: metaServer, Name: name, Rename: name})
				raws = append(raws, raw)
				owners = append(owners, nil)
			}
			mg.scriptName, mg.scriptTools = map[string]string{}, map[string]map[string]string{}
		}
		for i, list := range lists {
			m := members[i]
			for _, raw := range list {
				name, ok := jsonrpc.StringMember(raw, field)
				if !ok || name == "" {
					continue
				}
				if k == kTools && !c.view.Admits(m.name, name) {
					continue
				}
				items = append(items, c.view.Item(m.name, name, k == kTools))
				raws = append(raws, raw)
				owners = append(owners, m)
			}
		}
		names, err := ExposeNames(c.view.Prefix, items)
		if err != nil {
			c.r.log.Error("name collision", "view", c.view.Name, "list", kinds[k].key, "err", err)
			mg.err = jsonrpc.Errorf(jsonrpc.InternalError, "switchboard: %s in %s: %v", kinds[k].key, c.r.viewLabel(), err)
			mg.items = []json.RawMessage{}
			mg.version = listVersion(nil)
			return mg
		}
		for i, it := range items {
			n := names[i]
			if n == "" {
				continue
			}
			raw := raws[i]
			if k == kTools {
				raw = reshape(raw, c.view.override(it.Server, it.Name))
			}
			if n != it.Name {
				if _, s, e, ok := jsonrpc.Lookup(raw, field); ok {
					raw = jsonrpc.Splice(raw, s, e, jsonrpc.Quote(n))
				}
				if full := it.Server + Separator + it.Name; n != full && n != it.Name && it.Rename == "" && it.Prefix == "" {
					c.r.noteShortened(it.Server, it.Name, n)
				}
			}
			mg.items = append(mg.items, raw)
			mg.routes[n] = route{m: owners[i], name: it.Name}
			mg.byName[n] = raw
			if k == kTools && owners[i] != nil {
				sn := it.Name
				if it.Rename != "" {
					sn = it.Rename
				}
				mg.scriptName[n] = sn
				if mg.scriptTools[it.Server] == nil {
					mg.scriptTools[it.Server] = map[string]string{}
				}
				mg.scriptTools[it.Server][sn] = n
			}
		}
	default:
		for i, list := range lists {
			m := members[i]
			for _, raw := range list {
				key, ok := jsonrpc.StringMember(raw, field)
				if !ok || key == "" {
					continue
				}
				if _, dup := mg.routes[key]; dup {
					continue // the first server in the view wins
				}
				mg.routes[key] = route{m: m, name: key}
				mg.byName[key] = raw
				mg.items = append(mg.items, raw)
				if k == kTemplates {
					if t, ok := compileTemplate(key); ok {
						t.m = m
						mg.templates = append(mg.templates, t)
					}
				}
			}
		}
		sort.SliceStable(mg.templates, func(i, j int) bool { return mg.templates[i].literal > mg.templates[j].literal })
	}
	keys := make([]string, 0, len(mg.items))
	for _, raw := range mg.items {
		s, _ := jsonrpc.StringMember(raw, field)
		keys = append(keys, s)
	}
	mg.version = listVersion(keys)
	if mg.items == nil {
		mg.items = []json.RawMessage{}
	}
	return mg
}

// compileTemplate turns an RFC 6570 URI template into a matcher: literal
// text must match exactly, each {expression} matches anything.
func compileTemplate(t string) (template, bool) {
	var b strings.Builder
	b.WriteString("^")
	literal := 0
	rest := t
	for rest != "" {
		lit, expr, found := strings.Cut(rest, "{")
		b.WriteString(regexp.QuoteMeta(lit))
		literal += len(lit)
		if !found {
			break
		}
		_, after, closed := strings.Cut(expr, "}")
		if !closed {
			return template{}, false
		}
		b.WriteString(".*")
		rest = after
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return template{}, false
	}
	return template{re: re, literal: literal, uri: t}, true
}

// matchTemplate returns the member whose template matches uri best.
func (mg *merged) matchTemplate(uri string) *member {
	for _, t := range mg.templates {
		if t.re.MatchString(uri) {
			return t.m
		}
	}
	return nil
}

// routeName finds the member and original name of an exposed tool or
// prompt name. A name not in the cached list makes it list again once.
func (c *catalog) routeName(ctx context.Context, k kind, name string, meta json.RawMessage) (route, *jsonrpc.Error) {
	mg := c.list(ctx, k, meta, false)
	rt, ok := mg.routes[name]
	if !ok && mg.err == nil {
		mg = c.list(ctx, k, meta, true)
		rt, ok = mg.routes[name]
	}
	if ok {
		return rt, nil
	}
	if mg.err != nil {
		return route{}, mg.err
	}
	what := strings.TrimSuffix(kinds[k].key, "s")
	c.mu.Lock()
	var down []string
	for _, m := range c.members {
		if m.err == nil {
			continue
		}
		if hasPrefix(name, m.name) {
			err := m.err
			c.mu.Unlock()
			return route{}, unavailable(m.name, fmt.Errorf("%s %q: %w", what, name, err))
		}
		down = append(down, m.name)
	}
	c.mu.Unlock()
	if len(down) > 0 {
		return route{}, jsonrpc.Errorf(jsonrpc.InvalidParams, "unknown %s %q (unavailable servers: %s)", what, name, strings.Join(down, ", "))
	}
	return route{}, jsonrpc.Errorf(jsonrpc.InvalidParams, "unknown %s %q", what, name)
}

// routeURI finds the member serving a resource URI: the merged resources
// first, then the best-matching resource template. nil when neither knows it.
func (c *catalog) routeURI(ctx context.Context, uri string, meta json.RawMessage) *member {
	if rt, ok := c.list(ctx, kResources, meta, false).routes[uri]; ok {
		return rt.m
	}
	return c.list(ctx, kTemplates, meta, false).matchTemplate(uri)
}

// live returns the members that serve and offer capability ("" any).
func (c *catalog) live(capability string) []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*member
	for _, m := range c.members {
		if m.err == nil && (capability == "" || m.has(capability)) {
			out = append(out, m)
		}
	}
	return out
}

// tryInOrder sends req to each member in turn until one answers with
// something other than "not found" / "unknown", and returns that answer
// (or the last one).
func (c *catalog) tryInOrder(ctx context.Context, req *jsonrpc.Message, members []*member, rewrite func(*member, *jsonrpc.Message) *jsonrpc.Message) (session.Call, error) {
	var last []*jsonrpc.Message
	var lastErr error
	for _, m := range members {
		call, err := m.invoke(ctx, req)
		if err != nil {
			lastErr = err
			continue
		}
		msgs, err := drainAll(ctx, call)
		if err != nil {
			lastErr = err
			continue
		}
		if rewrite != nil {
			for i, msg := range msgs {
				msgs[i] = rewrite(m, msg)
			}
		}
		last = msgs
		if e := msgs[len(msgs)-1].ErrorOf(); e != nil && notFound(e.Code) {
			continue
		}
		return session.NewAnswer(msgs...), nil
	}
	if last != nil {
		return session.NewAnswer(last...), nil
	}
	if lastErr != nil {
		return nil, lastErr
	}
	return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "no server in %s knows this resource", c.r.viewLabel())), nil
}

// unavailable is the error of a call to a member that does not serve: the
// code (mcp.FaultCode) and so the HTTP status the member's own endpoint
// gives the same fault, with data.server naming the member.
func unavailable(server string, err error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: mcp.FaultCode(err),
		Message: fmt.Sprintf("server %s is unavailable: %s", server, errString(err)),
		Data:    jsonrpc.Marshal(map[string]string{"server": server})}
}

// notFound: the error codes servers use for an unknown resource or method.
func notFound(code int) bool {
	return code == -32002 || code == jsonrpc.InvalidParams || code == jsonrpc.MethodNotFound
}

// errString is err's message, or "".
func errString(err error) string {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Message
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// shadowGuard is a server whose tools are checked against the other
// servers' of an aggregated catalog: the guards' gate
// (internal/guard/gate).
type shadowGuard interface {
	// ChecksShadowing reports whether the check is on.
	ChecksShadowing() bool
	// Shadowed is given the findings against the server's own tools and
	// returns those to leave out of the catalog.
	Shadowed(view string, fs []guard.Shadowing) []string
}

// unshadowed returns the members' tool lists (parallel to members) less
// the tools their guards leave out as shadowing another server's
// (guard.CheckCatalog over the tools the view admits); lists itself when
// no member checks, or none is left out. mu held.
func (c *catalog) unshadowed(members []*member, lists [][]json.RawMessage) [][]json.RawMessage {
	if !slices.ContainsFunc(members, func(m *member) bool {
		sg, ok := m.srv.(shadowGuard)
		return ok && sg.ChecksShadowing()
	}) {
		return lists
	}
	var tools []guard.CatalogTool
	for i, m := range members {
		for _, raw := range lists[i] {
			name, ok := jsonrpc.StringMember(raw, "name")
			if !ok || name == "" || !c.view.Admits(m.name, name) {
				continue
			}
			desc, _ := jsonrpc.StringMember(raw, "description")
			tools = append(tools, guard.CatalogTool{Server: m.name, Name: name, Description: desc})
		}
	}
	found := map[string][]guard.Shadowing{}
	for _, f := range guard.CheckCatalog(tools) {
		found[f.Server] = append(found[f.Server], f)
	}
	var out [][]json.RawMessage
	for i, m := range members {
		sg, ok := m.srv.(shadowGuard)
		if !ok || len(found[m.name]) == 0 {
			continue
		}
		hide := sg.Shadowed(c.r.viewLabel(), found[m.name])
		if len(hide) == 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(lists)
		}
		out[i] = slices.DeleteFunc(slices.Clone(lists[i]), func(raw json.RawMessage) bool {
			name, _ := jsonrpc.StringMember(raw, "name")
			return slices.Contains(hide, name)
		})
	}
	if out == nil {
		return lists
	}
	return out
}
