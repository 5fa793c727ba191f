package router

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// gatedServer is a fakeServer whose tool "slow" answers only once release
// is closed, and whose Join, when joinGate is set, signals entered and
// waits for joinGate.
type gatedServer struct {
	*fakeServer
	release  chan struct{}
	joinGate chan struct{}
	entered  chan struct{}
}

func newGated(t *testing.T, name string, tools ...string) *gatedServer {
	g := &gatedServer{fakeServer: &fakeServer{name: name, tools: tools}, release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	})
	return g
}

func (g *gatedServer) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	if g.joinGate != nil {
		g.entered <- struct{}{}
		select {
		case <-g.joinGate:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	b, res, err := g.fakeServer.Join(ctx, down, init)
	if err != nil {
		return nil, nil, err
	}
	return &gatedBackend{Backend: b, g: g}, res, nil
}

type gatedBackend struct {
	session.Backend
	g *gatedServer
}

func (b *gatedBackend) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	name, _ := jsonrpc.StringMember(req.Params, "name")
	if req.Method != "tools/call" || name != "slow" {
		return b.Backend.Call(ctx, req)
	}
	q := jsonrpc.NewQueue(10)
	go func() {
		<-b.g.release
		text := jsonrpc.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": b.g.name + ":slow"}}})
		q.Push(jsonrpc.NewResult(req.ID, text), true)
		q.Close()
	}()
	return &queueCall{q: q}, nil
}

// queueCall is a call whose messages a test pushes; Abandon closes it (as
// an upstream call's does).
type queueCall struct {
	q         *jsonrpc.Queue
	abandoned atomic.Bool
	long      bool
}

func (c *queueCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *queueCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *queueCall) LongLived() bool                { return c.long }
func (c *queueCall) Abandon(bool) {
	c.abandoned.Store(true)
	c.q.Close()
}

// open joins a client session to r.
func open(t *testing.T, r *Router) (session.Backend, *fakeDown) {
	t.Helper()
	down := newFakeDown()
	b, _, err := r.Join(context.Background(), down, initMsg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Leave)
	return b, down
}

// delivered returns the methods delivered to the client so far.
func (d *fakeDown) delivered() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, m := range d.msgs {
		out = append(out, m.Method)
	}
	return out
}

func countOf(ms []string, m string) int {
	n := 0
	for _, x := range ms {
		if x == m {
			n++
		}
	}
	return n
}

const (
	toolsChanged     = "notifications/tools/list_changed"
	promptsChanged   = "notifications/prompts/list_changed"
	resourcesChanged = "notifications/resources/list_changed"
)

// wantNotified checks the list_changed notifications delivered so far.
func wantNotified(t *testing.T, d *fakeDown, tools, prompts, resources int) {
	t.Helper()
	got := d.delivered()
	if countOf(got, toolsChanged) != tools || countOf(got, promptsChanged) != prompts || countOf(got, resourcesChanged) != resources {
		t.Errorf("delivered %v, want %d tools, %d prompts, %d resources list_changed", got, tools, prompts, resources)
	}
}

func (f *fakeServer) state() (joins int, left bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inits), f.left
}

// startCall sends a request and returns its call without reading it.
func startCall(t *testing.T, b session.Backend, method string, params any) session.Call {
	t.Helper()
	nextID++
	c, err := b.Call(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(nextID), method, jsonrpc.Marshal(params)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func finish(t *testing.T, c session.Call) []*jsonrpc.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs, err := drainAll(ctx, c)
	if err != nil {
		t.Fatalf("call did not end: %v", err)
	}
	return msgs
}

func TestUpdateAddServer(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	b := &fakeServer{name: "b", tools: []string{"y"}, caps: `{"tools":{},"resources":{}}`}
	r := New(&View{Name: "ns", Servers: []Server{a}}, Options{})
	be, down := open(t, r)
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x"}) {
		t.Fatalf("tools %v", names)
	}
	r.Update(&View{Name: "ns", Servers: []Server{a, b}})
	// b offers tools and resources (no prompts): one of each, no prompts.
	wantNotified(t, down, 1, 0, 1)
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x", "b__y"}) {
		t.Errorf("tools after the update = %v", names)
	}
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "b__y"})); got != "b:y" {
		t.Errorf("b__y = %q", got)
	}
	// b was joined with the client's own initialize; a was left alone.
	b.mu.Lock()
	inits := slices.Clone(b.inits)
	b.mu.Unlock()
	if len(inits) != 1 || string(inits[0].Params) != string(initMsg.Params) {
		t.Errorf("b joined with %v, want the client's initialize", inits)
	}
	if joins, left := a.state(); joins != 1 || left {
		t.Errorf("a: %d joins, left %v; want untouched", joins, left)
	}
	// New sessions get the new view.
	be2, _ := open(t, r)
	if names, _ := listAll(t, be2); !slices.Equal(names, []string{"a__x", "b__y"}) {
		t.Errorf("tools of a new session = %v", names)
	}
}

func TestUpdateRemoveServer(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	b := newGated(t, "b", "y", "slow")
	r := New(&View{Servers: []Server{a, b}}, Options{})
	be, down := open(t, r)
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x", "b__y", "b__slow"}) {
		t.Fatalf("tools %v", names)
	}
	inflight := startCall(t, be, "tools/call", map[string]any{"name": "b__slow"})

	r.Update(&View{Servers: []Server{a}})
	wantNotified(t, down, 1, 1, 0) // b offered tools and prompts
	if _, left := b.state(); !left {
		t.Error("b's member was not left")
	}
	// The call in flight to b fails, naming it.
	msgs := finish(t, inflight)
	e := msgs[len(msgs)-1].ErrorOf()
	if e == nil || !strings.Contains(e.Message, "server b is unavailable") || !strings.Contains(e.Message, "reload") {
		t.Errorf("call in flight to the removed server: %v", msgs[len(msgs)-1])
	}
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x"}) {
		t.Errorf("tools after the update = %v", names)
	}
	if e := call(t, be, "tools/call", map[string]any{"name": "b__y"})[0].ErrorOf(); e == nil {
		t.Error("a tool of the removed server can still be called")
	}
	// The session goes on with a.
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "a__x"})); got != "a:x" {
		t.Errorf("a__x = %q", got)
	}
	down.mu.Lock()
	ended := down.ended
	down.mu.Unlock()
	if ended != nil {
		t.Errorf("the session ended: %v", ended)
	}
}

func TestUpdateReplaceServer(t *testing.T) {
	a1 := &fakeServer{name: "a", tools: []string{"x"}}
	a2 := &fakeServer{name: "a", tools: []string{"x", "z"}}
	b := &fakeServer{name: "b", tools: []string{"y"}}
	r := New(&View{Servers: []Server{a1, b}}, Options{})
	be, down := open(t, r)
	listAll(t, be)
	r.Update(&View{Servers: []Server{a2, b}})
	wantNotified(t, down, 1, 1, 0)
	if _, left := a1.state(); !left {
		t.Error("the old a was not left")
	}
	if joins, _ := a2.state(); joins != 1 {
		t.Errorf("the new a was joined %d times", joins)
	}
	if joins, left := b.state(); joins != 1 || left {
		t.Errorf("b: %d joins, left %v; want untouched", joins, left)
	}
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x", "a__z", "b__y"}) {
		t.Errorf("tools after the update = %v", names)
	}
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "a__z"})); got != "a:z" {
		t.Errorf("a__z = %q", got)
	}
	// The old server closing later (the gateway closes a replaced
	// destination after the swap) changes nothing for the session.
	a1.mu.Lock()
	d1 := a1.down
	a1.mu.Unlock()
	d1.End(upstream.ErrClosed)
	wantNotified(t, down, 1, 1, 0)
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "a__x"})); got != "a:x" {
		t.Errorf("a__x after the old server ended = %q", got)
	}
}

func TestUpdateUnchanged(t *testing.T) {
	a := newGated(t, "a", "x", "slow")
	b := &fakeServer{name: "b", tools: []string{"y"}}
	view := &View{Servers: []Server{a, b}, Prefix: PrefixConflict, Deny: []string{"*secret*"},
		Filters: map[string][]Filter{"b": {{Allow: []string{"*"}}}}}
	r := New(view, Options{})
	be, down := open(t, r)
	listAll(t, be)
	lists := countOf(a.seen(), "tools/list")
	inflight := startCall(t, be, "tools/call", map[string]any{"name": "slow"})

	// A new View object with the same servers, policy and filters.
	same := &View{Servers: []Server{a, b}, Prefix: PrefixConflict, Deny: []string{"*secret*"},
		Filters: map[string][]Filter{"b": {{Allow: []string{"*"}}}}}
	r.Update(same)
	if got := down.delivered(); len(got) != 0 {
		t.Errorf("an unchanged update delivered %v", got)
	}
	close(a.release)
	if got := toolText(t, finish(t, inflight)); got != "a:slow" {
		t.Errorf("the call in flight = %q, want a:slow", got)
	}
	for _, f := range []*fakeServer{a.fakeServer, b} {
		if joins, left := f.state(); joins != 1 || left {
			t.Errorf("%s: %d joins, left %v; want untouched", f.name, joins, left)
		}
	}
	// The cached lists were kept.
	listAll(t, be)
	if n := countOf(a.seen(), "tools/list"); n != lists {
		t.Errorf("a was listed again (%d → %d)", lists, n)
	}
}

func TestUpdatePolicyAndFilters(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x", "drop"}}
	b := &fakeServer{name: "b", tools: []string{"y"}}
	servers := []Server{a, b}
	r := New(&View{Servers: servers}, Options{})
	be, down := open(t, r)
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__x", "a__drop", "b__y"}) {
		t.Fatalf("tools %v", names)
	}
	// The prefix policy: tools and prompts.
	r.Update(&View{Servers: servers, Prefix: PrefixConflict})
	wantNotified(t, down, 1, 1, 0)
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"x", "drop", "y"}) {
		t.Errorf("tools under conflict = %v", names)
	}
	// A filter: tools only.
	r.Update(&View{Servers: servers, Prefix: PrefixConflict, Deny: []string{"drop"}})
	wantNotified(t, down, 2, 1, 0)
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"x", "y"}) {
		t.Errorf("filtered tools = %v", names)
	}
	if e := call(t, be, "tools/call", map[string]any{"name": "drop"})[0].ErrorOf(); e == nil {
		t.Error("a tool filtered out by the update can be called")
	}
	// "" is "always": no change from "always".
	r.Update(&View{Servers: servers, Prefix: PrefixConflict, Deny: []string{"drop"}})
	wantNotified(t, down, 2, 1, 0)
}

func TestUpdateDuringJoin(t *testing.T) {
	a := newGated(t, "a", "x")
	a.joinGate, a.entered = make(chan struct{}), make(chan struct{}, 1)
	c := &fakeServer{name: "c", tools: []string{"z"}}
	r := New(&View{Servers: []Server{a}}, Options{})
	type joined struct {
		b   session.Backend
		res *jsonrpc.Message
		err error
	}
	done := make(chan joined, 1)
	down := newFakeDown()
	go func() {
		b, res, err := r.Join(context.Background(), down, initMsg)
		done <- joined{b, res, err}
	}()
	// Once the join is under way, update: the joining session is not live
	// yet, so Update returns at once.
	<-a.entered
	r.Update(&View{Servers: []Server{a, c}})
	close(a.joinGate)
	j := <-done
	if j.err != nil {
		t.Fatal(j.err)
	}
	t.Cleanup(j.b.Leave)
	// The session caught up before it was answered: c is in, and the
	// client was told nothing (it had seen nothing).
	if names, _ := listAll(t, j.b); !slices.Equal(names, []string{"a__x", "c__z"}) {
		t.Errorf("tools = %v", names)
	}
	if got := down.delivered(); len(got) != 0 {
		t.Errorf("delivered %v before the session was answered", got)
	}
}

func TestUpdateEveryServerGone(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	bad := &fakeServer{name: "bad", joinErr: errors.New("boom")}
	r := New(&View{Servers: []Server{a}}, Options{})
	_, down := open(t, r)
	r.Update(&View{Servers: []Server{bad}})
	down.mu.Lock()
	ended := down.ended
	down.mu.Unlock()
	if ended == nil || !strings.Contains(ended.Error(), "boom") {
		t.Errorf("session end: %v; want it ended naming the failure", ended)
	}
	// An empty view keeps its sessions (as Join allows it).
	r2 := New(&View{Servers: []Server{a}}, Options{})
	be, down2 := open(t, r2)
	r2.Update(&View{})
	down2.mu.Lock()
	ended = down2.ended
	down2.mu.Unlock()
	if ended != nil {
		t.Errorf("an empty view ended the session: %v", ended)
	}
	if names, _ := listAll(t, be); len(names) != 0 {
		t.Errorf("tools of an empty view = %v", names)
	}
}

func TestRouterClose(t *testing.T) {
	a := &fakeServer{name: "a", tools: []string{"x"}}
	r := New(&View{Servers: []Server{a}}, Options{})
	_, d1 := open(t, r)
	_, d2 := open(t, r)
	r.Close()
	for _, d := range []*fakeDown{d1, d2} {
		d.mu.Lock()
		ended := d.ended
		d.mu.Unlock()
		if !errors.Is(ended, upstream.ErrClosed) {
			t.Errorf("session end: %v", ended)
		}
	}
	if _, left := a.state(); !left {
		t.Error("members were not left")
	}
	if _, _, err := r.Join(context.Background(), newFakeDown(), initMsg); !errors.Is(err, upstream.ErrClosed) {
		t.Errorf("join after Close: %v", err)
	}
	r.Update(&View{}) // a no-op
}

func TestUpdateConcurrent(t *testing.T) {
	// Updates racing with calls, lists and joins (run with -race).
	a := &fakeServer{name: "a", tools: []string{"x"}}
	b := &fakeServer{name: "b", tools: []string{"y"}}
	r := New(&View{Servers: []Server{a}}, Options{})
	be, _ := open(t, r)
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := be.Call(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", json.RawMessage(`{"name":"a__x"}`)))
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _ = drainAll(ctx, c)
				cancel()
			}
			c, err = be.Call(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(2), "tools/list", nil))
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _ = drainAll(ctx, c)
				cancel()
			}
		}
	}()
	for i := range 20 {
		v := &View{Servers: []Server{a}}
		if i%2 == 0 {
			v = &View{Servers: []Server{a, b}}
		}
		r.Update(v)
		down := newFakeDown()
		if s, _, err := r.Join(context.Background(), down, initMsg); err == nil {
			s.Leave()
		}
	}
	close(stop)
	<-finished
}

// modernServer is a fakeServer that also serves 2026-07-28 requests:
// tools/list, and subscriptions/listen streams the test can push to.
type modernServer struct {
	*fakeServer
	streams []*queueCall
}

func (s *modernServer) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if req.Method == "subscriptions/listen" {
		q := jsonrpc.NewQueue(100)
		q.Push(jsonrpc.NewNotification("notifications/subscriptions/acknowledged", jsonrpc.Marshal(map[string]any{
			"notifications": map[string]any{"toolsListChanged": true},
			"_meta":         map[string]json.RawMessage{mcp.MetaSubscriptionID: req.ID},
		})), true)
		c := &queueCall{q: q, long: true}
		s.mu.Lock()
		s.streams = append(s.streams, c)
		s.mu.Unlock()
		return c, nil
	}
	return (&fakeBackend{s.fakeServer}).Call(ctx, req)
}

func (s *modernServer) listens() []*queueCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.streams)
}

func modernReq(id int64, method string, params map[string]any) *jsonrpc.Message {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{mcp.MetaProtocolVersion: mcp.ModernVersion, mcp.MetaClientCapabilities: map[string]any{}}
	return jsonrpc.NewRequest(jsonrpc.IntID(id), method, jsonrpc.Marshal(params))
}

// nextOf waits for the next message of a call (nil when it ended).
func nextOf(t *testing.T, c session.Call) *jsonrpc.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := next(ctx, c)
	if errors.Is(err, session.ErrNoResponse) {
		return nil
	}
	if err != nil {
		t.Fatalf("no message: %v", err)
	}
	return m
}

func TestUpdateListenStream(t *testing.T) {
	s1 := &modernServer{fakeServer: &fakeServer{name: "s1", tools: []string{"x"}}}
	s2 := &modernServer{fakeServer: &fakeServer{name: "s2", tools: []string{"y"}}}
	r := New(&View{Servers: []Server{s1}}, Options{})
	ls, err := r.Stateless(context.Background(), modernReq(50, "subscriptions/listen",
		map[string]any{"notifications": map[string]any{"toolsListChanged": true}}))
	if err != nil {
		t.Fatal(err)
	}
	if m := nextOf(t, ls); m == nil || m.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v", m)
	}
	// Added: the client is told (tools only: it asked for nothing else),
	// and s2's stream joins the merged one (its acknowledgement dropped).
	r.Update(&View{Servers: []Server{s1, s2}})
	m := nextOf(t, ls)
	if m == nil || m.Method != toolsChanged || string(jsonrpc.Member(m.Params, "_meta", mcp.MetaSubscriptionID)) != "50" {
		t.Fatalf("after adding s2: %v", m)
	}
	if len(s2.listens()) != 1 {
		t.Fatalf("s2 got %d listen requests", len(s2.listens()))
	}
	s2.listens()[0].q.Push(jsonrpc.NewNotification("notifications/resources/updated", json.RawMessage(`{"uri":"u"}`)), false)
	if m := nextOf(t, ls); m == nil || m.Method != "notifications/resources/updated" {
		t.Fatalf("s2's notification: %v", m)
	}
	res, err := r.Stateless(context.Background(), modernReq(51, "tools/list", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(lastResult(t, finish(t, res))); !strings.Contains(got, "s1__x") || !strings.Contains(got, "s2__y") {
		t.Errorf("stateless tools/list = %s", got)
	}
	// Removed: s1's stream ends, the client's stays open.
	r.Update(&View{Servers: []Server{s2}})
	if m := nextOf(t, ls); m == nil || m.Method != toolsChanged {
		t.Fatalf("after removing s1: %v", m)
	}
	if !s1.listens()[0].abandoned.Load() {
		t.Error("s1's stream was not ended")
	}
	if m, ended := ls.Poll(); m != nil || ended {
		t.Fatalf("the client's stream: %v, ended %v", m, ended)
	}
	// An unchanged update sends nothing.
	r.Update(&View{Servers: []Server{s2}})
	if m, ended := ls.Poll(); m != nil || ended {
		t.Fatalf("after an unchanged update: %v, ended %v", m, ended)
	}
	// Close completes the stream.
	r.Close()
	if m := nextOf(t, ls); m == nil || !m.IsResponse() || m.ErrorOf() != nil {
		t.Fatalf("after Close: %v", m)
	}
	if m := nextOf(t, ls); m != nil {
		t.Fatalf("the stream goes on after its result: %v", m)
	}
	if !s2.listens()[0].abandoned.Load() {
		t.Error("s2's stream was not ended")
	}
}
