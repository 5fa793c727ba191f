package session

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// queueCall is a Call fed by the test.
type queueCall struct {
	q         jsonrpc.Queue
	long      bool
	abandoned atomic.Bool
}

func newQueueCall(long bool) *queueCall {
	c := &queueCall{long: long}
	c.q.Init(8)
	return c
}

func (c *queueCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *queueCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *queueCall) Abandon(bool)                   { c.abandoned.Store(true) }
func (c *queueCall) LongLived() bool                { return c.long }

var progress = jsonrpc.NewNotification("notifications/progress", []byte(`{"progressToken":1,"progress":1}`))

func TestForward(t *testing.T) {
	type result struct {
		expired, abandoned bool
		got                []string
		at                 time.Duration
	}
	timeout := time.Second
	run := func(t *testing.T, long bool, feed func(c *queueCall, stop chan struct{})) result {
		var r result
		synctest.Test(t, func(t *testing.T) {
			c, stop := newQueueCall(long), make(chan struct{})
			go feed(c, stop)
			start := time.Now()
			r.expired = Forward(c, timeout, stop, nil, func(m *jsonrpc.Message) {
				r.got = append(r.got, m.Method+string(m.Result))
			})
			r.at, r.abandoned = time.Since(start), c.abandoned.Load()
		})
		return r
	}
	resp := jsonrpc.NewResult([]byte("1"), []byte(`"ok"`))

	t.Run("answered", func(t *testing.T) {
		r := run(t, false, func(c *queueCall, _ chan struct{}) { c.q.Push(progress, true); c.q.PushLast(resp) })
		if r.expired || r.abandoned || len(r.got) != 2 || r.got[1] != `"ok"` {
			t.Errorf("%+v", r)
		}
	})
	t.Run("progress restarts the wait", func(t *testing.T) {
		r := run(t, false, func(c *queueCall, _ chan struct{}) {
			for range 3 {
				time.Sleep(800 * time.Millisecond) // synctest's clock
				c.q.Push(progress, true)
			}
			time.Sleep(800 * time.Millisecond)
			c.q.PushLast(resp)
		})
		if r.expired || r.abandoned || len(r.got) != 4 || r.at != 3200*time.Millisecond {
			t.Errorf("%+v", r)
		}
	})
	t.Run("expired", func(t *testing.T) {
		r := run(t, false, func(c *queueCall, _ chan struct{}) { c.q.Push(progress, true) })
		if !r.expired || !r.abandoned || r.at != time.Second {
			t.Errorf("%+v", r)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		r := run(t, true, func(_ *queueCall, stop chan struct{}) { time.Sleep(time.Hour); close(stop) })
		if r.expired || !r.abandoned || r.at != time.Hour {
			t.Errorf("a long-lived call has no deadline; stop ends it: %+v", r)
		}
	})
	t.Run("no timeout", func(t *testing.T) {
		timeout = 0
		r := run(t, false, func(c *queueCall, _ chan struct{}) { time.Sleep(time.Hour); c.q.PushLast(resp) })
		if r.expired || r.abandoned || len(r.got) != 1 || r.at != time.Hour {
			t.Errorf("a zero timeout waits as long as the call: %+v", r)
		}
	})
}

func TestDrain(t *testing.T) {
	resp := jsonrpc.NewResult([]byte("1"), []byte(`"ok"`))
	c := newQueueCall(false)
	c.q.Push(progress, true)
	c.q.PushLast(resp)
	var other []*jsonrpc.Message
	if m, err := Drain(t.Context(), c, func(m *jsonrpc.Message) { other = append(other, m) }); err != nil || m != resp || len(other) != 1 {
		t.Errorf("Drain = %v, %v; other %v", m, err, other)
	}

	c = newQueueCall(false)
	c.q.Push(progress, true)
	c.q.Close()
	if _, err := Drain(t.Context(), c, nil); !errors.Is(err, ErrNoResponse) {
		t.Errorf("a call ended without a response: %v", err)
	}

	c = newQueueCall(false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Drain(ctx, c, nil); !errors.Is(err, context.Canceled) || !c.abandoned.Load() {
		t.Errorf("ctx ended: %v, abandoned %v", err, c.abandoned.Load())
	}
}
