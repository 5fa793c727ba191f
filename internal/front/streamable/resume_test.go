package streamable_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/cluster/eventlog"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// sessionDest opens legacy sessions on a backend that answers nothing:
// the test puts the listen stream's messages in the session itself.
type sessionDest struct{ okDest }

func (sessionDest) Open(_ context.Context, _ *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return idleBackend{}, jsonrpc.NewResult(init.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"t","version":"1"}}`)), nil
}

type idleBackend struct{}

func (idleBackend) Call(context.Context, *jsonrpc.Message) (session.Call, error) {
	return nil, errors.New("no calls here")
}
func (idleBackend) Notify(context.Context, *jsonrpc.Message) error  { return nil }
func (idleBackend) Respond(context.Context, *jsonrpc.Message) error { return nil }
func (idleBackend) Leave()                                          {}

// listenStream is a GET stream read by the test.
type listenStream struct {
	t      *testing.T
	resp   *http.Response
	r      *sse.Reader
	cancel context.CancelFunc
	addr   string // the client's end of the stream's connection
}

// openListen opens a GET stream of session sid, resuming from lastID
// ("": none).
func openListen(t *testing.T, base, sid, lastID string) *listenStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	var addr string
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { addr = c.Conn.LocalAddr().String() }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET: %v, %v", resp, err)
	}
	l := &listenStream{t: t, resp: resp, r: sse.NewReader(resp.Body, 0), cancel: cancel, addr: addr}
	t.Cleanup(l.close)
	return l
}

func (l *listenStream) close() { l.cancel(); l.resp.Body.Close() }

// connsClosed reports the remote address of each connection srv closes:
// a stream's connection closes only after its handler has returned.
func connsClosed(srv *httptest.Server) <-chan string {
	closed := make(chan string, 64) // more than the connections of a test
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- c.RemoteAddr().String()
		}
	}
	return closed
}

// closeAndWait closes the stream and waits until the server has closed
// its connection, so its handler no longer takes the session's messages.
func (l *listenStream) closeAndWait(closed <-chan string) {
	l.t.Helper()
	l.close()
	fail := time.NewTimer(time.Minute)
	defer fail.Stop()
	for {
		select {
		case a := <-closed:
			if a == l.addr {
				return
			}
		case <-fail.C:
			l.t.Fatalf("the server did not close the stream's connection %s", l.addr)
		}
	}
}

// next reads the next event: the number of its notification and its id.
func (l *listenStream) next() (n int, id string) {
	l.t.Helper()
	ev, err := l.r.Next()
	if err != nil {
		l.t.Fatalf("listen stream: %v", err)
	}
	var m struct {
		Params struct{ N int } `json:"params"`
	}
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		l.t.Fatalf("event %q: %v", ev.Data, err)
	}
	return m.Params.N, ev.ID
}

// expect reads events and checks they are want, in order.
func (l *listenStream) expect(when string, want ...int) []string {
	l.t.Helper()
	var ids []string
	for _, w := range want {
		n, id := l.next()
		if n != w || id == "" {
			l.t.Fatalf("%s: event %d (id %q), want %d with an id", when, n, id, w)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestListenResume: the events of a GET stream carry ids; a GET with the
// Last-Event-ID of one gets every later event of that stream, in order,
// once (those it missed from the log, then the queued ones live), and
// takes over the stream if it is still open; an unknown Last-Event-ID
// starts a new stream without replay; DELETE drops the session's events.
func TestListenResume(t *testing.T) {
	tbl := &session.Table{}
	log := eventlog.NewMemory(eventlog.Options{})
	h := streamable.NewHandler(sessionDest{}, streamable.Options{Name: "d", Sessions: tbl, Events: log, KeepAlive: -1})
	srv := httptest.NewUnstartedServer(h)
	closed := connsClosed(srv)
	srv.Start()
	defer srv.Close()

	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	s := tbl.Get(sid)
	if s == nil {
		t.Fatalf("no session %q (status %d)", sid, resp.StatusCode)
	}
	send := func(from, to int) {
		for n := from; n <= to; n++ {
			s.Deliver(jsonrpc.NewNotification("notifications/test", jsonrpc.Marshal(map[string]int{"n": n})))
		}
	}

	first := openListen(t, srv.URL, sid, "")
	send(1, 5)
	ids := first.expect("first stream", 1, 2, 3, 4, 5)
	tag, _, _ := strings.Cut(ids[0], "_")
	for _, id := range ids {
		if !strings.HasPrefix(id, tag+"_") {
			t.Errorf("id %q is not of the stream's tag %q", id, tag)
		}
	}
	// The client drops the stream (say it lost events 3 to 5 in flight);
	// events 6 and 7 come meanwhile.
	first.close()
	send(6, 7)
	second := openListen(t, srv.URL, sid, ids[1])
	ids2 := second.expect("resumed after event 2", 3, 4, 5, 6, 7)
	if ids2[0] != ids[2] || ids2[2] != ids[4] {
		t.Errorf("replayed ids %q, first given %q", ids2[:3], ids[2:])
	}
	send(8, 8)
	ids2 = append(ids2, second.expect("live", 8)...)

	// A resumption while the stream is still open takes it over: the
	// old one ends, the new one alone gets what follows.
	third := openListen(t, srv.URL, sid, ids2[4]) // after event 7
	third.expect("taken over after event 7", 8)
	if _, err := second.r.Next(); err == nil {
		t.Error("the stream taken over still delivers")
	}
	send(9, 9)
	third.expect("live after the takeover", 9)
	// Until the server notices the client left, the old stream's handler
	// may still take a message and write it into the dead connection.
	third.closeAndWait(closed)

	// Not one of ours: a new stream, no replay.
	fourth := openListen(t, srv.URL, sid, "bogus")
	send(10, 10)
	_, id := fourth.next()
	if strings.HasPrefix(id, tag+"_") {
		t.Errorf("an unknown Last-Event-ID continued stream %q", tag)
	}
	fourth.close()

	req, _ = http.NewRequest(http.MethodDelete, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v, %v", resp, err)
	}
	_, cursor, _ := strings.Cut(ids[0], "_")
	for _, err := range log.After(context.Background(), s.LogName(), tag, cursor) {
		if !errors.Is(err, eventlog.ErrEventsPurged) {
			t.Errorf("after DELETE the log still has the stream: %v", err)
		}
		break
	}
}
