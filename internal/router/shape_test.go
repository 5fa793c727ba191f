package router

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

func TestExposeNamesPerServerPolicy(t *testing.T) {
	its := []Item{
		{Server: "fs", Name: "read", Policy: PrefixNever},
		{Server: "memory", Name: "read", Policy: PrefixConflict},
		{Server: "memory", Name: "write", Policy: "", Prefix: "mem"},
		{Server: "web", Name: "fetch", Rename: "get_page"},
		{Server: "web", Name: "search"},
	}
	got, err := ExposeNames(PrefixAlways, its)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"read", "memory__read", "mem__write", "get_page", "web__search"}
	if !slices.Equal(got, want) {
		t.Errorf("ExposeNames = %q, want %q", got, want)
	}

	// A renamed tool takes a name a conflict-policy tool had: that one moves.
	got, err = ExposeNames(PrefixConflict, []Item{
		{Server: "a", Name: "find"},
		{Server: "b", Name: "lookup", Rename: "find"},
	})
	if err != nil || !slices.Equal(got, []string{"a__find", "find"}) {
		t.Errorf("rename over conflict = %q, %v", got, err)
	}

	// A renamed tool against a never-policy name: an error naming both.
	_, err = ExposeNames(PrefixNever, []Item{
		{Server: "a", Name: "find"},
		{Server: "b", Name: "lookup", Rename: "find"},
	})
	var ce *CollisionError
	if !errors.As(err, &ce) || ce.Name != "find" || ce.Server1 != "a" || ce.Server2 != "b" {
		t.Errorf("rename over never = %v", err)
	}
}

// shapedView is a namespace view with every kind of shaping.
func shapedView(t *testing.T) (*View, *fakeServer, *fakeServer) {
	t.Helper()
	l := &Layout{Names: []string{"a", "b"},
		Namespaces: map[string]*Namespace{
			"ns": {Servers: []string{"a", "b"}, Shape: Shaping{
				Prefixes: map[string]string{"a": PrefixNever, "b": "bee"},
				Overrides: map[string]map[string]*ToolOverride{"a": {
					"echo":   {Name: "say", Description: "Says it back.", Title: "Say", Annotations: map[string]any{"readOnlyHint": true}},
					"secret": {Hide: true},
				}},
			}},
			"other": {Servers: []string{"a"}},
		},
		Groups: map[string]*Group{"all": {Namespaces: []string{"ns"}}},
	}
	a := &fakeServer{name: "a", tools: []string{"echo", "secret", "add"}}
	b := &fakeServer{name: "b", tools: []string{"echo", "secret"}}
	views := Views(l, map[string]Server{"a": a, "b": b}, nil)
	return views["ns"], a, b
}

func TestShapingListsAndCalls(t *testing.T) {
	v, a, b := shapedView(t)
	be, _, _ := join(t, v, Options{})
	names, _ := listAll(t, be)
	want := []string{"say", "add", "bee__echo", "bee__secret"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %q, want %q", names, want)
	}
	res := lastResult(t, call(t, be, "tools/list", nil))
	var r struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	say := r.Tools[0]
	if string(say["description"]) != `"Says it back."` || string(say["title"]) != `"Say"` ||
		string(jsonrpc.Member(say["annotations"], "readOnlyHint")) != "true" {
		t.Errorf("say = %s", jsonrpc.Marshal(say))
	}
	if say["inputSchema"] == nil {
		t.Errorf("say lost its inputSchema: %s", jsonrpc.Marshal(say))
	}

	// The renamed tool by its new name reaches the server's own name.
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "say"})); got != "a:echo" {
		t.Errorf("call say = %q", got)
	}
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "bee__secret"})); got != "b:secret" {
		t.Errorf("call bee__secret = %q", got)
	}
	// The old name, the hidden tool and the unprefixed name are unknown.
	for _, name := range []string{"echo", "secret", "a__secret", "b__echo"} {
		msgs := call(t, be, "tools/call", map[string]any{"name": name})
		if e := msgs[len(msgs)-1].ErrorOf(); e == nil || e.Code != jsonrpc.InvalidParams {
			t.Errorf("call %s = %+v, want unknown tool", name, msgs[len(msgs)-1])
		}
	}
	for _, c := range a.seen() {
		if c == "tools/call secret" {
			t.Error("the hidden tool reached its server")
		}
	}
	_ = b
}

func TestShapingHideReachesGroups(t *testing.T) {
	v, _, _ := shapedView(t)
	if v.Admits("a", "secret") || !v.Admits("a", "echo") {
		t.Error("namespace view: secret should be hidden, echo shown")
	}
	cfgViews := func() map[string]*View {
		l := &Layout{Names: []string{"a"},
			Namespaces: map[string]*Namespace{"ns": {Servers: []string{"a"},
				Shape: Shaping{Overrides: map[string]map[string]*ToolOverride{"a": {"se*cret": {Hide: true}}}}}},
			Groups: map[string]*Group{"all": {Namespaces: []string{"ns"}}}}
		return Views(l, map[string]Server{"a": nameOnly("a")}, nil)
	}()
	for _, name := range []string{"all", ""} {
		if cfgViews[name].Admits("a", "se*cret") {
			t.Errorf("view %q shows the hidden tool", name)
		}
		if !cfgViews[name].Admits("a", "secret") {
			t.Errorf("view %q: a hidden glob-like name hid another tool", name)
		}
	}
}

func TestShapingUpdateNotifies(t *testing.T) {
	v, a, b := shapedView(t)
	r := New(v, Options{})
	down := newFakeDown()
	be, _, err := r.Join(t.Context(), down, initMsg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Leave)
	if names, _ := listAll(t, be); !slices.Contains(names, "say") {
		t.Fatalf("tools = %q", names)
	}
	v2 := *v
	v2.Shape = Shaping{}
	v2.Servers = []Server{a, b}
	r.Update(&v2)
	down.waitFor(t, "tools/list_changed", func(m *jsonrpc.Message) bool { return m.Method == "notifications/tools/list_changed" })
	names, _ := listAll(t, be)
	if !slices.Contains(names, "a__echo") || slices.Contains(names, "say") {
		t.Errorf("after update tools = %q", names)
	}
}
