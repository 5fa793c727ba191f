package destination

// A small legacy-era stdio MCP server, run by re-executing the test binary
// with SWITCHBOARD_TEST_SERVER=plain. It speaks newline-delimited JSON-RPC
// on stdin/stdout, refuses server/discover (legacy only), and has the
// tools the pool's tests use: echo {text}; wait {key}, answered
// "released:KEY" once release {key} is called; ask {text}, which sends
// sampling/createMessage ("question: TEXT") and answers "answer:REPLY".
// Each tool's text is in structuredContent.text too.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
)

const envServerMode = "SWITCHBOARD_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envServerMode) != "" {
		os.Exit(runTestServer())
	}
	os.Exit(m.Run())
}

// wireMsg is a JSON-RPC message as the test server sees it.
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type testServer struct {
	wmu sync.Mutex // guards out
	out *bufio.Writer

	mu      sync.Mutex
	waiters map[string]chan struct{}      // guarded by mu: by wait key; closed by release
	asks    map[string]chan *wireMsg      // guarded by mu: by the id of the server's own request
	running map[string]context.CancelFunc // guarded by mu: by request id
	nextAsk int                           // guarded by mu
}

func runTestServer() int {
	s := &testServer{out: bufio.NewWriter(os.Stdout), waiters: map[string]chan struct{}{},
		asks: map[string]chan *wireMsg{}, running: map[string]context.CancelFunc{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for in.Scan() {
		var m wireMsg
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Method != "" && m.ID != nil:
			ctx, cancel := context.WithCancel(context.Background())
			s.mu.Lock()
			s.running[string(m.ID)] = cancel
			s.mu.Unlock()
			go func() {
				defer func() {
					s.mu.Lock()
					delete(s.running, string(m.ID))
					s.mu.Unlock()
					cancel()
				}()
				s.request(ctx, &m)
			}()
		case m.Method == "notifications/cancelled":
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			s.mu.Lock()
			if cancel := s.running[string(p.RequestID)]; cancel != nil {
				cancel()
			}
			s.mu.Unlock()
		case m.Method == "":
			s.mu.Lock()
			ch := s.asks[string(m.ID)]
			delete(s.asks, string(m.ID))
			s.mu.Unlock()
			if ch != nil {
				ch <- &m
			}
		}
	}
	return 0 // stdin closed: the destination wants us gone
}

func (s *testServer) send(m wireMsg) {
	m.JSONRPC = "2.0"
	b, _ := json.Marshal(m)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.out.Write(b)
	s.out.WriteByte('\n')
	s.out.Flush()
}

func (s *testServer) result(id json.RawMessage, v any) {
	b, _ := json.Marshal(v)
	s.send(wireMsg{ID: id, Result: b})
}

func (s *testServer) fail(id json.RawMessage, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	s.send(wireMsg{ID: id, Error: b})
}

// waiter returns the channel release closes for key.
func (s *testServer) waiter(key string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.waiters[key]
	if ch == nil {
		ch = make(chan struct{})
		s.waiters[key] = ch
	}
	return ch
}

func (s *testServer) request(ctx context.Context, m *wireMsg) {
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.result(m.ID, map[string]any{"protocolVersion": p.ProtocolVersion,
			"capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo":   map[string]any{"name": "destination-testserver", "version": "1"}})
	case "ping":
		s.result(m.ID, map[string]any{})
	case "tools/list":
		var tools []map[string]any
		for _, n := range []string{"echo", "wait", "release", "ask"} {
			tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
		}
		s.result(m.ID, map[string]any{"tools": tools})
	case "tools/call":
		s.tool(ctx, m)
	default:
		s.fail(m.ID, -32601, "method not found: "+m.Method)
	}
}

func (s *testServer) tool(ctx context.Context, m *wireMsg) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Text string `json:"text"`
			Key  string `json:"key"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a := p.Arguments
	text := func(t string) {
		s.result(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": t}},
			"structuredContent": map[string]any{"text": t}})
	}
	switch p.Name {
	case "echo":
		text(a.Text)
	case "wait":
		select {
		case <-s.waiter(a.Key):
			text("released:" + a.Key)
		case <-ctx.Done():
		}
	case "release":
		// Respond first, then release: this call ends before the
		// released one does.
		text("ok")
		ch := s.waiter(a.Key)
		s.mu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		s.mu.Unlock()
	case "ask":
		s.mu.Lock()
		s.nextAsk++
		id := json.RawMessage(fmt.Sprintf(`"ask-%d"`, s.nextAsk))
		ch := make(chan *wireMsg, 1)
		s.asks[string(id)] = ch
		s.mu.Unlock()
		params, _ := json.Marshal(map[string]any{"maxTokens": 10,
			"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "question: " + a.Text}}}})
		s.send(wireMsg{ID: id, Method: "sampling/createMessage", Params: params})
		var r *wireMsg
		select {
		case r = <-ch:
		case <-ctx.Done():
			return
		}
		var res struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
			text("error:" + string(r.Error))
			return
		}
		text("answer:" + res.Content.Text)
	default:
		s.fail(m.ID, -32602, "unknown tool "+p.Name)
	}
}
