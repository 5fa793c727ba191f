package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/manifest"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Meta-tools: tools the router answers itself on a namespace that asks for
// them (tool_search, code_mode). They are named as written (never
// prefixed); a server's tool that would take one of their names is
// prefixed under tool_prefix conflict, and is a collision under never.
//
//   - search: ranked full-text search over the view's manifest (every
//     member's tools, prompts, resources and templates, rebuilt when a list
//     changed).
//   - inspect: the full definitions of named tools, with how scripts name
//     them.
//   - execute: runs a script in the sandbox (package sandbox); its tool
//     calls take the same route as a client's (the view's filters and
//     shaping apply: what the view does not offer raises PermissionError in
//     the script) and each gets an audit record.
const (
	MetaSearch  = "search"
	MetaInspect = "inspect"
	MetaExecute = "execute"
)

// metaServer is the Item.Server of meta-tools: no server has it.
const metaServer = ""

// maxSearchResults bounds search's limit.
const maxSearchResults = 50

// serverTools is one server of a view as execute's description names
// it: its name in scripts and the names in scripts of the tools it offers
// there (nil: its list is not known yet).
type serverTools struct {
	name  string
	tools []string
}

// scriptServers are the view's servers in order, each with the tools the
// view admits of its list (lists parallel to members; nil: not known).
// mu held.
func (c *catalog) scriptServers(members []*member, lists [][]json.RawMessage) []serverTools {
	byName := map[string][]json.RawMessage{}
	for i, m := range members {
		if lists[i] != nil {
			byName[m.name] = lists[i]
		}
	}
	out := make([]serverTools, 0, len(c.view.Servers))
	for _, s := range c.view.Servers {
		st := serverTools{name: s.Name()}
		for _, raw := range byName[st.name] {
			name, ok := jsonrpc.StringMember(raw, "name")
			if !ok || name == "" || !c.view.Admits(st.name, name) {
				continue
			}
			it := c.view.Item(st.name, name, true)
			if it.Rename != "" {
				name = it.Rename
			}
			st.tools = append(st.tools, name)
		}
		out = append(out, st)
	}
	return out
}

// maxDescribedTools bounds the tools execute's description names per
// server.
const maxDescribedTools = 12

// describeServers is the servers part of execute's description.
func describeServers(servers []serverTools) string {
	if len(servers) == 0 {
		return "It has no servers."
	}
	var b strings.Builder
	b.WriteString("Its servers, as scripts name them (with their tools; search and inspect give the tools' schemas):")
	for _, s := range servers {
		fmt.Fprintf(&b, "\n- %s", s.name)
		switch {
		case s.tools == nil:
			b.WriteString(" (tools not listed yet)")
		case len(s.tools) <= maxDescribedTools:
			fmt.Fprintf(&b, ": %s", strings.Join(s.tools, ", "))
		default:
			fmt.Fprintf(&b, ": %s, … (%d tools)", strings.Join(s.tools[:maxDescribedTools], ", "), len(s.tools))
		}
	}
	return b.String()
}

// executeExample is execute's example script, on the view's own servers
// and tools: two calls in parallel when two servers have tools.
func executeExample(servers []serverTools) string {
	var calls [][2]string
	for _, s := range servers {
		if len(s.tools) > 0 {
			calls = append(calls, [2]string{s.name, s.tools[0]})
		}
		if len(calls) == 2 {
			break
		}
	}
	q := func(s string) string { return string(jsonrpc.Quote(s)) }
	switch len(calls) {
	case 0:
		return `const r = call_tool("SERVER", "TOOL", {}); r`
	case 1:
		return fmt.Sprintf(`const r = call_tool(%s, %s, {/* its arguments */}); print(r); r`, q(calls[0][0]), q(calls[0][1]))
	}
	return fmt.Sprintf(`const [a, b] = parallel([{server: %s, tool: %s, args: {}}, [%s, %s, {}]]); ({a, b})`,
		q(calls[0][0]), q(calls[0][1]), q(calls[1][0]), q(calls[1][1]))
}

// metaTools returns the definitions of v's meta-tools, in order; servers
// are v's servers with their tools, named in the descriptions.
func metaTools(v *View, servers []serverTools) []json.RawMessage {
	var out []json.RawMessage
	if !v.Meta.Search && v.Meta.CodeMode == CodeModeOff {
		return nil
	}
	label := "this endpoint"
	if v.Name != "" {
		label = "namespace " + v.Name
	}
	names := "no servers"
	if len(servers) > 0 {
		names = "servers " + strings.Join(namesOf(v.Servers), ", ")
	}
	readOnly := map[string]any{"readOnlyHint": true, "openWorldHint": false}
	out = append(out, jsonrpc.Marshal(map[string]any{
		"name": MetaSearch,
		"description": fmt.Sprintf("Search the tools, prompts and resources of %s (%s) by keywords: ranked full-text "+
			"search over names, titles, descriptions and parameter names and descriptions, matching word forms "+
			"(remember finds remembering). Returns the best matches with their exposed name, server and name in "+
			"scripts, or says that nothing matched; use inspect for a tool's full schema.", label, names),
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "keywords, e.g. \"read file\""},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxSearchResults, "description": "most results (default 10)"},
				"kind":  map[string]any{"type": "string", "enum": []string{manifest.KindTool, manifest.KindPrompt, manifest.KindResource}, "description": "only this kind"},
			},
			"required": []string{"query"},
		},
		"annotations": readOnly,
	}))
	out = append(out, jsonrpc.Marshal(map[string]any{
		"name":        MetaInspect,
		"description": fmt.Sprintf("The full definitions (input and output schemas, annotations) of tools of %s, by their exposed names as search or tools/list give them.", label),
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"names": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "exposed tool names"},
			},
			"required": []string{"names"},
		},
		"annotations": readOnly,
	}))
	if v.Meta.CodeMode != CodeModeOff {
		s := v.Meta.Sandbox
		out = append(out, jsonrpc.Marshal(map[string]any{
			"name": MetaExecute,
			"description": fmt.Sprintf("Run a JavaScript program that calls the tools of %s and returns one result: "+
				"use it to chain or combine several calls (in parallel too) instead of calling them one by one. "+
				"The program runs in a worker process of its own. Bounds: %s wall time, %d tool calls, %s of "+
				"printed output and of result, %s of memory.\n\n%s\n\n%s\n\nExample: %s\n\n"+
				"The answer is JSON: {status: \"ok\"|\"error\", result, stdout, error, execution_time_ms, tool_calls, limit}.",
				label, s.Timeout, s.MaxCalls, sandbox.SizeText(s.MaxOutput), sandbox.SizeText(s.Memory), describeServers(servers),
				sandbox.API, executeExample(servers)),
			"inputSchema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"script": map[string]any{"type": "string", "description": "the JavaScript program"},
				},
				"required": []string{"script"},
			},
			"outputSchema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"status":            map[string]any{"type": "string", "enum": []string{sandbox.StatusOK, sandbox.StatusError}},
					"result":            map[string]any{},
					"stdout":            map[string]any{"type": "string"},
					"error":             map[string]any{"type": "string"},
					"execution_time_ms": map[string]any{"type": "number"},
					"tool_calls":        map[string]any{"type": "integer"},
					"limit":             map[string]any{"type": "string"},
				},
				"required": []string{"status", "result", "stdout", "execution_time_ms"},
			},
			"annotations": map[string]any{"openWorldHint": true},
		}))
	}
	return out
}

// onlyMeta returns the meta-tools of a merged tools list (code_mode: only).
func onlyMeta(mg *merged) ([]json.RawMessage, string) {
	var items []json.RawMessage
	for _, raw := range mg.items {
		n, _ := jsonrpc.StringMember(raw, "name")
		if rt, ok := mg.routes[n]; ok && rt.m == nil {
			items = append(items, raw)
		}
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	return items, mg.version + "m"
}

// metaIndex is a catalog's manifest, with the list versions it was built
// from.
type metaIndex struct {
	mu  sync.Mutex
	key string
	ix  *manifest.Index
}

// index returns the manifest of the catalog's merged lists, rebuilt when
// one of them changed since (a list_changed drops the merged list).
func (c *catalog) index(ctx context.Context, meta json.RawMessage) *manifest.Index {
	var mgs [nKinds]*merged
	var key strings.Builder
	for k := range nKinds {
		mgs[k] = c.list(ctx, k, meta, false)
		key.WriteString(mgs[k].version)
		key.WriteByte('.')
	}
	c.mi.mu.Lock()
	defer c.mi.mu.Unlock()
	if c.mi.ix != nil && c.mi.key == key.String() {
		return c.mi.ix
	}
	var entries []manifest.Entry
	str := func(raw json.RawMessage, k string) string { s, _ := jsonrpc.StringMember(raw, k); return s }
	for _, raw := range mgs[kTools].items {
		name := str(raw, "name")
		rt, ok := mgs[kTools].routes[name]
		if !ok || rt.m == nil {
			continue
		}
		entries = append(entries, manifest.Entry{Kind: manifest.KindTool, Name: name, Server: rt.m.name,
			Tool: mgs[kTools].scriptName[name], Title: str(raw, "title"), Description: str(raw, "description"),
			Schema: jsonrpc.Member(raw, "inputSchema")})
	}
	for _, raw := range mgs[kPrompts].items {
		name := str(raw, "name")
		e := manifest.Entry{Kind: manifest.KindPrompt, Name: name, Title: str(raw, "title"),
			Description: str(raw, "description"), Schema: jsonrpc.Member(raw, "arguments")}
		if rt, ok := mgs[kPrompts].routes[name]; ok && rt.m != nil {
			e.Server = rt.m.name
		}
		entries = append(entries, e)
	}
	for _, k := range []kind{kResources, kTemplates} {
		for _, raw := range mgs[k].items {
			uri := str(raw, kinds[k].field)
			e := manifest.Entry{Kind: manifest.KindResource, Name: uri, Title: strings.TrimSpace(str(raw, "title") + " " + str(raw, "name")),
				Description: str(raw, "description")}
			if rt, ok := mgs[k].routes[uri]; ok && rt.m != nil {
				e.Server = rt.m.name
			}
			entries = append(entries, e)
		}
	}
	c.mi.key, c.mi.ix = key.String(), manifest.Build(entries)
	return c.mi.ix
}

// toolResponse is a CallToolResult of the router's own: v as JSON text and
// as structuredContent.
func toolResponse(req *jsonrpc.Message, v any, isError bool) *jsonrpc.Message {
	b := jsonrpc.Marshal(v)
	res := map[string]any{
		"content":           []map[string]any{{"type": "text", "text": string(b)}},
		"structuredContent": json.RawMessage(b),
	}
	if isError {
		res["isError"] = true
	}
	return jsonrpc.NewResult(req.ID, jsonrpc.Marshal(res))
}

// toolFailure is a CallToolResult with isError and a message.
func toolFailure(req *jsonrpc.Message, format string, args ...any) *session.Answer {
	return result(req, jsonrpc.Marshal(map[string]any{
		"content": []map[string]any{{"type": "text", "text": fmt.Sprintf(format, args...)}},
		"isError": true,
	}))
}

// metaCall answers a call of a meta-tool.
func (r *Router) metaCall(ctx context.Context, cat *catalog, req *jsonrpc.Message, name string, meta json.RawMessage,
	forward func(context.Context, *member, *jsonrpc.Message) (session.Call, error)) (session.Call, error) {
	args := jsonrpc.Member(req.Params, "arguments")
	if args == nil || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	switch name {
	case MetaSearch:
		var a struct {
			Query string `json:"query"`
			Limit int    `json:"limit"`
			Kind  string `json:"kind"`
		}
		if err := json.Unmarshal(args, &a); err != nil || strings.TrimSpace(a.Query) == "" {
			return toolFailure(req, "search: arguments must be {query: string, limit?: integer, kind?: tool|prompt|resource}"), nil
		}
		if a.Limit <= 0 {
			a.Limit = 10
		}
		a.Limit = min(a.Limit, maxSearchResults)
		ix := cat.index(ctx, meta)
		acc := policy.FromContext(ctx)
		size, limit := ix.Len(), a.Limit
		if acc != nil {
			// Only what the caller may reach and call: ranked over the
			// whole catalog, then filtered.
			size, limit = 0, ix.Len()
			for _, e := range ix.Entries() {
				if r.entryVisible(ctx, acc, cat, meta, e) {
					size++
				}
			}
		}
		hits := ix.Search(a.Query, limit, a.Kind)
		results := make([]map[string]any, 0, min(len(hits), a.Limit))
		for _, h := range hits {
			if len(results) == a.Limit {
				break
			}
			e := h.Entry
			if acc != nil && !r.entryVisible(ctx, acc, cat, meta, *e) {
				continue
			}
			item := map[string]any{"kind": e.Kind, "name": e.Name, "server": e.Server, "score": float64(int(h.Score*1000)) / 1000}
			if e.Title != "" {
				item["title"] = e.Title
			}
			if e.Description != "" {
				item["description"] = clip(e.Description, 300)
			}
			if e.Kind == manifest.KindTool {
				item["script"] = map[string]string{"server": e.Server, "tool": e.Tool}
			}
			results = append(results, item)
		}
		out := map[string]any{"query": a.Query, "results": results, "catalog_size": size}
		if len(results) == 0 {
			servers := ""
			if acc == nil { // a client's grants may hide some: name none then
				cat.mu.Lock()
				servers = " (servers: " + viewServers(cat.view) + ")"
				cat.mu.Unlock()
			}
			out["note"] = fmt.Sprintf("nothing matched %q among the %d tools, prompts and resources of %s%s; "+
				"try other or fewer words, or inspect and tools/list", a.Query, size, r.viewLabel(), servers)
		}
		return session.NewAnswer(toolResponse(req, out, false)), nil

	case MetaInspect:
		var a struct {
			Names []string `json:"names"`
			Name  string   `json:"name"`
		}
		if err := json.Unmarshal(args, &a); err != nil || (len(a.Names) == 0 && a.Name == "") {
			return toolFailure(req, "inspect: arguments must be {names: [exposed tool names]}"), nil
		}
		if a.Name != "" {
			a.Names = append(a.Names, a.Name)
		}
		mg := cat.list(ctx, kTools, meta, false)
		acc := policy.FromContext(ctx)
		tools := []any{}
		unknown := []string{}
		for _, n := range a.Names {
			raw, ok := mg.byName[n]
			rt := mg.routes[n]
			if !ok || rt.m == nil || !r.visible(acc, kTools, mg, n) {
				unknown = append(unknown, n)
				continue
			}
			var def map[string]any
			_ = json.Unmarshal(raw, &def)
			if def == nil {
				def = map[string]any{}
			}
			def["server"] = rt.m.name
			def["script"] = map[string]string{"server": rt.m.name, "tool": mg.scriptName[n]}
			tools = append(tools, def)
		}
		out := map[string]any{"tools": tools}
		if len(unknown) > 0 {
			out["unknown"] = unknown
		}
		return session.NewAnswer(toolResponse(req, out, len(tools) == 0)), nil

	case MetaExecute:
		var a struct {
			Script string `json:"script"`
			Code   string `json:"code"`
		}
		if err := json.Unmarshal(args, &a); err != nil || (a.Script == "" && a.Code == "") {
			return toolFailure(req, "execute: arguments must be {script: string}"), nil
		}
		if a.Script == "" {
			a.Script = a.Code
		}
		return r.execute(ctx, cat, req, a.Script, meta, forward), nil
	}
	return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "unknown tool %q", name)), nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// runner returns the sandbox runner for the view's limits (made once per
// set of limits: a reload that changes them starts a new one, and stops
// the old one's idle workers; its running scripts finish).
func (r *Router) runner(s sandbox.Limits) *sandbox.Runner {
	r.sbMu.Lock()
	defer r.sbMu.Unlock()
	if r.sb == nil || r.sbLimits != s {
		if old := r.sb; old != nil {
			go old.Close() // ends: Close waits only for workers starting
		}
		r.sb = sandbox.NewRunner(s)
		r.sbLimits = s
	}
	return r.sb
}

// closeRunner stops the idle workers of the code-mode runner.
func (r *Router) closeRunner() {
	r.sbMu.Lock()
	sb := r.sb
	r.sb = nil
	r.sbMu.Unlock()
	if sb != nil {
		sb.Close()
	}
}

// execute runs a script on its own goroutine and answers when it ends.
// The script outlives the request's own context (the sandbox's timeout
// bounds it); the client abandoning the call cancels it.
func (r *Router) execute(ctx context.Context, cat *catalog, req *jsonrpc.Message, script string, meta json.RawMessage,
	forward func(context.Context, *member, *jsonrpc.Message) (session.Call, error)) session.Call {
	cat.mu.Lock()
	v := cat.view
	cat.mu.Unlock()
	rn := r.runner(v.Meta.Sandbox)
	parent := audit.FromContext(ctx)
	acc := policy.FromContext(ctx)
	sc := &scriptCaller{r: r, cat: cat, meta: meta, forward: forward, acc: acc,
		rec: audit.Record{Session: parent.Session, SourceIP: parent.SourceIP, Path: parent.Path, Client: acc.Client()}}
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &asyncCall{cancel: cancel}
	c.Init(1)
	go func() {
		defer cancel()
		res := rn.Run(ectx, script, sc)
		if res.Status != sandbox.StatusOK {
			r.log.Info("script stopped", "view", v.Name, "limit", res.Limit, "err", res.Error,
				"tool_calls", res.Calls, "ms", res.ExecutionTimeMS)
		}
		c.PushLast(toolResponse(req, res, res.Status != sandbox.StatusOK))
	}()
	return c
}

// asyncCall is a call the router answers later (execute): its queue gets
// the response when the script ends.
type asyncCall struct {
	jsonrpc.Queue
	cancel context.CancelFunc
}

func (c *asyncCall) LongLived() bool { return false }

// Abandon stops the script when the client gives up on it.
func (c *asyncCall) Abandon(cancel bool) {
	if cancel {
		c.cancel()
	}
}

// viewServers names the servers of v, for an error.
func viewServers(v *View) string {
	if len(v.Servers) == 0 {
		return "none"
	}
	return strings.Join(namesOf(v.Servers), ", ")
}

// scriptCaller makes a script's tool calls (sandbox.Caller).
type scriptCaller struct {
	r       *Router
	cat     *catalog
	meta    json.RawMessage
	forward func(context.Context, *member, *jsonrpc.Message) (session.Call, error)
	// acc is the access of the execute request's caller, taken when the
	// script starts: every call of the script is decided with it, whatever
	// context the script runtime calls CallTool with (nil: everything).
	acc *policy.Access
	rec audit.Record // the execute request's session, source, path and client
}

// CallTool routes a script's call as the view routes a client's: by the
// tool's name in scripts (server given) or its exposed name. A server
// outside the view, or a tool it does not offer (unknown, hidden or
// filtered out), is a PermissionError; meta-tools cannot be called. Every
// call, refused ones too, gets an audit record.
func (sc *scriptCaller) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	cat := sc.cat
	cat.mu.Lock()
	v := cat.view
	cat.mu.Unlock()
	label := sc.r.viewLabel()
	deny := func(format string, args ...any) error {
		e := &sandbox.PermissionError{Msg: fmt.Sprintf(format, args...)}
		rec := sc.rec
		rec.Time, rec.Destination, rec.MCPMethod, rec.Tool, rec.Via = time.Now(), server, "tools/call", tool, MetaExecute
		rec.Status, rec.Error = 200, "PermissionError: "+e.Msg
		if sc.r.opts.Audit != nil {
			sc.r.opts.Audit(&rec)
		}
		return e
	}
	if server != "" && !slices.Contains(namesOf(v.Servers), server) {
		return nil, deny("server %q is not in %s (its servers: %s)", server, label, viewServers(v))
	}
	find := func(fresh bool) (string, route, bool) {
		mg := cat.list(ctx, kTools, sc.meta, fresh)
		exposed := tool
		if server != "" {
			exposed = mg.scriptTools[server][tool]
		}
		rt, ok := mg.routes[exposed]
		return exposed, rt, ok && rt.m != nil
	}
	exposed, rt, ok := find(false)
	if !ok {
		exposed, rt, ok = find(true)
	}
	if !ok {
		if server != "" {
			return nil, deny("tool %q of server %q is not available in %s (unknown, hidden or filtered out)", tool, server, label)
		}
		return nil, deny("tool %q is not available in %s (unknown, hidden or filtered out)", tool, label)
	}
	// The caller's access (the execute request's), as for its own calls;
	// each call of a script takes a token of its rate limit.
	if d := sc.r.decideTool(ctx, sc.acc, cat, rt, exposed, sc.meta, true); d != nil {
		if d.RetryAfter > 0 {
			return nil, deny("%s", d.Reason)
		}
		return nil, deny("tool %q is not available to client %s in %s", exposed, sc.acc.Client(), label)
	}
	params := map[string]json.RawMessage{"name": jsonrpc.Quote(rt.name), "arguments": args}
	if sc.meta != nil {
		params["_meta"] = sc.meta
	}
	req := jsonrpc.NewRequest(cat.id(), "tools/call", jsonrpc.Marshal(params))
	start := time.Now()
	rec := sc.rec
	rec.Time, rec.Destination, rec.MCPMethod, rec.Tool, rec.Via, rec.RPCID = start, rt.m.name, "tools/call", rt.name, MetaExecute, req.ID
	rec.RequestBody = req.Params
	defer func() {
		rec.Status = 200
		rec.Latency = time.Since(start)
		if sc.r.opts.Audit != nil {
			sc.r.opts.Audit(&rec)
		}
	}()
	var resp *jsonrpc.Message
	call, err := sc.forward(ctx, rt.m, req)
	if err == nil {
		if resp, err = session.Drain(ctx, call, nil); err == nil && resp.Error != nil {
			err = errors.New(resp.ErrorOf().Message)
		}
	}
	if err != nil {
		rec.Error = err.Error()
		return nil, &sandbox.ToolError{Msg: fmt.Sprintf("%s: %v", exposed, err)}
	}
	rec.ResponseBody = resp.Result
	return resp.Result, nil
}

// entryVisible reports whether acc may see a catalog entry (search): it
// may reach its server and its rules admit it.
func (r *Router) entryVisible(ctx context.Context, acc *policy.Access, cat *catalog, meta json.RawMessage, e manifest.Entry) bool {
	switch e.Kind {
	case manifest.KindTool:
		return r.visible(acc, kTools, cat.list(ctx, kTools, meta, false), e.Name)
	case manifest.KindPrompt:
		return r.visible(acc, kPrompts, cat.list(ctx, kPrompts, meta, false), e.Name) && acc.AdmitsPrompt(e.Name)
	}
	for _, k := range []kind{kResources, kTemplates} {
		if mg := cat.list(ctx, k, meta, false); mg.routes[e.Name].m != nil {
			return r.visible(acc, k, mg, e.Name) && acc.AdmitsResource(e.Name)
		}
	}
	return false
}
