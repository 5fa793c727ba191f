package jsonrpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// guard fails the test if done is not closed in a long while: a hang, not a
// timing assumption (nothing here waits for time to pass).
func guard(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: hung", what)
	}
}

func msgN(n int64) *Message { return NewNotification("n", IntID(n)) }

func idOf(t *testing.T, m *Message) int64 {
	t.Helper()
	n, ok := ParseIntID(m.Params)
	if !ok {
		t.Fatalf("bad test message %s", m)
	}
	return n
}

func TestQueueOrder(t *testing.T) {
	q := NewQueue(10)
	for i := int64(0); i < 10; i++ {
		if !q.Push(msgN(i), false) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.Len() != 10 {
		t.Fatalf("Len = %d", q.Len())
	}
	ctx := context.Background()
	for i := int64(0); i < 10; i++ {
		var m *Message
		switch i % 3 { // all three ways of taking agree on order
		case 0:
			var err error
			if m, err = q.Pop(ctx); err != nil {
				t.Fatal(err)
			}
		case 1:
			m = q.TryPop()
		case 2:
			var done bool
			if m, done = q.Poll(); done {
				t.Fatal("done too early")
			}
		}
		if got := idOf(t, m); got != i {
			t.Fatalf("message %d, want %d", got, i)
		}
	}
	if q.Len() != 0 || q.TryPop() != nil {
		t.Fatalf("queue not empty")
	}
	if m, done := q.Poll(); m != nil || done {
		t.Fatalf("Poll on an empty open queue = %v, %v", m, done)
	}
}

func TestQueueMaxAndForce(t *testing.T) {
	q := NewQueue(2)
	if !q.Push(msgN(0), false) || !q.Push(msgN(1), false) {
		t.Fatal("pushes under max refused")
	}
	if q.Push(msgN(2), false) || q.Push(msgN(3), false) {
		t.Fatal("push beyond max taken")
	}
	// A forced push always fits, even several past max.
	if !q.Push(msgN(4), true) || !q.Push(msgN(5), true) {
		t.Fatal("forced push refused")
	}
	if q.Len() != 4 {
		t.Fatalf("Len = %d, want 4", q.Len())
	}
	want := []int64{0, 1, 4, 5}
	for _, w := range want {
		if got := idOf(t, q.TryPop()); got != w {
			t.Fatalf("got %d, want %d", got, w)
		}
	}
	// Room again once drained.
	if !q.Push(msgN(6), false) {
		t.Fatal("push after drain refused")
	}
}

func TestQueueZeroMax(t *testing.T) {
	q := NewQueue(0)
	if q.Push(msgN(0), false) {
		t.Fatal("push into a zero queue taken")
	}
	if !q.Push(msgN(1), true) {
		t.Fatal("forced push into a zero queue refused")
	}
	if got := idOf(t, q.TryPop()); got != 1 {
		t.Fatalf("got %d", got)
	}
}

func TestQueueCloseThenDrain(t *testing.T) {
	q := NewQueue(5)
	q.Push(msgN(0), false)
	q.Push(msgN(1), true)
	q.Close()
	if q.Push(msgN(2), false) || q.Push(msgN(3), true) {
		t.Fatal("push after Close taken")
	}
	ctx := context.Background()
	for _, w := range []int64{0, 1} {
		m, err := q.Pop(ctx)
		if err != nil {
			t.Fatalf("Pop: %v", err)
		}
		if got := idOf(t, m); got != w {
			t.Fatalf("got %d, want %d", got, w)
		}
	}
	for range 3 { // EOF is sticky
		if m, err := q.Pop(ctx); m != nil || err != io.EOF {
			t.Fatalf("Pop after drain = %v, %v; want io.EOF", m, err)
		}
		if m, done := q.Poll(); m != nil || !done {
			t.Fatalf("Poll after drain = %v, %v; want done", m, done)
		}
	}
	q.Close() // a second Close is harmless
}

func TestQueuePollDrainsBeforeDone(t *testing.T) {
	q := NewQueue(5)
	q.Push(msgN(0), false)
	q.Close()
	if m, done := q.Poll(); m == nil || done {
		t.Fatalf("Poll = %v, %v; want the queued message first", m, done)
	}
	if _, done := q.Poll(); !done {
		t.Fatal("Poll not done after drain")
	}
}

func TestQueuePopCancel(t *testing.T) {
	q := NewQueue(5)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Pop(ctx)
		errc <- err
	}()
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Pop = %v, want context.Canceled", err)
		}
	}()
	guard(t, done, "Pop after cancel")

	// The queue still works after a cancelled Pop.
	q.Push(msgN(7), false)
	m, err := q.Pop(context.Background())
	if err != nil || idOf(t, m) != 7 {
		t.Fatalf("Pop = %v, %v", m, err)
	}

	// A queued message is returned even when ctx is already done.
	q.Push(msgN(8), false)
	if m, err := q.Pop(ctx); err != nil || idOf(t, m) != 8 {
		t.Fatalf("Pop with done ctx and a queued message = %v, %v", m, err)
	}
	if _, err := q.Pop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Pop with done ctx on an empty queue = %v", err)
	}
}

func TestQueuePopWakesOnPushAndClose(t *testing.T) {
	q := NewQueue(5)
	type res struct {
		m   *Message
		err error
	}
	out := make(chan res)
	go func() {
		for {
			m, err := q.Pop(context.Background())
			out <- res{m, err}
			if err != nil {
				return
			}
		}
	}()
	q.Push(msgN(1), false)
	if r := <-out; r.err != nil || idOf(t, r.m) != 1 {
		t.Fatalf("Pop = %v, %v", r.m, r.err)
	}
	q.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r := <-out; r.err != io.EOF {
			t.Errorf("Pop after Close = %v, %v", r.m, r.err)
		}
	}()
	guard(t, done, "Pop after Close")
}

// pollConsumer is the loop the SSE and streamable fronts run: Poll until
// there is nothing, then wait on Ready.
func pollConsumer(q *Queue, got chan<- int64) {
	for {
		m, done := q.Poll()
		if done {
			return
		}
		if m != nil {
			n, _ := ParseIntID(m.Params)
			got <- n
			continue
		}
		<-q.Ready()
	}
}

// TestQueueReadyTwoConsumersClose: Close must wake every consumer waiting
// on Ready, not just one (the signal channel holds a single token).
func TestQueueReadyTwoConsumersClose(t *testing.T) {
	q := NewQueue(5)
	q.Close()
	// Consumer A takes the token and sees the end.
	<-q.Ready()
	if _, done := q.Poll(); !done {
		t.Fatal("not done")
	}
	// Consumer B, already waiting on Ready, must be woken too.
	select {
	case <-q.Ready():
	default:
		t.Fatal("second consumer waiting on Ready is never woken after Close")
	}
	if _, done := q.Poll(); !done {
		t.Fatal("not done")
	}
}

// TestQueueReadyTwoConsumersItems: two pushes coalesce into one token; the
// consumer that takes one message must leave a wake-up for the other.
func TestQueueReadyTwoConsumersItems(t *testing.T) {
	q := NewQueue(5)
	q.Push(msgN(1), false)
	q.Push(msgN(2), false)
	<-q.Ready() // consumer A
	if m, _ := q.Poll(); m == nil {
		t.Fatal("A got nothing")
	}
	select {
	case <-q.Ready(): // consumer B
	default:
		t.Fatal("second consumer not woken for the message left in the queue")
	}
	if m, _ := q.Poll(); m == nil {
		t.Fatal("B got nothing")
	}
}

func TestQueueReadyTwoConsumersConcurrent(t *testing.T) {
	for range 200 {
		q := NewQueue(1000)
		got := make(chan int64, 1000)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pollConsumer(q, got)
			}()
		}
		const n = 100
		for i := range int64(n) {
			q.Push(msgN(i), i%7 == 0)
		}
		q.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		guard(t, done, "two Poll/Ready consumers after Close")
		close(got)
		seen := make(map[int64]bool)
		for id := range got {
			if seen[id] {
				t.Fatalf("message %d delivered twice", id)
			}
			seen[id] = true
		}
		if len(seen) != n {
			t.Fatalf("delivered %d of %d messages", len(seen), n)
		}
	}
}

func TestQueuePopTwoConsumersClose(t *testing.T) {
	for range 200 {
		q := NewQueue(100)
		got := make(chan int64, 100)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					m, err := q.Pop(context.Background())
					if err == io.EOF {
						return
					}
					if err != nil {
						t.Errorf("Pop: %v", err)
						return
					}
					n, _ := ParseIntID(m.Params)
					got <- n
				}
			}()
		}
		for i := range int64(10) {
			q.Push(msgN(i), false)
		}
		q.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		guard(t, done, "two Pop consumers after Close")
		if len(got) != 10 {
			t.Fatalf("delivered %d of 10", len(got))
		}
	}
}

// TestQueueConcurrent: each producer's order is preserved, and nothing is
// lost or duplicated (run under -race).
func TestQueueConcurrent(t *testing.T) {
	q := NewQueue(1 << 20)
	const producers, each = 4, 500
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q.Push(msgN(int64(p*each+i)), false)
			}
		}()
	}
	go func() { wg.Wait(); q.Close() }()
	last := make(map[int]int64)
	for p := range producers {
		last[p] = -1
	}
	count := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := q.Pop(context.Background())
			if err == io.EOF {
				return
			}
			n, _ := ParseIntID(m.Params)
			p := int(n) / each
			if n <= last[p] {
				t.Errorf("producer %d: %d after %d", p, n, last[p])
			}
			last[p] = n
			count++
		}
	}()
	guard(t, done, "concurrent drain")
	if count != producers*each {
		t.Fatalf("got %d of %d", count, producers*each)
	}
}
