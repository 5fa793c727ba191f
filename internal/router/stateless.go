package router

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/mcpheader"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// newStatelessCatalog returns the catalog of the servers of v that serve
// 2026-07-28 requests, or nil when none does. Its members never change
// (Update replaces the catalog).
func (r *Router) newStatelessCatalog(v *View) *catalog {
	c := &catalog{r: r, quiet: true, view: v}
	for _, s := range v.Servers {
		ss, ok := s.(StatelessServer)
		if !ok {
			continue
		}
		c.members = append(c.members, &member{name: s.Name(), srv: s, cat: c, call: ss.Stateless})
	}
	if len(c.members) == 0 {
		return nil
	}
	return c
}

// modernExtra are the members every 2026-07-28 result of the router
// carries.
func modernExtra(cacheable bool) map[string]any {
	out := map[string]any{"resultType": "complete"}
	if cacheable {
		// Merged answers depend on every server: never cached, never shared.
		out["ttlMs"] = 0
		out["cacheScope"] = "private"
	}
	return out
}

// Stateless serves a 2026-07-28 request (streamable.Destination). Lists are
// fanned out to every server on each request; calls are routed by the
// names of the last listing (listing again when a name is unknown);
// server/discover and subscriptions/listen are merged. Removed methods
// (ping, logging/setLevel, resources/subscribe, …) are -32601.
func (r *Router) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	cat := r.stateless.Load()
	if cat == nil {
		return nil, jsonrpc.Errorf(jsonrpc.UnsupportedProtocolVersion,
			"no server of %s serves protocol %s; send initialize (protocol 2025-11-25 or earlier)", r.viewLabel(), mcp.ModernVersion)
	}
	if e := mcp.CheckMeta(req); e != nil {
		return failure(req, e), nil
	}
	if req.Method == "subscriptions/listen" {
		return r.listen(ctx, req), nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	meta := jsonrpc.Member(req.Params, "_meta")
	if k, ok := kindOf(req.Method); ok {
		return r.listAnswer(ctx, cat, req, k, meta, true, modernExtra(true)), nil
	}
	switch req.Method {
	case "server/discover":
		return r.discover(ctx, cat, req), nil
	case "tools/call", "prompts/get", "resources/read", "completion/complete":
		forward := func(ctx context.Context, m *member, req *jsonrpc.Message) (session.Call, error) {
			c, err := m.invoke(ctx, req)
			if err != nil {
				return failure(req, unavailable(m.name, err)), nil
			}
			return c, nil
		}
		return r.routeCall(ctx, cat, req, meta, forward, nil)
	}
	return failure(req, jsonrpc.Errorf(jsonrpc.MethodNotFound, "method not found: %s (not served by aggregated endpoints)", req.Method)), nil
}

// discover merges the servers' server/discover results. When no server
// answers, the error tells a dual-era client to fall back to initialize.
func (r *Router) discover(ctx context.Context, cat *catalog, req *jsonrpc.Message) session.Call {
	var caps []json.RawMessage
	var versions []string
	for _, res := range cat.fanOut(ctx, cat.members, req) {
		if res == nil {
			continue
		}
		caps = append(caps, jsonrpc.Member(res, "capabilities"))
		var sv []string
		_ = json.Unmarshal(jsonrpc.Member(res, "supportedVersions"), &sv)
		versions = append(versions, sv...)
	}
	if len(caps) == 0 {
		return failure(req, jsonrpc.Errorf(jsonrpc.MethodNotFound,
			"server/discover: no server of %s serves protocol %s; send initialize", r.viewLabel(), mcp.ModernVersion))
	}
	// Legacy versions are served through initialize whatever the servers do.
	versions = append(append(versions, mcp.LegacyVersions()...), mcp.ModernVersion)
	slices.Sort(versions)
	versions = slices.Compact(versions)
	slices.Reverse(versions)
	out := modernExtra(true)
	out["supportedVersions"] = versions
	out["capabilities"] = mergeCapabilities(caps, true) // list_changed travels on subscriptions/listen
	out["_meta"] = map[string]any{mcp.MetaServerInfo: r.serverInfo()}
	return result(req, jsonrpc.Marshal(out))
}

// ParamHeaders returns the x-mcp-header bindings of an exposed tool
// (streamable.Options.ParamHeaders): the aggregated front validates
// Mcp-Param-* headers of 2026-07-28 tools/call itself, since the servers
// behind it never see the client's headers. The tool is looked up in the
// last stateless listing (listed again when it is missing).
func (r *Router) ParamHeaders(ctx context.Context, req *jsonrpc.Message, tool string) ([]mcpheader.ParamBinding, error) {
	cat := r.stateless.Load()
	if cat == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	meta := jsonrpc.Member(req.Params, "_meta")
	raw, ok := cat.list(ctx, kTools, meta, false).byName[tool]
	if !ok {
		raw, ok = cat.list(ctx, kTools, meta, true).byName[tool]
	}
	if !ok {
		return nil, nil
	}
	return mcpheader.ExtractBindings(jsonrpc.Member(raw, "inputSchema")), nil
}
