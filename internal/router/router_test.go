package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// fakeServer is an in-memory Server: it lists its tools two per page,
// answers tools/call with "<server>:<name>", and for the tool "ask" first
// sends a server→client request (id 7) on the call's stream.
type fakeServer struct {
	name    string
	caps    string
	joinErr error

	mu        sync.Mutex
	tools     []string
	down      upstream.Downstream
	calls     []string // methods and names seen
	responded []*jsonrpc.Message
	notified  []*jsonrpc.Message
	left      bool
	inits     []*jsonrpc.Message // the initialize of each join
}

func (f *fakeServer) Name() string { return f.name }

func (f *fakeServer) Join(_ context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	if f.joinErr != nil {
		return nil, nil, f.joinErr
	}
	f.mu.Lock()
	f.down = down
	f.inits = append(f.inits, init)
	f.mu.Unlock()
	caps := f.caps
	if caps == "" {
		caps = `{"tools":{},"prompts":{},"logging":{}}`
	}
	res := fmt.Sprintf(`{"protocolVersion":"2025-06-18","capabilities":%s,"serverInfo":{"name":%q,"version":"1"},"instructions":"I am %s."}`, caps, f.name, f.name)
	return &fakeBackend{f}, jsonrpc.NewResult(init.ID, json.RawMessage(res)), nil
}

func (f *fakeServer) setTools(tools ...string) {
	f.mu.Lock()
	f.tools = tools
	f.mu.Unlock()
}

func (f *fakeServer) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

type fakeBackend struct{ f *fakeServer }

func (b *fakeBackend) Call(_ context.Context, req *jsonrpc.Message) (session.Call, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	name, _ := jsonrpc.StringMember(req.Params, "name")
	f.calls = append(f.calls, strings.TrimSpace(req.Method+" "+name))
	switch req.Method {
	case "tools/list":
		off := 0
		if c, ok := jsonrpc.StringMember(req.Params, "cursor"); ok {
			off, _ = strconv.Atoi(strings.TrimPrefix(c, "up"))
		}
		end := min(off+2, len(f.tools))
		var items []map[string]any
		for _, t := range f.tools[off:end] {
			items = append(items, map[string]any{"name": t, "inputSchema": map[string]any{"type": "object"}})
		}
		res := map[string]any{"tools": items}
		if end < len(f.tools) {
			res["nextCursor"] = "up" + strconv.Itoa(end)
		}
		return session.NewAnswer(jsonrpc.NewResult(req.ID, jsonrpc.Marshal(res))), nil
	case "prompts/list":
		return session.NewAnswer(jsonrpc.NewResult(req.ID, json.RawMessage(`{"prompts":[{"name":"greet"}]}`))), nil
	case "tools/call":
		text := jsonrpc.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": f.name + ":" + name}}})
		if name == "ask" {
			ask := jsonrpc.NewRequest(jsonrpc.IntID(7), "sampling/createMessage", json.RawMessage(`{}`))
			return session.NewAnswer(ask, jsonrpc.NewResult(req.ID, text)), nil
		}
		return session.NewAnswer(jsonrpc.NewResult(req.ID, text)), nil
	case "logging/setLevel":
		return session.NewAnswer(jsonrpc.NewResult(req.ID, nil)), nil
	}
	return session.NewAnswer(jsonrpc.NewError(req.ID, jsonrpc.Errorf(jsonrpc.MethodNotFound, "no %s", req.Method))), nil
}

func (b *fakeBackend) Notify(_ context.Context, n *jsonrpc.Message) error {
	b.f.mu.Lock()
	b.f.notified = append(b.f.notified, n)
	b.f.mu.Unlock()
	return nil
}

func (b *fakeBackend) Respond(_ context.Context, r *jsonrpc.Message) error {
	b.f.mu.Lock()
	b.f.responded = append(b.f.responded, r)
	b.f.mu.Unlock()
	return nil
}

func (b *fakeBackend) Leave() {
	b.f.mu.Lock()
	b.f.left = true
	b.f.mu.Unlock()
}

// fakeDown records what the router sends the client outside calls.
type fakeDown struct {
	mu    sync.Mutex
	msgs  []*jsonrpc.Message
	ended error
	sig   chan struct{}
}

func newFakeDown() *fakeDown { return &fakeDown{sig: make(chan struct{}, 100)} }

func (d *fakeDown) Deliver(m *jsonrpc.Message) {
	d.mu.Lock()
	d.msgs = append(d.msgs, m)
	d.mu.Unlock()
	d.sig <- struct{}{}
}

func (d *fakeDown) End(err error) {
	d.mu.Lock()
	d.ended = err
	d.mu.Unlock()
	d.sig <- struct{}{}
}

// waitFor waits until a delivered message satisfies pred.
func (d *fakeDown) waitFor(t *testing.T, what string, pred func(*jsonrpc.Message) bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		d.mu.Lock()
		for _, m := range d.msgs {
			if pred(m) {
				d.mu.Unlock()
				return
			}
		}
		d.mu.Unlock()
		select {
		case <-d.sig:
		case <-deadline:
			t.Fatalf("no %s delivered", what)
		}
	}
}

var initMsg = jsonrpc.NewRequest(jsonrpc.IntID(0), "initialize",
	json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}`))

func join(t *testing.T, view *View, opts Options) (session.Backend, *jsonrpc.Message, *fakeDown) {
	t.Helper()
	down := newFakeDown()
	b, res, err := New(view, opts).Join(context.Background(), down, initMsg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Leave)
	return b, res, down
}

var nextID int64

// call sends a request and reads the call to its end.
func call(t *testing.T, b session.Backend, method string, params any) []*jsonrpc.Message {
	t.Helper()
	nextID++
	var p json.RawMessage
	if params != nil {
		p = jsonrpc.Marshal(params)
	}
	c, err := b.Call(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(nextID), method, p))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs, err := drainAll(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return msgs
}

func lastResult(t *testing.T, msgs []*jsonrpc.Message) json.RawMessage {
	t.Helper()
	m := msgs[len(msgs)-1]
	if e := m.ErrorOf(); e != nil {
		t.Fatalf("error response: %v", e)
	}
	return m.Result
}

// listAll pages through tools/list and returns the names.
func listAll(t *testing.T, b session.Backend) (names []string, pages int) {
	t.Helper()
	params := map[string]any{}
	for {
		pages++
		res := lastResult(t, call(t, b, "tools/list", params))
		var r struct {
			Tools      []struct{ Name string } `json:"tools"`
			NextCursor string                  `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			t.Fatal(err)
		}
		for _, tl := range r.Tools {
			names = append(names, tl.Name)
		}
		if r.NextCursor == "" {
			return names, pages
		}
		params = map[string]any{"cursor": r.NextCursor}
	}
}

func toolText(t *testing.T, msgs []*jsonrpc.Message) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(lastResult(t, msgs), &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

func TestRouterInitialize(t *testing.T) {
	a := &fakeServer{name: "a", caps: `{"tools":{"listChanged":false},"resources":{"subscribe":true}}`}
	b := &fakeServer{name: "b", caps: `{"prompts":{},"logging":{},"completions":{}}`}
	_, res, _ := join(t, &View{Name: "ns", Servers: []Server{a, b}}, Options{Version: "9.9"})
	var r struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      map[string]string          `json:"serverInfo"`
		Instructions    string                     `json:"instructions"`
	}
	if err := json.Unmarshal(res.Result, &r); err != nil {
		t.Fatal(err)
	}
	if r.ProtocolVersion != "2025-11-25" || r.ServerInfo["name"] != "switchboard" || r.ServerInfo["version"] != "9.9" {
		t.Errorf("initialize result %s", res.Result)
	}
	want := map[string]string{
		"tools": `{"listChanged":true}`, "prompts": `{"listChanged":true}`,
		"resources": `{"listChanged":true,"subscribe":true}`, "logging": `{}`, "completions": `{}`,
	}
	for k, v := range want {
		if string(r.Capabilities[k]) != v {
			t.Errorf("capabilities.%s = %s, want %s", k, r.Capabilities[k], v)
		}
	}
	if !strings.Contains(r.Instructions, "## a\nI am a.") || !strings.Contains(r.Instructions, "## b\nI am b.") {
		t.Errorf("instructions %q", r.Instructions)
	}
	// An unknown requested version gets the latest.
	down := newFakeDown()
	init := jsonrpc.NewRequest(jsonrpc.IntID(1), "initialize", json.RawMessage(`{"protocolVersion":"1999-01-01"}`))
	_, res, err := New(&View{Servers: []Server{a}}, Options{}).Join(context.Background(), down, init)
	if err != nil || jsonrpc.Member(res.Result, "protocolVersion") == nil || string(jsonrpc.Member(res.Result, "protocolVersion")) != `"2025-11-25"` {
		t.Errorf("negotiation: %v %v", res, err)
	}
}

func TestRouterMergePageRoute(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"echo", "add", "a1", "a2", "a3"}}
	b := &fakeServer{name: "b", tools: []string{"echo", "b1"}}
	be, _, _ := join(t, &View{Servers: []Server{a, b}, Prefix: PrefixConflict}, Options{PageSize: 3})
	names, pages := listAll(t, be)
	want := []string{"a__echo", "add", "a1", "a2", "a3", "b__echo", "b1"}
	if !slices.Equal(names, want) || pages != 3 {
		t.Errorf("tools = %v in %d pages, want %v in 3", names, pages, want)
	}
	// The upstream lists were followed to their end (a: 3 pages of 2).
	if got := strings.Count(strings.Join(a.seen(), ","), "tools/list"); got != 3 {
		t.Errorf("server a was listed with %d requests, want 3 (one per upstream page): %v", got, a.seen())
	}
	// Cached: a second walk asks nobody.
	listAll(t, be)
	if got := strings.Count(strings.Join(a.seen(), ","), "tools/list"); got != 3 {
		t.Errorf("the merged list was not cached: %v", a.seen())
	}
	for exposed, want := range map[string]string{"a__echo": "a:echo", "b__echo": "b:echo", "b1": "b:b1", "a3": "a:a3"} {
		if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": exposed})); got != want {
			t.Errorf("tools/call %s = %q, want %q", exposed, got, want)
		}
	}
	// A bad cursor is -32602.
	msgs := call(t, be, "tools/list", map[string]any{"cursor": "bogus"})
	if e := msgs[0].ErrorOf(); e == nil || e.Code != jsonrpc.InvalidParams {
		t.Errorf("bad cursor: %v", msgs[0])
	}
	// Unknown tools and methods.
	if e := call(t, be, "tools/call", map[string]any{"name": "zzz"})[0].ErrorOf(); e == nil || e.Code != jsonrpc.InvalidParams {
		t.Errorf("unknown tool: %v", e)
	}
	if e := call(t, be, "tasks/list", nil)[0].ErrorOf(); e == nil || e.Code != jsonrpc.MethodNotFound {
		t.Errorf("unknown method: %v", e)
	}
	// Prompts are prefixed under the same policy (both have greet).
	res := lastResult(t, call(t, be, "prompts/list", nil))
	if !strings.Contains(string(res), `"a__greet"`) || !strings.Contains(string(res), `"b__greet"`) {
		t.Errorf("prompts/list = %s", res)
	}
}

func TestRouterNewToolWithoutListChanged(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	be, _, _ := join(t, &View{Servers: []Server{a}}, Options{})
	listAll(t, be)
	a.setTools("x", "y")
	// A name missing from the cached list makes the router list again once.
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "a__y"})); got != "a:y" {
		t.Errorf("a__y = %q", got)
	}
}

func TestRouterServerRequestIDs(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"ask"}}
	b := &fakeServer{name: "b", tools: []string{"ask"}}
	be, _, down := join(t, &View{Servers: []Server{a, b}}, Options{})
	ma := call(t, be, "tools/call", map[string]any{"name": "a__ask"})
	mb := call(t, be, "tools/call", map[string]any{"name": "b__ask"})
	if len(ma) != 2 || len(mb) != 2 || !ma[0].IsRequest() || !mb[0].IsRequest() {
		t.Fatalf("want a server request then the response: %v / %v", ma, mb)
	}
	if string(ma[0].ID) == string(mb[0].ID) {
		t.Fatalf("both servers' request id 7 reached the client as %s: not router-unique", ma[0].ID)
	}
	// The client answers b's first: it reaches b under b's own id.
	for _, m := range []*jsonrpc.Message{mb[0], ma[0]} {
		if err := be.Respond(context.Background(), jsonrpc.NewResult(m.ID, json.RawMessage(`{"ok":true}`))); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []*fakeServer{a, b} {
		f.mu.Lock()
		if len(f.responded) != 1 || string(f.responded[0].ID) != "7" {
			t.Errorf("server %s got responses %v, want one with id 7", f.name, f.responded)
		}
		f.mu.Unlock()
	}
	// A request the server sends outside any call goes through the
	// downstream with a router id too, and the server cancelling it names
	// that id.
	b.mu.Lock()
	bd := b.down
	b.mu.Unlock()
	bd.Deliver(jsonrpc.NewRequest(jsonrpc.IntID(7), "roots/list", nil))
	var rid json.RawMessage
	down.waitFor(t, "roots/list", func(m *jsonrpc.Message) bool {
		if m.Method == "roots/list" {
			rid = m.ID
			return true
		}
		return false
	})
	if string(rid) == "7" {
		t.Errorf("roots/list kept the server's id")
	}
	bd.Deliver(jsonrpc.NewNotification("notifications/cancelled", json.RawMessage(`{"requestId":7}`)))
	down.waitFor(t, "cancellation", func(m *jsonrpc.Message) bool {
		return m.Method == "notifications/cancelled" && string(jsonrpc.Member(m.Params, "requestId")) == string(rid)
	})
	// An answer to an unknown id is dropped.
	if err := be.Respond(context.Background(), jsonrpc.NewResult(json.RawMessage("12345"), nil)); err != nil {
		t.Error(err)
	}
}

func TestRouterListChanged(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	b := &fakeServer{name: "b", tools: []string{"y"}}
	be, _, down := join(t, &View{Servers: []Server{a, b}}, Options{})
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x", "b__y"}) {
		t.Fatalf("tools %v", names)
	}
	b.setTools("y", "z")
	b.mu.Lock()
	bd := b.down
	b.mu.Unlock()
	bd.Deliver(jsonrpc.NewNotification("notifications/tools/list_changed", nil))
	down.waitFor(t, "tools/list_changed", func(m *jsonrpc.Message) bool { return m.Method == "notifications/tools/list_changed" })
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x", "b__y", "b__z"}) {
		t.Errorf("tools after list_changed = %v", names)
	}
	// Other notifications pass through.
	bd.Deliver(jsonrpc.NewNotification("notifications/message", json.RawMessage(`{"level":"info","data":"hi"}`)))
	down.waitFor(t, "log message", func(m *jsonrpc.Message) bool { return m.Method == "notifications/message" })
}

func TestRouterUnavailable(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	bad := &fakeServer{name: "bad", joinErr: errors.New("boom")}
	be, _, down := join(t, &View{Servers: []Server{a, bad}}, Options{})
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x"}) {
		t.Errorf("tools %v", names)
	}
	e := call(t, be, "tools/call", map[string]any{"name": "bad__x"})[0].ErrorOf()
	if e == nil || !strings.Contains(e.Message, "bad") || !strings.Contains(e.Message, "boom") {
		t.Errorf("call to the failed server: %v", e)
	}
	// The code of the server's own endpoint (mcp.FaultCode), naming it.
	if e == nil || e.Code != mcp.CodeUpstreamUnavailable || string(jsonrpc.Member(e.Data, "server")) != `"bad"` {
		t.Errorf("call to the failed server: %+v, want -32000 with data.server", e)
	}
	// A member that ends later: its tools go, the client is told, its calls
	// fail naming it; when the last member ends, the session ends.
	a.mu.Lock()
	ad := a.down
	a.mu.Unlock()
	ad.End(errors.New("crashed"))
	down.mu.Lock()
	ended := down.ended
	down.mu.Unlock()
	if ended == nil {
		t.Error("the last member ended but the session did not")
	}
	e = call(t, be, "tools/call", map[string]any{"name": "a__x"})[0].ErrorOf()
	if e == nil || !strings.Contains(e.Message, "server a is unavailable") {
		t.Errorf("call to an ended member: %v", e)
	}
	// Every server failing fails the join.
	_, _, err := New(&View{Servers: []Server{bad}}, Options{}).Join(context.Background(), newFakeDown(), initMsg)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("join with every server failing: %v", err)
	}
}

func TestRouterMemberEndNotifies(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	b := &fakeServer{name: "b", tools: []string{"y"}}
	be, _, down := join(t, &View{Servers: []Server{a, b}}, Options{})
	listAll(t, be)
	b.mu.Lock()
	bd := b.down
	b.mu.Unlock()
	bd.End(errors.New("gone"))
	down.waitFor(t, "tools/list_changed", func(m *jsonrpc.Message) bool { return m.Method == "notifications/tools/list_changed" })
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x"}) {
		t.Errorf("tools after b ended = %v", names)
	}
}

func TestRouterFanOutAndNotify(t *testing.T) {
	a := &fakeServer{name: "a"}
	b := &fakeServer{name: "b", caps: `{"tools":{}}`} // no logging
	be, _, _ := join(t, &View{Servers: []Server{a, b}}, Options{})
	lastResult(t, call(t, be, "logging/setLevel", map[string]any{"level": "debug"}))
	if !slices.Contains(a.seen(), "logging/setLevel") || slices.Contains(b.seen(), "logging/setLevel") {
		t.Errorf("setLevel reached a: %v, b: %v; want a only", a.seen(), b.seen())
	}
	if e := call(t, be, "logging/setLevel", map[string]any{"level": "loud"})[0].ErrorOf(); e == nil || e.Code != jsonrpc.InvalidParams {
		t.Errorf("invalid level: %v", e)
	}
	lastResult(t, call(t, be, "ping", nil))
	_ = be.Notify(context.Background(), jsonrpc.NewNotification("notifications/initialized", nil))
	_ = be.Notify(context.Background(), jsonrpc.NewNotification("notifications/cancelled", json.RawMessage(`{"requestId":3}`)))
	for _, f := range []*fakeServer{a, b} {
		f.mu.Lock()
		if len(f.notified) != 1 || f.notified[0].Method != "notifications/cancelled" {
			t.Errorf("server %s got notifications %v, want the cancellation only", f.name, f.notified)
		}
		f.mu.Unlock()
	}
	be.Leave()
	if !a.left || !b.left {
		t.Error("Leave did not leave every member")
	}
}

func TestRouterNeverCollision(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"echo"}}
	b := &fakeServer{name: "b", tools: []string{"echo"}}
	be, _, _ := join(t, &View{Name: "strict", Servers: []Server{a, b}, Prefix: PrefixNever}, Options{})
	e := call(t, be, "tools/list", nil)[0].ErrorOf()
	if e == nil || !strings.Contains(e.Message, `"echo"`) || !strings.Contains(e.Message, "a and b") {
		t.Errorf("collision under never: %v", e)
	}
}

func TestRouterFilters(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"read", "delete"}}
	b := &fakeServer{name: "b", tools: []string{"read", "delete"}}
	view := &View{Servers: []Server{a, b}, Deny: []string{"*delete*"},
		Filters: map[string][]Filter{"b": {{Allow: []string{"b__read"}}}}}
	be, _, _ := join(t, view, Options{})
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__read", "b__read"}) {
		t.Errorf("filtered tools = %v", names)
	}
	if e := call(t, be, "tools/call", map[string]any{"name": "a__delete"})[0].ErrorOf(); e == nil {
		t.Error("a filtered tool could be called")
	}
}
