package sse

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Messages writes the messages of q as "message" events, with a keep-alive
// comment every keepAlive (non-positive: none), until q is closed and
// drained, a write fails, or ctx, ended or done ends (nil: never). It
// returns the message whose write failed, for the caller to keep for
// another stream; nil otherwise.
func (w *Writer) Messages(ctx context.Context, q *jsonrpc.Queue, keepAlive time.Duration, ended, done <-chan struct{}) (unsent *jsonrpc.Message) {
	keep := NewKeepAlive(keepAlive)
	defer keep.Stop()
	for {
		m, closed := q.Poll()
		if closed {
			return nil
		}
		if m != nil {
			if w.Event("message", "", m.Encode()) != nil {
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
