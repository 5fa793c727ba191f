package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// This file holds the in-memory fakes the upstream tests share: a fake MCP
// server (the Dialer and its connections) and a fake Downstream. Every test
// runs inside a synctest bubble, so "wait until the goroutines are idle" is
// synctest.Wait and time is the bubble's fake clock.

const serverVersion = "2025-06-18"

// fakeInitResult is the InitializeResult the fake server answers with.
var fakeInitResult = json.RawMessage(`{"protocolVersion":"` + serverVersion + `","capabilities":{"tools":{},"logging":{},"resources":{"subscribe":true}},"serverInfo":{"name":"fake","version":"1"}}`)

// fakeServer dials fakeConns and remembers them.
type fakeServer struct {
	mu    sync.Mutex
	conns []*fakeConn
	dials []time.Time // when Dial was called, by the bubble's clock
	// auto are the methods each connection answers by itself with {}
	// (initialize with fakeInitResult).
	auto map[string]bool
	// dialErr, if set, decides whether dial number n (0-based) fails.
	dialErr func(n int) error
	// block, if set, is waited on by Dial before it returns.
	block chan struct{}
	// reinit makes connections implement Reinitializer.
	reinit bool
	// onWrite, if set, sees every message a connection is sent, before
	// any automatic answer.
	onWrite func(c *fakeConn, m *jsonrpc.Message)
	// unread, if set, makes connections Unreaders that report what it
	// returns.
	unread func() (waiting int, read uint64)
	// inputWaiting, with unread, reports the bytes of the server's input
	// it has not read (an InputWaiter conn).
	inputWaiting func() int
	// cpuWait, if set with unread, makes connections CPUWaiters too that
	// report what it returns.
	cpuWait func() (wait time.Duration, runnable int)
}

func newFakeServer() *fakeServer {
	return &fakeServer{auto: map[string]bool{
		"initialize":            true,
		"logging/setLevel":      true,
		"resources/subscribe":   true,
		"resources/unsubscribe": true,
	}}
}

func (s *fakeServer) dial(ctx context.Context, deliver, oversize func([]byte)) (Conn, error) {
	s.mu.Lock()
	n := len(s.dials)
	s.dials = append(s.dials, time.Now())
	dialErr, block := s.dialErr, s.block
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if dialErr != nil {
		if err := dialErr(n); err != nil {
			return nil, err
		}
	}
	c := &fakeConn{srv: s, deliverFn: deliver, oversizeFn: oversize, done: make(chan struct{}), reinit: make(chan struct{}, 1)}
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	if s.reinit {
		return &reinitConn{c}, nil
	}
	if s.unread != nil && s.inputWaiting != nil {
		return &inputWaiterConn{unreaderConn{c}}, nil
	}
	if s.unread != nil && s.cpuWait != nil {
		return &cpuWaiterConn{unreaderConn{c}}, nil
	}
	if s.unread != nil {
		return &unreaderConn{c}, nil
	}
	return c, nil
}

// unreaderConn is a fakeConn that reports its server's unread output.
type unreaderConn struct{ *fakeConn }

func (u *unreaderConn) Unread() (int, uint64) { return u.srv.unread() }

// inputWaiterConn is an unreaderConn that reports its server's unread input.
type inputWaiterConn struct{ unreaderConn }

func (c *inputWaiterConn) InputWaiting() int { return c.srv.inputWaiting() }

// cpuWaiterConn is an unreaderConn that reports its server's CPU wait.
type cpuWaiterConn struct{ unreaderConn }

func (c *cpuWaiterConn) CPUWait() (time.Duration, int, bool) {
	w, r := c.srv.cpuWait()
	return w, r, true
}

// conn returns the newest connection.
func (s *fakeServer) conn(t *testing.T) *fakeConn {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) == 0 {
		t.Fatal("no connection was dialled")
	}
	return s.conns[len(s.conns)-1]
}

func (s *fakeServer) numConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *fakeServer) dialTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dials)
}

// fakeConn is one connection to the fake server.
type fakeConn struct {
	srv        *fakeServer
	deliverFn  func([]byte)
	oversizeFn func([]byte)
	reinit     chan struct{}

	mu      sync.Mutex
	written []*jsonrpc.Message
	done    chan struct{}
	err     error
	closes  int
}

func (c *fakeConn) Write(b []byte) error {
	m, err := jsonrpc.Decode(b)
	if err != nil {
		panic("upstream wrote an invalid message: " + string(b))
	}
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return errors.New("fake: connection closed")
	default:
	}
	c.written = append(c.written, m)
	c.mu.Unlock()
	if f := c.srv.onWrite; f != nil {
		f(c, m)
	}
	c.srv.mu.Lock()
	auto := c.srv.auto[m.Method]
	c.srv.mu.Unlock()
	if m.IsRequest() && auto {
		res := json.RawMessage(`{}`)
		if m.Method == "initialize" {
			res = fakeInitResult
		}
		c.send(jsonrpc.NewResult(m.ID, res))
	}
	return nil
}

func (c *fakeConn) Done() <-chan struct{} { return c.done }

func (c *fakeConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *fakeConn) Close(ctx context.Context) error {
	c.end(nil)
	c.mu.Lock()
	c.closes++
	c.mu.Unlock()
	return nil
}

// end ends the connection with err, as if the server went away.
func (c *fakeConn) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
	default:
		c.err = err
		close(c.done)
	}
}

func (c *fakeConn) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *fakeConn) closeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closes
}

// send delivers a message from the server.
func (c *fakeConn) send(m *jsonrpc.Message) { c.deliverFn(m.Encode()) }

// sendRaw delivers raw bytes from the server.
func (c *fakeConn) sendRaw(s string) { c.deliverFn([]byte(s)) }

// all returns every message written to the connection.
func (c *fakeConn) all() []*jsonrpc.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.written)
}

// sent returns the messages written with method (requests and
// notifications), or the responses when method is "".
func (c *fakeConn) sent(method string) []*jsonrpc.Message {
	var out []*jsonrpc.Message
	for _, m := range c.all() {
		if m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

// methods lists the methods of the requests and notifications written.
func (c *fakeConn) methods() []string {
	var out []string
	for _, m := range c.all() {
		if m.Method != "" {
			out = append(out, m.Method)
		}
	}
	return out
}

// reinitConn is a fakeConn that re-establishes its session by itself.
type reinitConn struct{ *fakeConn }

func (r *reinitConn) Reinitialized() <-chan struct{} { return r.reinit }

// fakeDown is a Downstream that records what it is given.
type fakeDown struct {
	mu    sync.Mutex
	msgs  []*jsonrpc.Message
	ended []error
}

func (d *fakeDown) Deliver(m *jsonrpc.Message) {
	d.mu.Lock()
	d.msgs = append(d.msgs, m)
	d.mu.Unlock()
}

func (d *fakeDown) End(err error) {
	d.mu.Lock()
	d.ended = append(d.ended, err)
	d.mu.Unlock()
}

// take returns and forgets the delivered messages.
func (d *fakeDown) take() []*jsonrpc.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.msgs
	d.msgs = nil
	return out
}

func (d *fakeDown) endErrs() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ended)
}

// harness is one Upstream over a fake server.
type harness struct {
	t   *testing.T
	u   *Upstream
	srv *fakeServer
	ctx context.Context
}

// newHarness returns a harness; it must run inside a synctest bubble. The
// Upstream is closed when the test ends.
func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	srv := newFakeServer()
	if opts.Name == "" {
		opts.Name = "fake"
	}
	if opts.Dial == nil {
		opts.Dial = srv.dial
	}
	u := New(opts)
	t.Cleanup(func() { _ = u.Close(context.Background()) })
	return &harness{t: t, u: u, srv: srv, ctx: t.Context()}
}

// initMsg builds a client's initialize request.
func initMsg(id, version, caps string) *jsonrpc.Message {
	if caps == "" {
		caps = "{}"
	}
	return mustDecode(`{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":` + caps + `,"clientInfo":{"name":"client","version":"1"}}}`)
}

func mustDecode(s string) *jsonrpc.Message {
	m, err := jsonrpc.Decode([]byte(s))
	if err != nil {
		panic(err.Error() + ": " + s)
	}
	return m
}

// join attaches a member declaring caps (raw JSON; "" for none).
func (h *harness) join(caps string) (*Member, *fakeDown) {
	h.t.Helper()
	d := &fakeDown{}
	m, _, err := h.u.Join(h.ctx, d, initMsg(`0`, serverVersion, caps))
	if err != nil {
		h.t.Fatalf("Join: %v", err)
	}
	return m, d
}

// call sends a client request from m.
func (h *harness) call(m *Member, id, method, params string) *Call {
	h.t.Helper()
	c, err := m.Call(h.ctx, req(id, method, params))
	if err != nil {
		h.t.Fatalf("Call %s %s: %v", method, id, err)
	}
	return c
}

func req(id, method, params string) *jsonrpc.Message {
	if params == "" {
		params = "{}"
	}
	return mustDecode(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
}

// lastSent returns the last message with method written to the newest
// connection.
func (h *harness) lastSent(method string) *jsonrpc.Message {
	h.t.Helper()
	ms := h.srv.conn(h.t).sent(method)
	if len(ms) == 0 {
		h.t.Fatalf("no %q was sent to the server; sent: %v", method, h.srv.conn(h.t).methods())
	}
	return ms[len(ms)-1]
}

// next returns the call's next message, which must be there already.
func next(t *testing.T, c *Call) *jsonrpc.Message {
	t.Helper()
	m, ended := c.Poll()
	if m == nil {
		t.Fatalf("call %s: nothing queued (ended %v)", c.Method(), ended)
	}
	return m
}

// noNext asserts that the call has nothing queued.
func noNext(t *testing.T, c *Call) {
	t.Helper()
	if m, _ := c.Poll(); m != nil {
		t.Fatalf("call %s: unexpected %s", c.Method(), m)
	}
}

// errCode returns the error code of a response, or 0 for a success.
func errCode(t *testing.T, m *jsonrpc.Message) int {
	t.Helper()
	if !m.IsResponse() {
		t.Fatalf("not a response: %s", m)
	}
	if e := m.ErrorOf(); e != nil {
		return e.Code
	}
	return 0
}

// str returns the string at path in raw JSON.
func str(raw json.RawMessage, path ...string) string {
	s, _ := jsonrpc.StringMember(raw, path...)
	return s
}

// raw returns the raw member at path, as a string.
func raw(r json.RawMessage, path ...string) string { return string(jsonrpc.Member(r, path...)) }
