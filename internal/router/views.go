package router

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// View is one aggregated endpoint: the servers it merges and how their
// names are exposed.
type View struct {
	// Name is the namespace or group name; "" for the default view.
	Name string
	// Servers are merged in this order (lists are concatenated in it).
	Servers []Server
	// Prefix is the tool_prefix policy for tools and prompts:
	// PrefixAlways ("" too), Conflict or Never.
	Prefix string
	// Allow and Deny filter every tool of the view (a namespace's tools:).
	Allow, Deny []string
	// Filters holds per-server filters (groups and the default view: the
	// filter of each namespace a server is reached through). A server with
	// filters shows a tool when any of them admits it.
	Filters map[string][]Filter
	// Shape renames, re-describes, annotates and prefixes tools per server
	// (a namespace's own view only).
	Shape Shaping
	// Meta are the view's meta-tools (a namespace's own view only).
	Meta Meta
}

// Admits reports whether the view shows the tool name of server (its
// tools filters; names as the server gives them).
func (v *View) Admits(server, name string) bool {
	extra := v.shapedNames(server, name)
	if f := (Filter{Allow: v.Allow, Deny: v.Deny}); !f.Empty() && !admitted([]Filter{f}, server, name, extra...) {
		return false
	}
	return admitted(v.Filters[server], server, name)
}

// Layout is what the router knows of the configuration: the destinations,
// namespaces and groups its views are resolved from (the gateway fills it
// from the config file). The zero Layout has just the default view, empty.
type Layout struct {
	// Names are the destinations in file order: the default view's order.
	Names []string
	// Namespaces and Groups are by name; nil entries are not allowed.
	Namespaces map[string]*Namespace
	Groups     map[string]*Group
}

// Namespace is a named subset of destinations served as one view.
type Namespace struct {
	// Servers are its own destinations.
	Servers []string
	// Isolated keeps it out of the default view and out of the groups
	// that do not force it.
	Isolated bool
	// Extends names the namespaces whose servers are included too (a cycle
	// is cut).
	Extends []string
	// ToolPrefix is PrefixAlways ("" too), PrefixConflict or PrefixNever.
	ToolPrefix string
	// Tools filters every tool of the namespace (nothing: all shown).
	Tools Filter
	// Shape renames, re-describes, annotates, hides and prefixes tools per
	// server; a hidden tool is gone wherever the namespace's filter applies.
	Shape Shaping
	// ToolSearch adds the search and inspect meta-tools.
	ToolSearch bool
	// CodeMode is CodeModeOff (""), CodeModeOn or CodeModeOnly; any
	// but off adds search and inspect too.
	CodeMode string
	// Sandbox bounds code mode's scripts (unused when CodeMode is off).
	Sandbox sandbox.Limits
}

// Group is a named union of namespaces.
type Group struct {
	// Namespaces are its members.
	Namespaces []string
	// Forced are the isolated members it names on purpose (a warning is
	// logged for each).
	Forced []string
}

// NamespaceServers returns the destination names of a namespace: its own
// servers, then those of the namespaces it extends (recursively, in
// order), without repeats. Config validation has rejected cycles; a cycle
// is cut anyway.
func NamespaceServers(cfg *Layout, name string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		if seen["ns:"+n] {
			return
		}
		seen["ns:"+n] = true
		ns := cfg.Namespaces[n]
		if ns == nil {
			return
		}
		for _, s := range ns.Servers {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		for _, e := range ns.Extends {
			walk(e)
		}
	}
	walk(name)
	return out
}

// Views resolves every view of cfg, MCProxy-style:
//
//   - the default view ("" in the map): every destination that no namespace
//     lists, plus the servers of every non-isolated namespace;
//   - one view per namespace: its servers plus those of its extends, with
//     its tool_prefix and its tools filter;
//   - one view per group: the union of its namespaces' servers; isolated
//     namespaces are included only when written "!name" (a warning is
//     logged for each).
//
// Groups and the default view always prefix ({server}__{name}). Their tool
// filters are those of the contributing namespaces, each applied to that
// namespace's servers: a server reached through several namespaces shows a
// tool when any of them admits it; destinations in no namespace are not
// filtered.
//
// servers maps destination names to servers; names missing from it
// (disabled destinations) are skipped.
func Views(cfg *Layout, servers map[string]Server, log *slog.Logger) map[string]*View {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pick := func(names []string) []Server {
		var out []Server
		for _, n := range names {
			if s, ok := servers[n]; ok {
				out = append(out, s)
			}
		}
		return out
	}
	nsFilter := func(ns *Namespace) Filter {
		return Filter{Allow: ns.Tools.Allow, Deny: append(slices.Clip(ns.Tools.Deny), hidePatterns(ns)...)}
	}
	nsNames := slices.Sorted(maps.Keys(cfg.Namespaces))
	views := map[string]*View{}
	for _, n := range nsNames {
		ns := cfg.Namespaces[n]
		prefix := ns.ToolPrefix
		if prefix == "" {
			prefix = PrefixAlways
		}
		meta := Meta{Search: ns.ToolSearch || ns.CodeMode != CodeModeOff, CodeMode: ns.CodeMode}
		if ns.CodeMode != CodeModeOff {
			meta.Sandbox = ns.Sandbox
		}
		views[n] = &View{Name: n, Servers: pick(NamespaceServers(cfg, n)), Prefix: prefix,
			Allow: ns.Tools.Allow, Deny: nsFilter(ns).Deny, Shape: ns.Shape, Meta: meta}
	}

	// union merges the servers of namespaces into one ordered list with
	// per-server filters.
	union := func(order []string, filters map[string][]Filter, nss []string) []string {
		for _, n := range nss {
			ns := cfg.Namespaces[n]
			if ns == nil {
				continue
			}
			for _, s := range NamespaceServers(cfg, n) {
				if !slices.Contains(order, s) {
					order = append(order, s)
				}
				filters[s] = append(filters[s], nsFilter(ns))
			}
		}
		return order
	}

	for _, n := range slices.Sorted(maps.Keys(cfg.Groups)) {
		g := cfg.Groups[n]
		for _, f := range g.Forced {
			log.Warn("group includes an isolated namespace (\"!\" in its namespaces)", "group", n, "namespace", f)
		}
		filters := map[string][]Filter{}
		order := union(nil, filters, g.Namespaces)
		views[n] = &View{Name: n, Servers: pick(order), Prefix: PrefixAlways, Filters: filters}
	}

	// The default view: destinations in no namespace, then the servers of
	// every non-isolated namespace (in file order of destinations).
	inNS := map[string]bool{}
	for _, ns := range cfg.Namespaces {
		for _, s := range ns.Servers {
			inNS[s] = true
		}
	}
	filters := map[string][]Filter{}
	open := slices.DeleteFunc(slices.Clone(nsNames), func(n string) bool { return cfg.Namespaces[n].Isolated })
	included := union(nil, filters, open)
	order := slices.DeleteFunc(slices.Clone(cfg.Names), func(d string) bool { return inNS[d] && !slices.Contains(included, d) })
	views[""] = &View{Name: "", Servers: pick(order), Prefix: PrefixAlways, Filters: filters}
	return views
}

// Members returns the destination names each view of cfg merges, in
// order, by view name ("" the default view): what Views would build,
// without any server (for `switchboard check --explain-access`).
func Members(cfg *Layout) map[string][]string {
	servers := map[string]Server{}
	for _, n := range cfg.Names {
		servers[n] = namedServer(n)
	}
	out := map[string][]string{}
	for name, v := range Views(cfg, servers, nil) {
		out[name] = namesOf(v.Servers)
	}
	return out
}

// namedServer is a Server that is only a name (Members).
type namedServer string

func (n namedServer) Name() string { return string(n) }

func (n namedServer) Join(context.Context, upstream.Downstream, *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return nil, nil, fmt.Errorf("server %s: a name only", string(n))
}
