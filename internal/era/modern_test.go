package era

import (
	"context"
	"encoding/json"
	"errors"
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

// queuedCall is an upstream call whose messages the test pushes.
type queuedCall struct{ q *jsonrpc.Queue }

func (c queuedCall) Poll() (*jsonrpc.Message, bool) { return c.q.TryPop(), false }
func (c queuedCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c queuedCall) Abandon(bool)                   {}
func (c queuedCall) LongLived() bool                { return false }

// lender is a Joiner lending one member whose call the test drives; it
// records what the member was answered.
type lender struct {
	call queuedCall
	mu   sync.Mutex
	sent []*jsonrpc.Message // the member's Respond calls
}

func (l *lender) Join(context.Context, upstream.Downstream, *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return nil, nil, errors.New("not in this test")
}

func (l *lender) Lend(context.Context, json.RawMessage, json.RawMessage) (session.Backend, error) {
	return l, nil
}
func (l *lender) Call(context.Context, *jsonrpc.Message) (session.Call, error) { return l.call, nil }
func (l *lender) Notify(context.Context, *jsonrpc.Message) error               { return nil }
func (l *lender) Respond(_ context.Context, r *jsonrpc.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, r)
	return nil
}
func (l *lender) Leave() {}

// TestModernParkKeepsNotifications: a server that asks roots/list without
// params during a tool call with progress (server-everything's roots
// request, 350 ms after initialized, lands in whatever call is running):
// the input request carries params (the go-sdk fails the whole result
// without them), and the progress that came while the call was gathered
// is delivered on the retry's answer before the response, not dropped.
func TestModernParkKeepsNotifications(t *testing.T) {
	l := &lender{call: queuedCall{jsonrpc.NewQueue(16)}}
	m := NewModernOverLegacy(l, Options{Name: "x"})
	defer m.Close()
	meta := `"_meta":{"` + mcp.MetaProtocolVersion + `":"2026-07-28","` + mcp.MetaClientCapabilities + `":{"roots":{}},"progressToken":"p"}`
	c, err := m.Stateless(context.Background(), jsonrpc.NewRequest(json.RawMessage(`1`), "tools/call", json.RawMessage(`{"name":"op",`+meta+`}`)))
	if err != nil {
		t.Fatal(err)
	}
	progress := func(n int) *jsonrpc.Message {
		return jsonrpc.NewNotification("notifications/progress", json.RawMessage(`{"progressToken":"p","progress":`+strconv.Itoa(n)+`}`))
	}
	l.call.q.Push(progress(1), true)
	l.call.q.Push(jsonrpc.NewRequest(json.RawMessage(`9`), "roots/list", nil), true)
	l.call.q.Push(progress(2), true) // within the gather window: held
	if got := next(t, c); !strings.Contains(string(got.Encode()), `"progress":1`) {
		t.Fatalf("first message %s; want progress 1", got.Encode())
	}
	ir := next(t, c)
	if v, _ := jsonrpc.StringMember(ir.Result, "resultType"); v != "input_required" {
		t.Fatalf("second message %s; want input_required", ir.Encode())
	}
	if p := jsonrpc.Member(ir.Result, "inputRequests", "roots", "params"); string(p) != "{}" {
		t.Errorf("roots input request params %q; want {}", p)
	}
	state, _ := jsonrpc.StringMember(ir.Result, "requestState")

	l.call.q.Push(progress(3), true) // while parked: queued upstream
	l.call.q.Push(jsonrpc.NewResult(json.RawMessage(`5`), json.RawMessage(`{"content":[]}`)), true)
	retry := jsonrpc.NewRequest(json.RawMessage(`2`), "tools/call", json.RawMessage(`{"name":"op","requestState":"`+state+
		`","inputResponses":{"roots":{"roots":[]}},`+meta+`}`))
	c, err = m.Stateless(context.Background(), retry)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		msg := next(t, c)
		got = append(got, string(msg.Encode()))
		if msg.IsResponse() {
			if string(msg.ID) != "2" {
				t.Errorf("response id %s; want the retry's 2", msg.ID)
			}
			break
		}
	}
	if len(got) != 3 || !strings.Contains(got[0], `"progress":2`) || !strings.Contains(got[1], `"progress":3`) {
		t.Errorf("retry's messages %q; want progress 2, progress 3, then the response", got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sent) != 1 || string(l.sent[0].ID) != "9" || string(l.sent[0].Result) != `{"roots":[]}` {
		t.Errorf("server answered %v; want the roots answer for its request 9", l.sent)
	}
}

// fakeMinter mints "sb1.minted-<n>" and records what each was for.
type fakeMinter struct {
	mu   sync.Mutex
	for_ []string // guarded by mu: method name caller of each
}

func (f *fakeMinter) MintState(method, name, caller string, _ time.Duration) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.for_ = append(f.for_, method+" "+name+" "+caller)
	return "sb1.minted-" + strconv.Itoa(len(f.for_)), nil
}

// TestModernParkUsesStates: with Options.States (a cluster), a parked
// call's requestState is the minter's token, minted for its method and
// name, and the retry carrying it resumes the call.
func TestModernParkUsesStates(t *testing.T) {
	l := &lender{call: queuedCall{jsonrpc.NewQueue(16)}}
	f := &fakeMinter{}
	m := NewModernOverLegacy(l, Options{Name: "x", States: f})
	defer m.Close()
	meta := `"_meta":{"` + mcp.MetaProtocolVersion + `":"2026-07-28","` + mcp.MetaClientCapabilities + `":{"roots":{}}}`
	c, err := m.Stateless(context.Background(), jsonrpc.NewRequest(json.RawMessage(`1`), "tools/call", json.RawMessage(`{"name":"op",`+meta+`}`)))
	if err != nil {
		t.Fatal(err)
	}
	l.call.q.Push(jsonrpc.NewRequest(json.RawMessage(`9`), "roots/list", nil), true)
	ir := next(t, c)
	if state, _ := jsonrpc.StringMember(ir.Result, "requestState"); state != "sb1.minted-1" {
		t.Fatalf("requestState %q; want the minter's sb1.minted-1 (%s)", state, ir.Encode())
	}
	f.mu.Lock()
	if len(f.for_) != 1 || f.for_[0] != "tools/call op " {
		t.Errorf("minted for %q; want tools/call op, no caller", f.for_)
	}
	f.mu.Unlock()
	l.call.q.Push(jsonrpc.NewResult(json.RawMessage(`5`), json.RawMessage(`{"content":[]}`)), true)
	c, err = m.Stateless(context.Background(), jsonrpc.NewRequest(json.RawMessage(`2`), "tools/call",
		json.RawMessage(`{"name":"op","requestState":"sb1.minted-1","inputResponses":{"roots":{"roots":[]}},`+meta+`}`)))
	if err != nil {
		t.Fatal(err)
	}
	if msg := next(t, c); !msg.IsResponse() || msg.ErrorOf() != nil {
		t.Errorf("the retry: %s; want the call's result", msg.Encode())
	}
}
