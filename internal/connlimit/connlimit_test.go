package connlimit

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// At the cap with every connection busy, Accept waits; when one goes idle
// the next connection is accepted and the idle one is closed for it. A
// closed listener ends a waiting Accept.
func TestConnLimitWaitsWhileAllBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := New(2, 0, 0, slog.New(slog.DiscardHandler))
	ll := lim.Listen(ln)
	defer ll.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	accept := func() { c, err := ll.Accept(); acc <- accepted{c, err} }
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var server []net.Conn
	for range 2 {
		dial()
		go accept()
		a := <-acc
		if a.err != nil {
			t.Fatal(a.err)
		}
		lim.ConnState(a.c, http.StateActive)
		server = append(server, a.c)
	}
	third := dial()
	go accept()
	select {
	case a := <-acc:
		t.Fatalf("accepted %v, %v with both connections busy", a.c, a.err)
	case <-time.After(200 * time.Millisecond): // the absence of an event: a bounded look
	}
	first := server[0]
	lim.ConnState(first, http.StateIdle)
	a := <-acc
	if a.err != nil {
		t.Fatal(a.err)
	}
	if _, err := first.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle connection was not closed for the new one")
	}
	if _, err := io.WriteString(third, "x"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := a.c.Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("the third connection: %q, %v", b, err)
	}
	lim.mu.Lock()
	n := len(lim.conns)
	lim.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d connections counted, want 2", n)
	}

	// Both busy again: a waiting Accept ends when the listener closes.
	lim.ConnState(a.c, http.StateActive)
	dial()
	go accept()
	_ = ll.Close()
	select {
	case a := <-acc:
		if a.err == nil {
			t.Fatal("Accept after Close returned a connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waiting 5s after Close")
	}
}

// emfileListener fails its first accepts with EMFILE, then accepts.
type emfileListener struct {
	net.Listener
	fails int
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Out of descriptors, Accept closes the connection idle longest and tries
// again after a backoff: it does not return the error (net/http would
// only log it and retry, freeing nothing).
func TestConnLimitEMFILEBacksOffAndFreesIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := New(10, 0, 0, slog.New(slog.DiscardHandler))
	fl := &emfileListener{Listener: ln}
	ll := lim.Listen(fl)
	defer ll.Close()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	idle, err := ll.Accept()
	if err != nil {
		t.Fatal(err)
	}
	lim.ConnState(idle, http.StateIdle)
	fl.fails = 3
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got, err := ll.Accept()
	if err != nil {
		t.Fatalf("Accept after EMFILE: %v, want a connection", err)
	}
	defer got.Close()
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle connection was not closed to free a descriptor")
	}
	if fl.fails != 0 {
		t.Fatalf("%d EMFILE failures left, want all retried", fl.fails)
	}
}

// countHandler counts the log records by message.
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// One address holds at most per_address connections: each new one
// displaces its connection idle longest, and the 27 displacements are
// one log line. With the address's connections all busy, a new one goes
// to the reserve, and a reserve full of busy ones refuses the next.
func TestConnLimitPerAddressReserveAndLogRate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &countHandler{n: map[string]int{}}
	lim := New(100, 1, 3, slog.New(logs))
	ll := lim.Listen(ln)
	defer ll.Close()
	accept := func() *limitedConn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		a, err := ll.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a.(*limitedConn)
	}
	var last []*limitedConn
	for range 30 {
		last = append(last, accept())
	}
	lim.mu.Lock()
	n, perAddr := lim.nMain, lim.byAddr[last[0].addr]
	lim.mu.Unlock()
	if n != 3 || perAddr != 3 {
		t.Fatalf("%d connections, %d for the address; want 3", n, perAddr)
	}
	if got := logs.n["connection cap reached: closed the connections idle longest for new ones"]; got != 1 {
		t.Fatalf("%d log lines for 27 displaced connections, want 1", got)
	}
	for _, c := range last[27:] {
		lim.ConnState(c, http.StateActive)
	}
	r := accept()
	if !r.reserved {
		t.Fatal("a connection over a busy address's bound is not in the reserve")
	}
	lim.ConnState(r, http.StateActive)
	if lim.add(&fakeConn{}) != nil {
		t.Fatal("a connection was taken with the address and the reserve busy")
	}
}

// fakeConn is a connection from 127.0.0.1 that is never read.
type fakeConn struct{ net.Conn }

func (fakeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (fakeConn) Close() error         { return nil }
