package router

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/policy"
)

// Authorization inside a view. The caller's policy.Access comes in the
// request's context (policy.FromContext; the gateway's policy wrapper puts
// it there; none means everything). The router applies it where it knows
// which server an exposed name leads to: merged lists show only what the
// caller may reach and call, search and inspect likewise, and every tool
// call — a client's or a script's — is decided by Access.Decide. Names
// stay the view's: a client that may reach fewer servers sees fewer
// items, never other names.

// endpoint is the view as policy names it.
func (r *Router) endpoint() policy.Endpoint { return policy.ViewEndpoint(r.Name()) }

// serverOf is the destination an exposed item leads to ("" for a
// meta-tool).
func serverOf(rt route) string {
	if rt.m == nil {
		return ""
	}
	return rt.m.name
}

// readOnlyHint reports whether a tool's definition is annotated
// readOnlyHint: true.
func readOnlyHint(raw json.RawMessage) bool {
	return string(jsonrpc.Member(raw, "annotations", "readOnlyHint")) == "true"
}

// visible reports whether acc may see the item exposed as name in mg
// (a list of kind k): it may reach its server and, for a tool, call it.
func (r *Router) visible(acc *policy.Access, k kind, mg *merged, name string) bool {
	if acc == nil {
		return true
	}
	rt, ok := mg.routes[name]
	if !ok || !acc.MayReach(r.endpoint(), serverOf(rt)) {
		return false
	}
	return k != kTools || acc.Admits(name, readOnlyHint(mg.byName[name]))
}

// visibleItems filters a merged list's items to what acc may see.
func (r *Router) visibleItems(acc *policy.Access, k kind, mg *merged, items []json.RawMessage) []json.RawMessage {
	if acc == nil {
		return items
	}
	out := make([]json.RawMessage, 0, len(items))
	for _, raw := range items {
		if name, _ := jsonrpc.StringMember(raw, kinds[k].field); r.visible(acc, k, mg, name) {
			out = append(out, raw)
		}
	}
	return out
}

// decideTool is acc.Decide for a tool call routed to rt (exposed as
// name); charge takes a token of the caller's rate limit (a script's
// call). Nil: allowed.
func (r *Router) decideTool(ctx context.Context, acc *policy.Access, cat *catalog, rt route, name string, meta json.RawMessage, charge bool) *policy.Denial {
	if acc == nil {
		return nil
	}
	ro := false
	if acc.ReadOnly() {
		ro = readOnlyHint(cat.list(ctx, kTools, meta, false).byName[name])
	}
	return acc.Decide(policy.ToolCall{Endpoint: r.endpoint(), Server: serverOf(rt), Tool: name, ReadOnly: ro, Charge: charge})
}

// reachable keeps the members acc may reach.
func (r *Router) reachable(acc *policy.Access, ms []*member) []*member {
	if acc == nil {
		return ms
	}
	return slices.DeleteFunc(slices.Clone(ms), func(m *member) bool { return !acc.MayReach(r.endpoint(), m.name) })
}
