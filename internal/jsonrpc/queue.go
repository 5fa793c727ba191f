package jsonrpc

import (
	"context"
	"io"
	"sync"
)

// Queue is an ordered hand-off of messages from the reader goroutine (which
// must never block on a slow client) to the goroutine that writes them to
// the client. It is bounded for everything but its last item: past max
// queued messages, pushes of notifications are dropped.
type Queue struct {
	mu     sync.Mutex
	items  []*Message    // guarded by mu; backed by first while it holds one
	first  [1]*Message   // guarded by mu: room for the common single message
	closed bool          // guarded by mu; no more pushes are taken
	signal chan struct{} // cap 1: "items or closed changed"
	max    int
}

// NewQueue returns a queue holding at most max messages (plus forced ones).
func NewQueue(max int) *Queue {
	q := &Queue{}
	q.Init(max)
	return q
}

// Init readies a zero Queue (one embedded in a larger struct, which saves
// an allocation) as NewQueue(max) would. It must be called before any other
// method and only once.
func (q *Queue) Init(max int) {
	q.signal = make(chan struct{}, 1)
	q.max = max
	q.items = q.first[:0]
}

// Push appends m; it reports false if the queue is closed or full (a final
// message always fits: force).
func (q *Queue) Push(m *Message, force bool) bool {
	q.mu.Lock()
	if q.closed || (!force && len(q.items) >= q.max) {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, m)
	q.mu.Unlock()
	q.wake()
	return true
}

// PushLast appends m, a final message that always fits, and closes the
// queue, under one lock and with one wake-up: a call's response. It reports
// false (m dropped) if the queue was already closed.
func (q *Queue) PushLast(m *Message) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, m)
	q.closed = true
	q.mu.Unlock()
	q.wake()
	return true
}

// take removes and returns the first message; mu held, items not empty.
// An emptied queue goes back to its inline slot, so the next single
// message needs no allocation either.
func (q *Queue) take() *Message {
	m := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = q.first[:0]
	}
	return m
}

// wake leaves a token on signal. signal holds one token for any number of
// waiters, so whoever takes a message and leaves more behind, or sees the
// queue closed, passes the wake-up on: otherwise a second consumer could
// wait forever after Close, or while a message sits queued.
func (q *Queue) wake() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Close stops further pushes; Pop drains what is queued, then returns io.EOF.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

// Pop returns the next message, waiting until one is queued, the queue is
// closed and drained (io.EOF), or ctx is done.
func (q *Queue) Pop(ctx context.Context) (*Message, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			m := q.take()
			more := len(q.items) > 0 || q.closed
			q.mu.Unlock()
			if more {
				q.wake()
			}
			return m, nil
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			q.wake()
			return nil, io.EOF
		}
		select {
		case <-q.signal:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Len returns the number of queued messages.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// TryPop returns a queued message without waiting.
func (q *Queue) TryPop() *Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return nil
	}
	return q.take()
}

// Ready returns a channel that receives when messages were pushed or the
// queue was closed. With several consumers, a consumer must Poll until it
// gets nothing before waiting on Ready again.
func (q *Queue) Ready() <-chan struct{} { return q.signal }

// Poll returns a queued message without waiting; done is true when the queue
// is closed and drained.
func (q *Queue) Poll() (m *Message, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		if q.closed {
			q.wake()
		}
		return nil, q.closed
	}
	m = q.take()
	if len(q.items) > 0 || q.closed {
		q.wake()
	}
	return m, false
}
