package peertest

// A small hand-written stdio MCP server, run by re-executing the test binary
// with SWITCHBOARD_TEST_SERVER=<mode> (a package's TestMain calls
// StdioServerMain first). It speaks newline-delimited JSON-RPC on
// stdin/stdout, is a legacy-era server (server/discover is not found but
// in mode dual), and is deliberately simple and observable: every tool
// result carries the server's pid and the request id it saw, and the
// "state" tool reports what the server recorded (log levels set,
// subscriptions, cancellations, answers to its own requests).
//
// Modes:
//
//	plain    a well-behaved server
//	garbage  banners, blank lines and non-JSON junk on stdout around every
//	         message, and lots of stderr
//	flood    a goroutine floods stdout with garbage lines the whole time
//	dual     answers server/discover too (either era's requests)
//	bulk     echo only, its text passed through undecoded (bulkserver.go),
//	         for large messages
//
// Tools: echo {text}; pid; slow {ms}; wait {key}, answered "released:KEY"
// once release {key} is called; progress {n}; log {level, text, after};
// ask {text, key, method}, which sends sampling/createMessage (or method)
// and answers "answer:REPLY"; update {uri}; changed; big {bytes}; crash;
// state; held, answered only once the server reads its next line.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// StdioServerEnv names the mode of the stdio test server: a test binary
// started with it set runs the server (StdioServerMain) instead of its
// tests.
const StdioServerEnv = "SWITCHBOARD_TEST_SERVER"

// StdioServerDieEnv names a file: when it exists at start-up the stdio
// test server exits 1 at once (to exhaust restarts).
const StdioServerDieEnv = "SWITCHBOARD_TEST_DIE_FILE"

// StdioServerMain runs the stdio test server and exits when StdioServerEnv
// is set; it returns at once otherwise. Call it first in TestMain.
func StdioServerMain() {
	if mode := os.Getenv(StdioServerEnv); mode != "" {
		os.Exit(runStdioServer(mode))
	}
}

// WireMsg is a JSON-RPC message as the stdio test server (and tests) see it.
type WireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *WireError      `json:"error,omitempty"`
}

// WireError is the error of a WireMsg.
type WireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type inflight struct {
	cancel context.CancelFunc
	tag    string
}

type stdioServer struct {
	mode string

	wmu  sync.Mutex
	out  *bufio.Writer
	junk int

	mu        sync.Mutex
	levels    []string
	subs      []string
	cancelled []string
	answers   []string
	running   map[string]*inflight     // by raw request id
	waiters   map[string]chan struct{} // wait/release keys
	asks      map[string]chan *WireMsg // server→client requests by id
	nextAsk   int
	client    json.RawMessage // clientInfo of the initialize it received
	held      []func()        // answers of "held" calls, sent when the next line is read
}

func runStdioServer(mode string) int {
	if mode == "bulk" {
		return runBulkServer()
	}
	if f := os.Getenv(StdioServerDieEnv); f != "" {
		if _, err := os.Stat(f); err == nil {
			fmt.Fprintln(os.Stderr, "testserver: die file present; exiting")
			return 1
		}
	}
	s := &stdioServer{
		mode:    mode,
		out:     bufio.NewWriterSize(os.Stdout, 64<<10),
		running: map[string]*inflight{},
		waiters: map[string]chan struct{}{},
		asks:    map[string]chan *WireMsg{},
	}
	switch mode {
	case "garbage":
		s.raw("Starting switchboard test server v0.0.1 ...", "", "   ", "[INFO] GARBAGE banner: ready to serve",
			"{this is GARBAGE and not json", `["GARBAGE","array"]`, "\t")
		for i := 0; i < 300; i++ {
			fmt.Fprintf(os.Stderr, "STDERR-NOISE line %d: the quick brown fox jumps over the lazy dog\n", i)
		}
	case "flood":
		go s.flood()
	}
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		s.mu.Lock()
		held := s.held
		s.held = nil
		s.mu.Unlock()
		for _, answer := range held {
			answer()
		}
		if len(strings.TrimSpace(string(line))) > 0 {
			s.handleLine(line)
		}
		if err != nil {
			return 0 // stdin closed: we are wanted gone
		}
	}
}

// raw writes lines that are not messages (junk) to stdout.
func (s *stdioServer) raw(lines ...string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, l := range lines {
		s.out.WriteString(l)
		s.out.WriteByte('\n')
	}
	s.out.Flush()
}

func (s *stdioServer) flood() {
	pad := strings.Repeat("x", 120)
	long := "FLOOD-LONG " + strings.Repeat("y", 100<<10) // longer than the gateway's read buffer
	for n := 0; ; n++ {
		lines := make([]string, 0, 17)
		for i := 0; i < 16; i++ {
			lines = append(lines, fmt.Sprintf("FLOOD garbage %d/%d %s", n, i, pad))
		}
		if n%8 == 0 {
			lines = append(lines, "{FLOOD not json either", "")
		}
		if n%64 == 0 {
			lines = append(lines, long)
		}
		s.raw(lines...)
		time.Sleep(time.Millisecond) // a flood, not a busy loop that starves the machine
	}
}

// send writes one message (in garbage mode wrapped in junk).
func (s *stdioServer) send(m any) {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.mode == "garbage" {
		s.junk++
		fmt.Fprintf(s.out, "GARBAGE before message %d\n\n{GARBAGE-not-json\n", s.junk)
		fmt.Fprintf(os.Stderr, "STDERR-NOISE about to send message %d\n", s.junk)
	}
	s.out.Write(b)
	s.out.WriteByte('\n')
	if s.mode == "garbage" {
		fmt.Fprintf(s.out, "   \nGARBAGE after message %d\n", s.junk)
	}
	s.out.Flush()
}

func (s *stdioServer) result(id json.RawMessage, v any) {
	b, _ := json.Marshal(v)
	s.send(WireMsg{JSONRPC: "2.0", ID: id, Result: b})
}

func (s *stdioServer) fail(id json.RawMessage, code int, msg string) {
	s.send(WireMsg{JSONRPC: "2.0", ID: id, Error: &WireError{Code: code, Message: msg}})
}

func (s *stdioServer) notify(method string, params any) {
	b, _ := json.Marshal(params)
	s.send(WireMsg{JSONRPC: "2.0", Method: method, Params: b})
}

func (s *stdioServer) handleLine(line []byte) {
	var m WireMsg
	if err := json.Unmarshal(line, &m); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: bad line %q: %v\n", line, err)
		return
	}
	switch {
	case m.Method != "" && m.ID != nil:
		ctx, cancel := context.WithCancel(context.Background())
		key := string(m.ID)
		s.mu.Lock()
		in := &inflight{cancel: cancel}
		if m.Method == "tools/call" {
			var p struct {
				Arguments struct {
					Tag string `json:"tag"`
					Key string `json:"key"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(m.Params, &p)
			in.tag = p.Arguments.Tag + p.Arguments.Key
		}
		s.running[key] = in
		s.mu.Unlock()
		go func() {
			defer func() {
				s.mu.Lock()
				delete(s.running, key)
				s.mu.Unlock()
				cancel()
			}()
			s.request(ctx, &m)
		}()
	case m.Method != "":
		s.notification(&m)
	default:
		// An answer to one of our requests, recorded here, synchronously,
		// so a request read after it sees it.
		s.mu.Lock()
		ch := s.asks[string(m.ID)]
		delete(s.asks, string(m.ID))
		if ch != nil {
			s.answers = append(s.answers, answerOf(&m))
		}
		s.mu.Unlock()
		if ch != nil {
			ch <- &m
		}
	}
}

func (s *stdioServer) notification(m *WireMsg) {
	if m.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Recorded here, synchronously, so a request read after this
	// notification sees it.
	if in := s.running[string(p.RequestID)]; in != nil {
		s.cancelled = append(s.cancelled, in.tag)
		in.cancel()
	}
}

var knownVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

func (s *stdioServer) request(ctx context.Context, m *WireMsg) {
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string          `json:"protocolVersion"`
			ClientInfo      json.RawMessage `json:"clientInfo"`
		}
		_ = json.Unmarshal(m.Params, &p)
		v := p.ProtocolVersion
		if !knownVersions[v] {
			v = "2025-11-25"
		}
		s.mu.Lock()
		s.client = p.ClientInfo
		s.mu.Unlock()
		s.result(m.ID, map[string]any{
			"protocolVersion": v,
			"capabilities": map[string]any{
				"tools":     map[string]any{"listChanged": true},
				"resources": map[string]any{"subscribe": true, "listChanged": true},
				"logging":   map[string]any{},
			},
			"serverInfo":   map[string]any{"name": "switchboard-testserver", "version": "1"},
			"instructions": fmt.Sprintf("pid=%d", os.Getpid()),
		})
	case "server/discover":
		if s.mode != "dual" {
			// A legacy server (its tools send server→client requests).
			s.fail(m.ID, -32601, "method not found: "+m.Method)
			return
		}
		// Mode dual: the server answers either era's
		// requests (its tools that ask for input are not used there).
		s.result(m.ID, map[string]any{
			"resultType":        "complete",
			"supportedVersions": []string{"2026-07-28", "2025-11-25"},
			"capabilities": map[string]any{
				"tools":     map[string]any{"listChanged": true},
				"resources": map[string]any{"subscribe": true, "listChanged": true},
			},
			"_meta": map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "switchboard-testserver", "version": "1"}},
			"ttlMs": 0, "cacheScope": "private",
		})
	case "ping":
		s.result(m.ID, map[string]any{})
	case "tools/list":
		var tools []map[string]any
		for _, n := range []string{"echo", "pid", "slow", "wait", "release", "progress", "log", "ask", "update", "changed", "big", "crash", "state"} {
			tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
		}
		s.result(m.ID, map[string]any{"tools": tools})
	case "logging/setLevel":
		var p struct {
			Level string `json:"level"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.mu.Lock()
		s.levels = append(s.levels, p.Level)
		s.mu.Unlock()
		s.result(m.ID, map[string]any{})
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.mu.Lock()
		s.subs = append(s.subs, strings.TrimPrefix(m.Method, "resources/")+":"+p.URI)
		s.mu.Unlock()
		s.result(m.ID, map[string]any{})
	case "tools/call":
		s.tool(ctx, m)
	default:
		s.fail(m.ID, -32601, "method not found: "+m.Method)
	}
}

type toolArgs struct {
	Text   string `json:"text"`
	MS     int    `json:"ms"`
	N      int    `json:"n"`
	Level  string `json:"level"`
	After  bool   `json:"after"`
	Key    string `json:"key"`
	Tag    string `json:"tag"`
	URI    string `json:"uri"`
	Bytes  int    `json:"bytes"`
	Method string `json:"method"`
}

func (s *stdioServer) tool(ctx context.Context, m *WireMsg) {
	var p struct {
		Name      string   `json:"name"`
		Arguments toolArgs `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
			Traceparent   string          `json:"traceparent"` // echoed back in structuredContent
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		s.fail(m.ID, -32602, "bad params: "+err.Error())
		return
	}
	a := p.Arguments
	tok := p.Meta.ProgressToken
	text := func(t string, extra ...any) {
		sc := map[string]any{"text": t, "pid": os.Getpid(), "id": m.ID}
		if p.Meta.Traceparent != "" {
			sc["traceparent"] = p.Meta.Traceparent
		}
		for i := 0; i+1 < len(extra); i += 2 {
			sc[extra[i].(string)] = extra[i+1]
		}
		s.result(m.ID, map[string]any{
			"content":           []any{map[string]any{"type": "text", "text": t}},
			"structuredContent": sc,
		})
	}
	progress := func(n, total int, msg string) {
		if tok != nil {
			s.notify("notifications/progress", map[string]any{"progressToken": tok, "progress": n, "total": total, "message": msg})
		}
	}
	switch p.Name {
	case "echo":
		text(a.Text)
	case "held":
		// Answered only once the server reads its next line: the child
		// of issue 27, sitting on a request until more input comes.
		s.mu.Lock()
		s.held = append(s.held, func() { text("held") })
		s.mu.Unlock()
	case "pid":
		text(fmt.Sprint(os.Getpid()))
	case "slow":
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
			text("slept")
		case <-ctx.Done(): // cancelled: no response, as the spec says
		}
	case "wait":
		progress(0, 1, "waiting")
		select {
		case <-s.waiter(a.Key):
			text("released:" + a.Key)
		case <-ctx.Done():
		}
	case "release":
		// Respond first, then release: the client sees this call end
		// before anything the released call does.
		text("ok")
		s.mu.Lock()
		ch := s.waiterLocked(a.Key)
		select {
		case <-ch:
		default:
			close(ch)
		}
		s.mu.Unlock()
	case "progress":
		for i := 1; i <= a.N; i++ {
			progress(i, a.N, fmt.Sprintf("step %d", i))
		}
		text(string(tok))
	case "log":
		if !a.After {
			s.notify("notifications/message", map[string]any{"level": a.Level, "logger": "testserver", "data": a.Text})
		}
		text("logged")
		if a.After {
			s.notify("notifications/message", map[string]any{"level": a.Level, "logger": "testserver", "data": a.Text})
		}
	case "ask":
		if a.Key != "" {
			progress(0, 1, "waiting")
			select {
			case <-s.waiter(a.Key):
			case <-ctx.Done():
				return
			}
		}
		s.mu.Lock()
		s.nextAsk++
		id := json.RawMessage(fmt.Sprintf(`"ask-%d"`, s.nextAsk))
		ch := make(chan *WireMsg, 1)
		s.asks[string(id)] = ch
		s.mu.Unlock()
		params, _ := json.Marshal(map[string]any{
			"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "question: " + a.Text}}},
			"maxTokens": 10,
		})
		method := a.Method
		switch method {
		case "":
			method = "sampling/createMessage"
		case "elicitation/create":
			params, _ = json.Marshal(map[string]any{"message": "name?", "requestedSchema": map[string]any{"type": "object"}})
		case "roots/list":
			params = nil
		}
		s.send(WireMsg{JSONRPC: "2.0", ID: id, Method: method, Params: params})
		var r *WireMsg
		select {
		case r = <-ch:
		case <-ctx.Done():
			return
		}
		text(answerOf(r))
	case "update":
		s.notify("notifications/resources/updated", map[string]any{"uri": a.URI})
		text("updated")
	case "changed":
		s.notify("notifications/tools/list_changed", map[string]any{})
		text("changed")
	case "big":
		text(strings.Repeat("b", a.Bytes))
	case "crash":
		s.wmu.Lock() // nothing more gets out
		os.Exit(1)
	case "state":
		s.mu.Lock()
		st := map[string]any{"levels": s.levels, "subs": s.subs, "cancelled": s.cancelled, "answers": s.answers, "client": s.client}
		s.mu.Unlock()
		b, _ := json.Marshal(st)
		text(string(b), "state", st)
	default:
		s.fail(m.ID, -32602, "unknown tool "+p.Name)
	}
}

func answerOf(r *WireMsg) string {
	if r.Error != nil {
		return fmt.Sprintf("error:%d:%s", r.Error.Code, r.Error.Message)
	}
	var res struct {
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(r.Result, &res) != nil || res.Content.Type != "text" {
		return "result:" + string(r.Result) // not a sampling result
	}
	return "answer:" + res.Content.Text
}

func (s *stdioServer) waiter(key string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiterLocked(key)
}

func (s *stdioServer) waiterLocked(key string) chan struct{} {
	ch := s.waiters[key]
	if ch == nil {
		ch = make(chan struct{})
		s.waiters[key] = ch
	}
	return ch
}
