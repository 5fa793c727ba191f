package router

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// nameOnly is a Server that is never joined (resolution tests).
type nameOnly string

func (n nameOnly) Name() string { return string(n) }
func (n nameOnly) Join(context.Context, upstream.Downstream, *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	panic("not joined in this test")
}

// viewsLayout: namespaces dev (a, b; conflict; deny *delete*), docs (c,
// extends dev), deep (d, extends docs), home (e, isolated, never); groups
// all (docs, "!home") and plain (dev).
func viewsLayout() *Layout {
	return &Layout{
		Names: []string{"a", "b", "c", "d", "e", "loose"},
		Namespaces: map[string]*Namespace{
			"dev":  {Servers: []string{"a", "b"}, ToolPrefix: PrefixConflict, Tools: Filter{Deny: []string{"*delete*"}}},
			"docs": {Servers: []string{"c"}, Extends: []string{"dev"}},
			"deep": {Servers: []string{"d"}, Extends: []string{"docs"}},
			"home": {Servers: []string{"e"}, Isolated: true, ToolPrefix: PrefixNever},
		},
		Groups: map[string]*Group{
			"all":   {Namespaces: []string{"docs", "home"}, Forced: []string{"home"}},
			"plain": {Namespaces: []string{"dev"}},
		},
	}
}

func loadViews(t *testing.T, l *Layout) (map[string]*View, string) {
	t.Helper()
	servers := map[string]Server{}
	for _, n := range l.Names {
		servers[n] = nameOnly(n)
	}
	var logs bytes.Buffer
	return Views(l, servers, slog.New(slog.NewTextHandler(&logs, nil))), logs.String()
}

func serverNames(v *View) []string {
	var out []string
	for _, s := range v.Servers {
		out = append(out, s.Name())
	}
	return out
}

func TestViews(t *testing.T) {
	vs, logs := loadViews(t, viewsLayout())
	want := map[string][]string{
		"":      {"a", "b", "c", "d", "loose"}, // e is only in an isolated namespace
		"dev":   {"a", "b"},
		"docs":  {"c", "a", "b"},
		"deep":  {"d", "c", "a", "b"},
		"home":  {"e"},
		"all":   {"c", "a", "b", "e"},
		"plain": {"a", "b"},
	}
	if len(vs) != len(want) {
		t.Errorf("got %d views, want %d", len(vs), len(want))
	}
	for name, servers := range want {
		v := vs[name]
		if v == nil {
			t.Errorf("view %q missing", name)
			continue
		}
		if got := serverNames(v); !slices.Equal(got, servers) {
			t.Errorf("view %q: servers %v, want %v", name, got, servers)
		}
	}
	if vs["dev"].Prefix != PrefixConflict || vs["home"].Prefix != PrefixNever ||
		vs["docs"].Prefix != PrefixAlways || vs["all"].Prefix != PrefixAlways || vs[""].Prefix != PrefixAlways {
		t.Error("prefix policies")
	}
	if !strings.Contains(logs, "isolated namespace") || !strings.Contains(logs, "namespace=home") {
		t.Errorf("no warning for the forced isolated namespace; log:\n%s", logs)
	}
}

func TestViewFilters(t *testing.T) {
	vs, _ := loadViews(t, viewsLayout())
	// dev's own view: its deny applies to all its tools.
	if vs["dev"].Admits("a", "delete_repo") || !vs["dev"].Admits("a", "create_repo") {
		t.Error("dev filter")
	}
	// docs extends dev but has no filter of its own.
	if !vs["docs"].Admits("a", "delete_repo") {
		t.Error("docs should not inherit dev's filter")
	}
	// In a group, each namespace's filter applies to its servers; a server
	// reached through a namespace without a filter (docs → a) shows all.
	if !vs["all"].Admits("a", "delete_repo") {
		t.Error("group all: a is reached through docs, unfiltered")
	}
	if vs["plain"].Admits("a", "delete_repo") || !vs["plain"].Admits("a", "read") {
		t.Error("group plain: dev's filter applies to a")
	}
	// The default view: dev's filter on a and b (also reached through docs
	// and deep, unfiltered: visible); loose is unfiltered.
	if !vs[""].Admits("a", "delete_repo") || !vs[""].Admits("loose", "delete_x") {
		t.Error("default view filters")
	}
}

func TestViewFiltersDefaultOnly(t *testing.T) {
	vs, _ := loadViews(t, &Layout{Names: []string{"a", "b"},
		Namespaces: map[string]*Namespace{"ns": {Servers: []string{"a"}, Tools: Filter{Allow: []string{"a__read*"}}}}})
	def := vs[""]
	if got := serverNames(def); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("default view %v", got)
	}
	if !def.Admits("a", "read_file") || def.Admits("a", "write_file") || !def.Admits("b", "write_file") {
		t.Error("the namespace filter applies to its servers in the default view, and only to them")
	}
}
