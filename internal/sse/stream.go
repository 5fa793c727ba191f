package sse

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Messages writes the messages of q as "message" events, with a keep-alive
// comment every keepAlive (non-positive: none), until q is closed and
// drained, a write fails, or ctx, ended or done ends (nil: never). id, when
// not nil, is called with each message's encoding as it is taken from q and
// returns the event's id ("": none). It returns the message whose write
// failed, for the caller to keep for another stream; nil otherwise. A
// message whose event had an id is kept by whoever gave it (an event log,
// for Last-Event-ID): when its write fails, it is not returned.
func (w *Writer) Messages(ctx context.Context, q *jsonrpc.Queue, keepAlive time.Duration, ended, done <-chan struct{}, id func(data []byte) string) (unsent *jsonrpc.Message) {
	keep := NewKeepAlive(keepAlive)
	defer keep.Stop()
	for {
		m, closed := q.Poll()
		if closed {
			return nil
		}
		if m != nil {
			data, eid := m.Encode(), ""
			if id != nil {
				eid = id(data)
			}
			if w.Event("message", eid, data) != nil {
				if eid != "" {
					return nil // kept by the log: the client resumes with Last-Event-ID
				}
				return m
			}
			continue
		}
		select {
		case <-q.Ready():
		case <-keep.C:
			if w.Comment("keep-alive") != nil {
				return nil
			}
		case <-ended:
			return nil
		case <-done:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
