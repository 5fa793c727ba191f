package gateway

import (
	"io"
	"log/slog"
	"net"
	"net/http"
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
	lim := newConnLimit(2, slog.New(slog.DiscardHandler))
	ll := lim.listen(ln)
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
		lim.connState(a.c, http.StateActive)
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
	lim.connState(first, http.StateIdle)
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
	lim.connState(a.c, http.StateActive)
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
