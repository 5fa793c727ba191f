package router

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/config"
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

const viewsYAML = `
destinations:
  a: {type: stdio, command: [x]}
  b: {type: stdio, command: [x]}
  c: {type: stdio, command: [x]}
  d: {type: stdio, command: [x]}
  e: {type: stdio, command: [x]}
  loose: {type: stdio, command: [x]}
namespaces:
  dev:
    servers: [a, b]
    tool_prefix: conflict
    tools: {deny: ["*delete*"]}
  docs:
    servers: [c]
    extends: dev
  deep:
    servers: [d]
    extends: [docs]
  home:
    servers: [e]
    isolated: true
    tool_prefix: never
groups:
  all:
    namespaces: [docs, "!home"]
  plain:
    namespaces: [dev]
`

func loadViews(t *testing.T, yml string) (map[string]*View, string) {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]Server{}
	for _, n := range cfg.Names {
		servers[n] = nameOnly(n)
	}
	var logs bytes.Buffer
	return Views(cfg, servers, slog.New(slog.NewTextHandler(&logs, nil))), logs.String()
}

func serverNames(v *View) []string {
	var out []string
	for _, s := range v.Servers {
		out = append(out, s.Name())
	}
	return out
}

func TestViews(t *testing.T) {
	vs, logs := loadViews(t, viewsYAML)
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
	if vs["dev"].Prefix != config.ToolPrefixConflict || vs["home"].Prefix != config.ToolPrefixNever ||
		vs["docs"].Prefix != config.ToolPrefixAlways || vs["all"].Prefix != config.ToolPrefixAlways || vs[""].Prefix != config.ToolPrefixAlways {
		t.Error("prefix policies")
	}
	if !strings.Contains(logs, "isolated namespace") || !strings.Contains(logs, "namespace=home") {
		t.Errorf("no warning for the forced isolated namespace; log:\n%s", logs)
	}
}

func TestViewFilters(t *testing.T) {
	vs, _ := loadViews(t, viewsYAML)
	// dev's own view: its deny applies to all its tools.
	if vs["dev"].admits("a", "delete_repo") || !vs["dev"].admits("a", "create_repo") {
		t.Error("dev filter")
	}
	// docs extends dev but has no filter of its own.
	if !vs["docs"].admits("a", "delete_repo") {
		t.Error("docs should not inherit dev's filter")
	}
	// In a group, each namespace's filter applies to its servers; a server
	// reached through a namespace without a filter (docs → a) shows all.
	if !vs["all"].admits("a", "delete_repo") {
		t.Error("group all: a is reached through docs, unfiltered")
	}
	if vs["plain"].admits("a", "delete_repo") || !vs["plain"].admits("a", "read") {
		t.Error("group plain: dev's filter applies to a")
	}
	// The default view: dev's filter on a and b (also reached through docs
	// and deep, unfiltered: visible); loose is unfiltered.
	if !vs[""].admits("a", "delete_repo") || !vs[""].admits("loose", "delete_x") {
		t.Error("default view filters")
	}
}

func TestViewFiltersDefaultOnly(t *testing.T) {
	vs, _ := loadViews(t, `
destinations:
  a: {type: stdio, command: [x]}
  b: {type: stdio, command: [x]}
namespaces:
  ns:
    servers: [a]
    tools: {allow: ["a__read*"]}
`)
	def := vs[""]
	if got := serverNames(def); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("default view %v", got)
	}
	if !def.admits("a", "read_file") || def.admits("a", "write_file") || !def.admits("b", "write_file") {
		t.Error("the namespace filter applies to its servers in the default view, and only to them")
	}
}
