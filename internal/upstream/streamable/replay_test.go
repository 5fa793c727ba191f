package streamable

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// brokenServer answers initialize and refuses every other request with the
// error a server without handshake gives, as a broken (or forever
// restarting) upstream would. It counts initializes and pings.
type brokenServer struct {
	code    int
	message string

	mu    sync.Mutex
	count map[string]int
}

func (b *brokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.NewDecoder(r.Body).Decode(&m)
	b.mu.Lock()
	b.count[m.Method]++
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case m.Method == "initialize":
		w.Header().Set(mcp.HeaderSessionID, "broken-session")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"broken","version":"1"}}}`, m.ID)
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	default:
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, m.ID, b.code, b.message)
	}
}

func (b *brokenServer) n(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count[method]
}

// TestClientReplayBounded: an upstream that refuses everything after
// initialize gets at most maxReplays replays a minute; every request is
// still answered (with the server's error, unchanged), and the client is
// told of each replay.
func TestClientReplayBounded(t *testing.T) {
	for _, c := range []struct {
		name    string
		code    int
		message string
	}{
		{"invalid params", jsonrpc.InvalidParams, "Invalid request parameters"},
		{"not initialized", jsonrpc.InternalError, "Server not initialized"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &brokenServer{code: c.code, message: c.message, count: map[string]int{}}
			srv := httptest.NewServer(b)
			t.Cleanup(srv.Close)
			p := dial(t, ClientOptions{URL: srv.URL})
			p.handshake()
			const calls = 8
			for i := range calls {
				id := 10 + i
				p.write(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)
				e := p.failure(id)
				if e.Code != c.code || e.Message != c.message {
					t.Fatalf("call %d: error %d %q, want the server's %d %q", i, e.Code, e.Message, c.code, c.message)
				}
			}
			if n := b.n("initialize"); n != 1+maxReplays {
				t.Errorf("initialize sent %d times, want %d (1 + the bound)", n, 1+maxReplays)
			}
			if n := b.n("tools/list"); n != calls+maxReplays {
				t.Errorf("tools/list sent %d times, want %d (each replay retries once)", n, calls+maxReplays)
			}
			notices := 0
			for _, m := range p.history {
				if m.Method == "notifications/message" {
					notices++
				}
			}
			if notices != maxReplays {
				t.Errorf("%d notifications/message, want %d", notices, maxReplays)
			}
		})
	}
}

func TestLostHandshake(t *testing.T) {
	for _, c := range []struct {
		e    *jsonrpc.Error
		want bool
	}{
		{nil, false},
		{&jsonrpc.Error{Code: jsonrpc.InvalidParams, Message: "x"}, true},
		{&jsonrpc.Error{Code: jsonrpc.InternalError, Message: "Server not initialized"}, true},
		{&jsonrpc.Error{Code: -32000, Message: "x", Data: json.RawMessage(`"Received request before initialization was complete"`)}, true},
		{&jsonrpc.Error{Code: jsonrpc.MethodNotFound, Message: "Method not found"}, false},
		{&jsonrpc.Error{Code: jsonrpc.InternalError, Message: "boom"}, false},
	} {
		if got := lostHandshake(c.e); got != c.want {
			t.Errorf("lostHandshake(%+v) = %v, want %v", c.e, got, c.want)
		}
	}
}
