package policy

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// pending is a call whose response arrives when done is closed.
type pending struct {
	done  chan struct{}
	taken bool
}

func (p *pending) Poll() (*jsonrpc.Message, bool) {
	select {
	case <-p.done:
		if p.taken {
			return nil, true
		}
		p.taken = true
		return jsonrpc.NewResult(jsonrpc.IntID(1), []byte(`{}`)), false
	default:
		return nil, false
	}
}
func (p *pending) Ready() <-chan struct{} { return p.done }
func (p *pending) Abandon(bool)           {}
func (p *pending) LongLived() bool        { return false }

func TestDestinationConcurrency(t *testing.T) {
	l := NewDestinationLimiter("d", &DestinationLimits{MaxConcurrent: 1}, nil)
	first := &pending{done: make(chan struct{})}
	send := func(c session.Call) func(context.Context, *jsonrpc.Message) (session.Call, error) {
		return func(context.Context, *jsonrpc.Message) (session.Call, error) { return c, nil }
	}
	req := jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/call", []byte(`{"name":"x"}`))
	c1, err := l.Send(context.Background(), req, send(first))
	if err != nil {
		t.Fatal(err)
	}
	// The slot is taken: a request whose deadline has passed gets an error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Send(ctx, req, send(&pending{done: make(chan struct{})})); err == nil {
		t.Fatal("a second request got the only slot")
	}
	// A waiting request gets the slot once the first response is taken.
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := l.Send(ctx, req, send(&pending{done: make(chan struct{})}))
		got <- err
	}()
	close(first.done)
	if m, _ := c1.Poll(); m == nil || !m.IsResponse() {
		t.Fatalf("first call: %v", m)
	}
	if err := <-got; err != nil {
		t.Errorf("waiting request: %v", err)
	}
}

func TestLimiterKeepsBuckets(t *testing.T) {
	var l Limiter
	rl := &Rate{Rate: 0.001, Burst: 1}
	l.Update(map[string]*Rate{"a": rl})
	now := time.Now()
	if ok, _ := l.Allow("a", now); !ok {
		t.Fatal("first token refused")
	}
	if ok, wait := l.Allow("a", now); ok || wait < time.Second {
		t.Fatalf("second token: %v %v", ok, wait)
	}
	l.Update(map[string]*Rate{"a": {Rate: 0.001, Burst: 1}})
	if ok, _ := l.Allow("a", now); ok {
		t.Error("a reload with the same settings refilled the bucket")
	}
	if ok, _ := l.Allow("b", now); !ok {
		t.Error("a key without a limit was refused")
	}
	if RetryAfterSeconds(1500*time.Millisecond) != 2 || RetryAfterSeconds(0) != 1 {
		t.Error("RetryAfterSeconds")
	}
}
