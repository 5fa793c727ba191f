package session

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Forward passes call's messages to deliver, in order, until its response.
// It waits at most timeout for the response, each progress notification
// restarting the wait (a long-lived call, or a timeout of zero or less,
// waits as long as the call lasts). When
// the wait expires, or stop or done is closed first (nil: never), the call
// is abandoned, cancelled upstream; expired reports the first case, for
// the front to answer the client with a timeout error.
func Forward(call Call, timeout time.Duration, stop, done <-chan struct{}, deliver func(*jsonrpc.Message)) (expired bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	deadline := timer.C
	if call.LongLived() || timeout <= 0 {
		deadline = nil
	}
	for {
		m, ended := call.Poll()
		if m != nil {
			deliver(m)
			if m.IsResponse() {
				return false
			}
			if m.Method == "notifications/progress" {
				timer.Reset(timeout)
			}
			continue
		}
		if ended {
			return false
		}
		select {
		case <-call.Ready():
		case <-deadline:
			call.Abandon(true)
			return true
		case <-stop:
			call.Abandon(true)
			return false
		case <-done:
			call.Abandon(true)
			return false
		}
	}
}

// ErrNoResponse is Drain's error for a call that ended without a response.
var ErrNoResponse = errors.New("the call ended without a response")

// Drain reads call until its response and returns it; the messages before
// it go to other (nil drops them). When ctx ends first, the call is
// abandoned, cancelled upstream, and ctx's error returned.
func Drain(ctx context.Context, call Call, other func(*jsonrpc.Message)) (*jsonrpc.Message, error) {
	for {
		m, ended := call.Poll()
		if m != nil {
			if m.IsResponse() {
				return m, nil
			}
			if other != nil {
				other(m)
			}
			continue
		}
		if ended {
			return nil, ErrNoResponse
		}
		select {
		case <-call.Ready():
		case <-ctx.Done():
			call.Abandon(true)
			return nil, ctx.Err()
		}
	}
}

// UpstreamTime is how long the server behind call took to answer (see
// upstream.Call.UpstreamTime): zero when call cannot tell. A Call that wraps
// another passes it on with this.
func UpstreamTime(call Call) time.Duration {
	if t, ok := call.(interface{ UpstreamTime() time.Duration }); ok {
		return t.UpstreamTime()
	}
	return 0
}
