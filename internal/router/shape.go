package router

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
)

// Tool prefix policies (a view's Prefix, a namespace's ToolPrefix, an
// entry of Shaping.Prefixes).
const (
	PrefixAlways   = "always"   // every tool is exposed as server__tool ("" is the same)
	PrefixConflict = "conflict" // only tools whose names collide are prefixed
	PrefixNever    = "never"    // no prefix; a collision is an error
)

// Code modes of a namespace (Meta.CodeMode).
const (
	CodeModeOff  = ""     // no execute tool
	CodeModeOn   = "on"   // execute, search and inspect beside the tools
	CodeModeOnly = "only" // clients see just search, inspect and execute
)

// ToolOverride reshapes one tool of one server in a namespace. Empty
// fields leave the server's own value.
type ToolOverride struct {
	// Name is the name the tool is exposed under, as written: no prefix is
	// added. The server's own name no longer reaches it.
	Name string
	// Title and Description replace the server's.
	Title, Description string
	// Hide removes the tool from the namespace: it is not listed and cannot
	// be called, directly or from a script.
	Hide bool
	// Annotations are set on the tool's annotations, each key replacing
	// the server's value.
	Annotations map[string]any
}

// Shaping is how a namespace reshapes its servers' tools on its own
// endpoint (its prefix and overrides). Hidden tools are
// not here: Views turns them into Deny patterns, so they are gone wherever
// the namespace's filter applies (its groups and the default view too).
type Shaping struct {
	// Prefixes is the prefix policy per server: always, conflict, never,
	// or a custom prefix (always, with it instead of the server's name).
	Prefixes map[string]string
	// Overrides are by server, then the server's own tool name.
	Overrides map[string]map[string]*ToolOverride
}

// Meta are a namespace's meta-tools (search, inspect, execute).
type Meta struct {
	// Search adds search and inspect (tool_search, and always with code
	// mode).
	Search bool
	// CodeMode is CodeModeOff, CodeModeOn or CodeModeOnly.
	CodeMode string
	// Sandbox bounds execute's scripts (zero fields: sandbox.NewRunner's
	// defaults; the gateway passes the configuration's, defaults filled).
	Sandbox sandbox.Limits
}

// Item returns the naming item of a tool (tool true) or prompt name of
// server under the view's shaping (see ExposeNames).
func (v *View) Item(server, name string, tool bool) Item {
	it := Item{Server: server, Name: name}
	if p, ok := v.Shape.Prefixes[server]; ok {
		switch p {
		case PrefixAlways, PrefixConflict, PrefixNever:
			it.Policy = p
		default:
			it.Policy, it.Prefix = PrefixAlways, p
		}
	}
	if o := v.override(server, name); tool && o != nil && o.Name != "" {
		it.Rename = o.Name
	}
	return it
}

// shapedNames are the other names a tool filter matches a tool of server
// by in this view: its custom-prefixed name and its override's name.
func (v *View) shapedNames(server, name string) []string {
	var out []string
	if p, ok := v.Shape.Prefixes[server]; ok {
		switch p {
		case PrefixAlways, PrefixConflict, PrefixNever:
		default:
			out = append(out, Prefixed(p, name))
		}
	}
	if o := v.override(server, name); o != nil && o.Name != "" {
		out = append(out, o.Name)
	}
	return out
}

// override returns the override of a tool, or nil.
func (v *View) override(server, name string) *ToolOverride {
	return v.Shape.Overrides[server][name]
}

// hidePatterns are Deny patterns (path.Match, matched against
// {server}__{name} among others) for the tools a namespace hides.
func hidePatterns(ns *Namespace) []string {
	var out []string
	overrides := ns.Shape.Overrides
	for _, server := range slices.Sorted(maps.Keys(overrides)) {
		for _, tool := range slices.Sorted(maps.Keys(overrides[server])) {
			if overrides[server][tool].Hide {
				out = append(out, globEscape(server+Separator+tool))
			}
		}
	}
	return out
}

// globEscape quotes the metacharacters of path.Match.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// reshape applies a tool's override (title, description, annotations) to
// its listed JSON; the name is set by the caller.
func reshape(raw json.RawMessage, o *ToolOverride) json.RawMessage {
	if o == nil || (o.Title == "" && o.Description == "" && len(o.Annotations) == 0) {
		return raw
	}
	var tool map[string]json.RawMessage
	if json.Unmarshal(raw, &tool) != nil {
		return raw
	}
	if o.Title != "" {
		tool["title"] = jsonrpc.Quote(o.Title)
	}
	if o.Description != "" {
		tool["description"] = jsonrpc.Quote(o.Description)
	}
	if len(o.Annotations) > 0 {
		ann := map[string]json.RawMessage{}
		_ = json.Unmarshal(tool["annotations"], &ann)
		if ann == nil {
			ann = map[string]json.RawMessage{}
		}
		for k, v := range o.Annotations {
			ann[k] = jsonrpc.Marshal(v)
		}
		tool["annotations"] = jsonrpc.Marshal(ann)
	}
	return jsonrpc.Marshal(tool)
}

// sameShape reports whether two views shape tools alike.
func sameShape(a, b *View) bool {
	return reflect.DeepEqual(a.Shape, b.Shape) && reflect.DeepEqual(a.Meta, b.Meta)
}
