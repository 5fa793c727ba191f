package router

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
)

func codeView(t *testing.T, mode string) (*View, *fakeServer, *fakeServer) {
	t.Helper()
	v, a, b := shapedView(t)
	v.Meta = Meta{Search: true, CodeMode: mode, Sandbox: sandbox.Limits{Timeout: 5e9, Memory: 32 << 20, MaxCalls: 20, MaxOutput: 8 << 10, Concurrency: 2}}
	return v, a, b
}

func structured(t *testing.T, msgs []*jsonrpc.Message) map[string]any {
	t.Helper()
	var r struct {
		Structured map[string]any `json:"structuredContent"`
		IsError    bool           `json:"isError"`
	}
	if err := json.Unmarshal(lastResult(t, msgs), &r); err != nil {
		t.Fatal(err)
	}
	return r.Structured
}

func TestMetaToolsListed(t *testing.T) {
	v, _, _ := codeView(t, CodeModeOn)
	be, _, _ := join(t, v, Options{})
	names, _ := listAll(t, be)
	want := []string{"search", "inspect", "execute", "say", "add", "bee__echo", "bee__secret"}
	if !slices.Equal(names, want) {
		t.Errorf("code_mode true: tools = %q, want %q", names, want)
	}

	v, _, _ = codeView(t, CodeModeOnly)
	be, _, _ = join(t, v, Options{})
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"search", "inspect", "execute"}) {
		t.Errorf("code_mode only: tools = %q", names)
	}
	msgs := call(t, be, "tools/call", map[string]any{"name": "say"})
	if e := msgs[len(msgs)-1].ErrorOf(); e == nil || !strings.Contains(e.Message, "code_mode only") {
		t.Errorf("direct call under code_mode only = %+v", msgs[len(msgs)-1])
	}

	v, _, _ = codeView(t, CodeModeOff)
	v.Meta.Search = true
	be, _, _ = join(t, v, Options{})
	if names, _ := listAll(t, be); !slices.Equal(names[:2], []string{"search", "inspect"}) || slices.Contains(names, "execute") {
		t.Errorf("tool_search only: tools = %q", names)
	}
}

func TestMetaNameConflict(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"search", "x"}}
	v := &View{Name: "ns", Servers: []Server{a}, Prefix: PrefixConflict, Meta: Meta{Search: true}}
	be, _, _ := join(t, v, Options{})
	names, _ := listAll(t, be)
	if !slices.Equal(names, []string{"search", "inspect", "a__search", "x"}) {
		t.Errorf("tools = %q", names)
	}
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "a__search"})); got != "a:search" {
		t.Errorf("a__search = %q", got)
	}
}

func TestSearchAndInspect(t *testing.T) {
	v, _, _ := codeView(t, CodeModeOn)
	be, _, _ := join(t, v, Options{})
	s := structured(t, call(t, be, "tools/call", map[string]any{"name": "search", "arguments": map[string]any{"query": "says back"}}))
	res, _ := s["results"].([]any)
	if len(res) == 0 || res[0].(map[string]any)["name"] != "say" {
		t.Fatalf("search says back = %v", s)
	}
	if sc := res[0].(map[string]any)["script"].(map[string]any); sc["server"] != "a" || sc["tool"] != "say" {
		t.Errorf("script naming = %v", sc)
	}
	// The hidden tool is not in the manifest; meta-tools neither.
	s = structured(t, call(t, be, "tools/call", map[string]any{"name": "search", "arguments": map[string]any{"query": "secret execute"}}))
	for _, r := range s["results"].([]any) {
		if n := r.(map[string]any)["name"]; n != "bee__secret" {
			t.Errorf("search secret execute found %v", n)
		}
	}
	s = structured(t, call(t, be, "tools/call", map[string]any{"name": "inspect", "arguments": map[string]any{"names": []string{"say", "nope"}}}))
	tools := s["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["inputSchema"] == nil || tools[0].(map[string]any)["description"] != "Says it back." {
		t.Errorf("inspect = %v", s)
	}
	if u := s["unknown"].([]any); len(u) != 1 || u[0] != "nope" {
		t.Errorf("inspect unknown = %v", s["unknown"])
	}
}

func TestSearchFollowsListChanged(t *testing.T) {
	v, a, _ := codeView(t, CodeModeOn)
	be, _, down := join(t, v, Options{})
	search := func(q string) []any {
		s := structured(t, call(t, be, "tools/call", map[string]any{"name": "search", "arguments": map[string]any{"query": q}}))
		return s["results"].([]any)
	}
	if len(search("zebra")) != 0 {
		t.Fatal("zebra found before it exists")
	}
	a.setTools("echo", "zebra_stripes")
	a.mu.Lock()
	d := a.down
	a.mu.Unlock()
	d.Deliver(jsonrpc.NewNotification("notifications/tools/list_changed", nil))
	down.waitFor(t, "tools/list_changed", func(m *jsonrpc.Message) bool { return m.Method == "notifications/tools/list_changed" })
	if r := search("zebra"); len(r) != 1 || r[0].(map[string]any)["name"] != "zebra_stripes" {
		t.Errorf("after list_changed: %v", r)
	}
}

func TestExecuteRoutesAndAudits(t *testing.T) {
	v, a, b := codeView(t, CodeModeOnly)
	var mu sync.Mutex
	var recs []audit.Record
	be, _, _ := join(t, v, Options{Audit: func(r *audit.Record) { mu.Lock(); recs = append(recs, *r); mu.Unlock() }})
	run := func(script string) map[string]any {
		return structured(t, call(t, be, "tools/call", map[string]any{"name": "execute", "arguments": map[string]any{"script": script}}))
	}
	s := run(`const [x, y] = parallel([["a", "say", {}], {name: "bee__echo", args: {}}]); print(x); x + "|" + y + "|" + api.server("a").add({})`)
	if s["status"] != "ok" || s["result"] != "a:echo|b:echo|a:add" || s["stdout"] != "a:echo\n" {
		t.Fatalf("execute = %v", s)
	}
	if _, ok := s["execution_time_ms"].(float64); !ok {
		t.Errorf("no execution_time_ms: %v", s)
	}
	mu.Lock()
	n := len(recs)
	var tools []string
	for _, r := range recs {
		tools = append(tools, r.Destination+"."+r.Tool+"/"+r.Via)
	}
	mu.Unlock()
	slices.Sort(tools)
	if n != 3 || !slices.Equal(tools, []string{"a.add/execute", "a.echo/execute", "b.echo/execute"}) {
		t.Errorf("audit records = %q", tools)
	}

	// Hidden, renamed-away, outside the view, meta: permission errors.
	for _, script := range []string{`call_tool("a", "secret", {})`, `call_tool("a", "echo", {})`, `call_tool("c", "x", {})`, `call_tool("execute", {script: "1"})`} {
		s := run(script)
		if s["status"] != "error" || !strings.Contains(s["error"].(string), "PermissionError") {
			t.Errorf("%s = %v", script, s)
		}
	}
	for _, c := range a.seen() {
		if c == "tools/call secret" {
			t.Error("the hidden tool reached its server from a script")
		}
	}
	mu.Lock()
	refused := 0
	for _, r := range recs[n:] {
		if strings.HasPrefix(r.Error, "PermissionError: ") && r.Via == "execute" {
			refused++
		}
	}
	mu.Unlock()
	if refused != 4 {
		t.Errorf("%d refused calls audited, want 4", refused)
	}
	_ = b
	s = run(`for (let i = 0; i < 100; i++) call_tool("a", "add", {})`)
	if s["status"] != "error" || s["limit"] != "max_calls" {
		t.Errorf("max_calls = %v", s)
	}
}

// TestMetaStateless: the meta-tools serve 2026-07-28 requests too, and
// code_mode only holds there as well.
func TestMetaStateless(t *testing.T) {
	s := &modernServer{fakeServer: &fakeServer{name: "s", tools: []string{"x", "y"}}}
	r := New(&View{Name: "ns", Servers: []Server{s}, Meta: Meta{Search: true, CodeMode: CodeModeOnly,
		Sandbox: sandbox.Limits{Timeout: 5e9, Memory: 32 << 20, MaxCalls: 10, MaxOutput: 4096, Concurrency: 1}}}, Options{})
	res, err := r.Stateless(t.Context(), modernReq(1, "tools/list", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(lastResult(t, finish(t, res))); !strings.Contains(got, `"execute"`) || strings.Contains(got, "s__x") {
		t.Errorf("stateless tools/list under code_mode only = %s", got)
	}
	res, err = r.Stateless(t.Context(), modernReq(2, "tools/call", map[string]any{"name": "execute",
		"arguments": map[string]any{"script": `call_tool("s", "x", {}) + "," + call_tool("s__y", {})`}}))
	if err != nil {
		t.Fatal(err)
	}
	s2 := structured(t, finish(t, res))
	if s2["status"] != "ok" || s2["result"] != "s:x,s:y" {
		t.Errorf("stateless execute = %v", s2)
	}
	res, err = r.Stateless(t.Context(), modernReq(3, "tools/call", map[string]any{"name": "s__x"}))
	if err != nil {
		t.Fatal(err)
	}
	if m := finish(t, res); m[len(m)-1].ErrorOf() == nil {
		t.Error("a direct stateless call under code_mode only succeeded")
	}
}

// TestMetaDescribesTheView: execute's and search's descriptions name the
// view's own servers (and execute's its tools, as scripts name them, in
// its example too), a server outside the view raises a PermissionError
// naming those in it, and a search that matches nothing says so.
func TestMetaDescribesTheView(t *testing.T) {
	v, _, _ := codeView(t, CodeModeOn)
	be, _, _ := join(t, v, Options{})
	msgs := call(t, be, "tools/list", nil)
	var list struct {
		Tools []struct{ Name, Description string } `json:"tools"`
	}
	if err := json.Unmarshal(lastResult(t, msgs), &list); err != nil {
		t.Fatal(err)
	}
	desc := map[string]string{}
	for _, tl := range list.Tools {
		desc[tl.Name] = tl.Description
	}
	ex := desc["execute"]
	for _, want := range []string{"\n- a: say, add\n", "\n- b: echo, secret\n", `parallel([{server: "a", tool: "say", args: {}}, ["b", "echo", {}]])`} {
		if !strings.Contains(ex, want) {
			t.Errorf("execute's description lacks %q:\n%s", want, ex)
		}
	}
	for _, not := range []string{"everything", `"memory"`} {
		if strings.Contains(ex, not) {
			t.Errorf("execute's description names %q, not in the view:\n%s", not, ex)
		}
	}
	if s := desc["search"]; !strings.Contains(s, "(servers a, b)") {
		t.Errorf("search's description = %q", s)
	}

	s := structured(t, call(t, be, "tools/call", map[string]any{"name": "execute", "arguments": map[string]any{
		"script": `try { call_tool("everything", "echo", {}) } catch (e) { e.name + ": " + e.message }`}}))
	if got, _ := s["result"].(string); got != `PermissionError: server "everything" is not in view ns (its servers: a, b)` {
		t.Errorf("a server outside the view: %v", s)
	}

	s = structured(t, call(t, be, "tools/call", map[string]any{"name": "search", "arguments": map[string]any{"query": "zebra giraffe"}}))
	if note, _ := s["note"].(string); len(s["results"].([]any)) != 0 || !strings.Contains(note, `nothing matched "zebra giraffe"`) || !strings.Contains(note, "servers: a, b") {
		t.Errorf("a search matching nothing = %v", s)
	}
}

// TestExecuteBombIsAnError: a script that takes more memory than its
// worker may have ends with an isError result naming the limit, and the
// next script runs.
func TestExecuteBombIsAnError(t *testing.T) {
	v, _, _ := codeView(t, CodeModeOn)
	be, _, _ := join(t, v, Options{})
	msgs := call(t, be, "tools/call", map[string]any{"name": "execute", "arguments": map[string]any{"script": `new Uint8Array(2 ** 31).length`}})
	var r struct {
		Structured struct{ Status, Limit, Error string } `json:"structuredContent"`
		IsError    bool                                  `json:"isError"`
	}
	if err := json.Unmarshal(lastResult(t, msgs), &r); err != nil {
		t.Fatal(err)
	}
	if !r.IsError || r.Structured.Status != "error" || r.Structured.Limit != "memory" || !strings.HasPrefix(r.Structured.Error, "memory: ") {
		t.Errorf("a memory bomb: %+v", r)
	}
	if s := structured(t, call(t, be, "tools/call", map[string]any{"name": "execute", "arguments": map[string]any{"script": `call_tool("a", "say", {})`}})); s["result"] != "a:echo" {
		t.Errorf("the next script: %v", s)
	}
}
