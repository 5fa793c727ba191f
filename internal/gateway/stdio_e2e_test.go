package gateway_test

// End-to-end tests of stdio destinations: a real Gateway on 127.0.0.1:0,
// real child processes (this test binary re-executed as the server of
// testserver_test.go, or the go-sdk everything-server), raw net/http
// requests and the official go-sdk client.
//
// Synchronisation is by channels and deadlines only: the audit writer and
// the log handler signal every record they take, streams deliver events on
// channels, and polling (with a deadline) is used only to see a process
// gone.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// waitFor bounds every wait for something that should happen promptly.
const waitFor = 10 * time.Second

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// fastRestart is the restart policy of most tests: quick, and enough
// attempts that a test never exhausts it by accident.
const fastRestart = "restart:\n  delays: [20ms]\n  max_attempts: 5\n"

// ---------------------------------------------------------------------------
// Processes (/proc)

// procState returns the parent pid and state letter of pid.
func procState(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+4 > len(s) {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0][0], true
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, st, ok := procState(pid)
	return ok && st != 'Z'
}

// procsWithEnv lists the live processes (any parent: orphans too) whose
// environment holds kv.
func procsWithEnv(kv string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(env, []byte{0}) {
			if string(v) == kv {
				if alive(pid) {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}

// waitGone polls (the one place polling is used) until none of pids is
// alive, or fails after d.
func waitGone(t testing.TB, d time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes still alive after %s: %v", d, left)
			for _, p := range left {
				_ = syscall.Kill(p, syscall.SIGKILL) // do not leak them past the test
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Capture: the audit writer and the operational log, both signalling.

// lineSink collects audit lines and signals each one.
type lineSink struct {
	mu     sync.Mutex
	buf    []byte
	lines  [][]byte
	signal chan struct{} // closed and replaced on every line
}

func newLineSink() *lineSink { return &lineSink{signal: make(chan struct{})} }

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		s.lines = append(s.lines, bytes.Clone(s.buf[:i]))
		s.buf = s.buf[i+1:]
	}
	close(s.signal)
	s.signal = make(chan struct{})
	return len(p), nil
}

// auditLine is one audit record, with the set of keys it had.
type auditLine struct {
	Time         string          `json:"time"`
	Destination  string          `json:"destination"`
	View         string          `json:"view"`
	Session      string          `json:"session"`
	SourceIP     string          `json:"source_ip"`
	HTTPMethod   string          `json:"http_method"`
	Path         string          `json:"path"`
	MCPMethod    string          `json:"mcp_method"`
	RPCID        json.RawMessage `json:"rpc_id"`
	Status       int             `json:"status"`
	LatencyMS    float64         `json:"latency_ms"`
	Error        string          `json:"error"`
	RequestBody  string          `json:"request_body"`
	ResponseBody string          `json:"response_body"`
	keys         map[string]bool
}

func (s *lineSink) parsed(t testing.TB) []auditLine {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []auditLine
	for _, l := range s.lines {
		var a auditLine
		if err := json.Unmarshal(l, &a); err != nil {
			t.Fatalf("audit line is not JSON: %v: %s", err, l)
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(l, &keys)
		a.keys = map[string]bool{}
		for k := range keys {
			a.keys[k] = true
		}
		out = append(out, a)
	}
	return out
}

// wait blocks until an audit line satisfies pred (or fails after waitFor).
func (s *lineSink) wait(t testing.TB, what string, pred func(auditLine) bool) auditLine {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		sig := s.signal
		s.mu.Unlock()
		for _, a := range s.parsed(t) {
			if pred(a) {
				return a
			}
		}
		select {
		case <-sig:
		case <-deadline.C:
			t.Fatalf("no audit line for %s within %s", what, waitFor)
		}
	}
}

// logRec is one operational log record.
type logRec struct {
	Time  time.Time
	Level slog.Level
	Msg   string
	Attrs string
}

// logStore keeps the first and last records (a flood must not eat memory)
// and counts all of them; it signals every record.
type logStore struct {
	mu     sync.Mutex
	head   []logRec
	tail   []logRec
	counts map[string]int // by level + " " + msg
	signal chan struct{}
}

const logKeep = 2000

func newLogStore() *logStore {
	return &logStore{counts: map[string]int{}, signal: make(chan struct{})}
}

func (s *logStore) add(r logRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.head) < logKeep {
		s.head = append(s.head, r)
	} else {
		s.tail = append(s.tail, r)
		if len(s.tail) > 2*logKeep {
			s.tail = append(s.tail[:0], s.tail[len(s.tail)-logKeep:]...)
		}
	}
	s.counts[r.Level.String()+" "+r.Msg]++
	close(s.signal)
	s.signal = make(chan struct{})
}

func (s *logStore) all() []logRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(slices.Clone(s.head), s.tail...)
}

func (s *logStore) count(level slog.Level, msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[level.String()+" "+msg]
}

// wait blocks until a kept record matches (or fails after waitFor).
func (s *logStore) wait(t testing.TB, level slog.Level, msg, attrs string) logRec {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		sig := s.signal
		s.mu.Unlock()
		for _, r := range s.all() {
			if r.Level == level && r.Msg == msg && strings.Contains(r.Attrs, attrs) {
				return r
			}
		}
		select {
		case <-sig:
		case <-deadline.C:
			t.Fatalf("no %s log %q with %q within %s", level, msg, attrs, waitFor)
		}
	}
}

// logHandler is a slog.Handler writing into a logStore.
type logHandler struct {
	store *logStore
	attrs string
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.store.add(logRec{Time: r.Time, Level: r.Level, Msg: r.Message, Attrs: b.String()})
	return nil
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &logHandler{store: h.store, attrs: b.String()}
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }

// ---------------------------------------------------------------------------
// The gateway under test.

// dest describes one stdio destination of a test config.
type dest struct {
	name      string
	mode      string // test server mode; "" with command set
	isolation string // "" = the default (shared)
	command   []string
	env       map[string]string
	extra     string // more YAML keys of the destination, unindented
}

type harness struct {
	t      *testing.T
	tag    string
	base   string
	audit  *lineSink
	logs   *logStore
	client *http.Client // requests with a deadline
	tr     *http.Transport
	cancel context.CancelFunc
	served chan error
	once   sync.Once
}

// configYAML renders a config: top (global keys) plus the destinations.
func configYAML(t testing.TB, tag, top string, dests ...dest) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b strings.Builder
	b.WriteString(top)
	if top != "" && !strings.HasSuffix(top, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("destinations:\n")
	for _, d := range dests {
		fmt.Fprintf(&b, "  %s:\n    type: stdio\n", d.name)
		cmd := d.command
		env := map[string]string{envServerTag: tag}
		if cmd == nil {
			cmd = []string{exe}
			env[envServerMode] = d.mode
			// A -race child otherwise sleeps 1 s at exit.
			env["GORACE"] = "atexit_sleep_ms=0"
		}
		for k, v := range d.env {
			env[k] = v
		}
		qs := make([]string, len(cmd))
		for i, c := range cmd {
			qs[i] = q(c)
		}
		fmt.Fprintf(&b, "    command: [%s]\n    env:\n", strings.Join(qs, ", "))
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "      %s: %s\n", k, q(env[k]))
		}
		if d.isolation != "" {
			fmt.Fprintf(&b, "    isolation: %s\n", d.isolation)
		}
		for _, l := range strings.Split(strings.TrimSpace(d.extra), "\n") {
			if l != "" {
				fmt.Fprintf(&b, "    %s\n", l)
			}
		}
	}
	return b.String()
}

var tagSeq struct {
	mu sync.Mutex
	n  int
}

func newTag(t testing.TB) string {
	tagSeq.mu.Lock()
	defer tagSeq.mu.Unlock()
	tagSeq.n++
	return fmt.Sprintf("%d-%d-%s", os.Getpid(), tagSeq.n, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
}

// start builds a Gateway from YAML and serves it on 127.0.0.1:0 until the
// test ends (or h.stop). Every process it started must be gone by then.
// It is startAgg without extra YAML.
func start(t *testing.T, top string, dests ...dest) *harness {
	t.Helper()
	return startAgg(t, top, "", dests...)
}

// stop shuts the gateway down, waits for Serve to return and checks that no
// process of this test is left (orphans included).
func (h *harness) stop() {
	h.t.Helper()
	h.once.Do(func() {
		// A dialed but unused client connection would hold up Shutdown
		// for 5 s (net/http waits on connections in StateNew).
		h.tr.CloseIdleConnections()
		h.cancel()
		select {
		case err := <-h.served:
			if err != nil {
				h.t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			h.t.Errorf("Serve did not return within 20s of shutdown")
		}
		h.tr.CloseIdleConnections()
		waitGone(h.t, 5*time.Second, procsWithEnv(envServerTag+"="+h.tag)...)
	})
}

// procs lists this test's server processes.
func (h *harness) procs() []int { return procsWithEnv(envServerTag + "=" + h.tag) }

func (h *harness) url(path string) string { return h.base + path }

// resp is a complete HTTP answer, with its JSON-RPC messages (one JSON
// body, or the message events of an SSE body).
type resp struct {
	status int
	header http.Header
	body   []byte
	sse    bool
	msgs   []wireMsg
}

func (r *resp) String() string {
	return fmt.Sprintf("HTTP %d %s: %s", r.status, r.header.Get("Content-Type"), clip(r.body))
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// last returns the final message (the response) of r.
func (r *resp) last(t testing.TB) wireMsg {
	t.Helper()
	if len(r.msgs) == 0 {
		t.Fatalf("no JSON-RPC message in %s", r)
	}
	return r.msgs[len(r.msgs)-1]
}

func mediaType(h http.Header) string {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt
}

// newRequest builds a request; hdr are name/value pairs that override the
// defaults (an empty value removes the header).
func (h *harness) newRequest(ctx context.Context, method, path string, body []byte, hdr ...string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.url(path), rd)
	if err != nil {
		return nil, err
	}
	switch method {
	case http.MethodPost:
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	case http.MethodGet:
		req.Header.Set("Accept", "text/event-stream")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	return req, nil
}

// send performs a request and reads the whole answer (usable from any
// goroutine).
func (h *harness) send(method, path string, body []byte, hdr ...string) (*resp, error) {
	req, err := h.newRequest(context.Background(), method, path, body, hdr...)
	if err != nil {
		return nil, err
	}
	hr, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(hr.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading body: %w", method, path, err)
	}
	r := &resp{status: hr.StatusCode, header: hr.Header, body: b}
	switch mediaType(hr.Header) {
	case "text/event-stream":
		r.sse = true
		err = parseSSE(bytes.NewReader(b), func(ev sseEvent) bool {
			if ev.name == "message" {
				var m wireMsg
				if e := json.Unmarshal(ev.data, &m); e != nil {
					err = fmt.Errorf("SSE event is not JSON-RPC: %v: %s", e, ev.data)
					return false
				}
				r.msgs = append(r.msgs, m)
			}
			return true
		})
		if err != nil && !errors.Is(err, io.EOF) {
			return r, err
		}
	case "application/json":
		var m wireMsg
		if json.Unmarshal(b, &m) == nil && m.JSONRPC == "2.0" {
			r.msgs = append(r.msgs, m)
		}
	}
	return r, nil
}

func (h *harness) do(method, path string, body []byte, hdr ...string) *resp {
	h.t.Helper()
	r, err := h.send(method, path, body, hdr...)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data []byte
}

// parseSSE reads an event stream and calls emit for each event until emit
// returns false or the stream ends. It is independent of the gateway's own
// SSE code on purpose.
func parseSSE(r io.Reader, emit func(sseEvent) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	name, data, has := "", []byte(nil), false
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && err == nil:
			if has {
				if name == "" {
					name = "message"
				}
				if !emit(sseEvent{name: name, data: data}) {
					return nil
				}
			}
			name, data, has = "", nil, false
		case strings.HasPrefix(line, ":"):
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "event":
				name = v
			case "data":
				if has {
					data = append(data, '\n')
				}
				data, has = append(data, v...), true
			}
		}
		if err != nil {
			return err
		}
	}
}

// stream is an answer read while it is open: events arrive on a channel.
type stream struct {
	t      testing.TB
	status int
	header http.Header
	events chan sseEvent
	ended  chan struct{}
	cancel context.CancelFunc
	once   sync.Once
}

// open sends a request and returns once the answer's headers are in.
func (h *harness) open(method, path string, body []byte, hdr ...string) *stream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := h.newRequest(ctx, method, path, body, hdr...)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	hr, err := (&http.Client{Transport: h.tr}).Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	st := &stream{t: h.t, status: hr.StatusCode, header: hr.Header, events: make(chan sseEvent, 256), ended: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(st.ended)
		defer hr.Body.Close()
		push := func(ev sseEvent) bool {
			select {
			case st.events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if mediaType(hr.Header) == "text/event-stream" {
			_ = parseSSE(hr.Body, push)
			return
		}
		b, _ := io.ReadAll(hr.Body)
		if len(b) > 0 {
			push(sseEvent{name: "json", data: b})
		}
	}()
	h.t.Cleanup(st.close)
	return st
}

// close ends the stream from the client side and waits for its reader.
func (st *stream) close() {
	st.once.Do(func() {
		st.cancel()
		<-st.ended
	})
}

// nextEvent returns the next event (fails on timeout or end of stream).
func (st *stream) nextEvent() sseEvent {
	st.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	select {
	case ev := <-st.events:
		return ev
	default:
	}
	select {
	case ev := <-st.events:
		return ev
	case <-st.ended:
		select {
		case ev := <-st.events:
			return ev
		default:
		}
		st.t.Fatalf("stream ended while a message was expected")
	case <-timer.C:
		st.t.Fatalf("no message on the stream within %s", waitFor)
	}
	return sseEvent{}
}

// next returns the next JSON-RPC message of the stream.
func (st *stream) next() wireMsg {
	st.t.Helper()
	ev := st.nextEvent()
	if ev.name != "message" && ev.name != "json" {
		st.t.Fatalf("unexpected %q event: %s", ev.name, ev.data)
	}
	var m wireMsg
	if err := json.Unmarshal(ev.data, &m); err != nil {
		st.t.Fatalf("event is not JSON-RPC: %v: %s", err, ev.data)
	}
	return m
}

// expectEnd waits for the server to end the stream; messages still
// arriving are returned.
func (st *stream) expectEnd() []wireMsg {
	st.t.Helper()
	var got []wireMsg
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	for {
		select {
		case ev := <-st.events:
			var m wireMsg
			if json.Unmarshal(ev.data, &m) == nil {
				got = append(got, m)
			}
		case <-st.ended:
			return got
		case <-timer.C:
			st.t.Fatalf("stream still open after %s", waitFor)
			return got
		}
	}
}

// ---------------------------------------------------------------------------
// JSON-RPC helpers

func rpc(id any, method string, params any) []byte {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != nil {
		m["id"] = id
	}
	if params != nil {
		m["params"] = params
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func toolParams(name string, args any, token any) map[string]any {
	p := map[string]any{"name": name, "arguments": args}
	if token != nil {
		p["_meta"] = map[string]any{"progressToken": token}
	}
	return p
}

func initParams(caps string) map[string]any {
	if caps == "" {
		caps = "{}"
	}
	return map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    json.RawMessage(caps),
		"clientInfo":      map[string]any{"name": "e2e-client", "version": "1"},
	}
}

// serverState is what the test server's "state" tool reports.
type serverState struct {
	Levels    []string        `json:"levels"`
	Subs      []string        `json:"subs"`
	Cancelled []string        `json:"cancelled"`
	Answers   []string        `json:"answers"`
	Client    json.RawMessage `json:"client"`
}

// toolOut is a test server tool result.
type toolOut struct {
	Text    string
	PID     int
	SeenID  json.RawMessage // the request id the server saw
	IsError bool
	State   serverState
}

func parseTool(t testing.TB, m wireMsg) toolOut {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tool call failed: %d %s", m.Error.Code, m.Error.Message)
	}
	out, err := decodeTool(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeTool(m wireMsg) (toolOut, error) {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Structured struct {
			PID   int             `json:"pid"`
			ID    json.RawMessage `json:"id"`
			State serverState     `json:"state"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		return toolOut{}, fmt.Errorf("not a tool result: %s (%v)", m.Result, err)
	}
	return toolOut{Text: r.Content[0].Text, PID: r.Structured.PID, SeenID: r.Structured.ID, IsError: r.IsError, State: r.Structured.State}, nil
}

// ---------------------------------------------------------------------------
// Sessions

type sess struct {
	h    *harness
	dest string
	id   string
	mu   sync.Mutex
	next int
}

func (h *harness) mcpPath(dest string) string { return "/" + dest + "/mcp" }

// initialize opens a session: initialize (200, a minted UUIDv4 id), then
// notifications/initialized (202).
func (h *harness) initialize(dest, caps string) *sess {
	h.t.Helper()
	s, err := h.tryInitialize(dest, caps)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) tryInitialize(dest, caps string) (*sess, error) {
	r, err := h.send("POST", h.mcpPath(dest), rpc(0, "initialize", initParams(caps)))
	if err != nil {
		return nil, err
	}
	if r.status != 200 || len(r.msgs) != 1 || r.msgs[0].Result == nil {
		return nil, fmt.Errorf("initialize: %s", r)
	}
	id := r.header.Get("Mcp-Session-Id")
	if !uuidV4.MatchString(id) {
		return nil, fmt.Errorf("initialize: Mcp-Session-Id %q is not a UUIDv4", id)
	}
	s := &sess{h: h, dest: dest, id: id}
	n, err := h.send("POST", h.mcpPath(dest), rpc(nil, "notifications/initialized", nil), "Mcp-Session-Id", id)
	if err != nil {
		return nil, err
	}
	if n.status != http.StatusAccepted || len(n.body) != 0 {
		return nil, fmt.Errorf("notifications/initialized: %s, want 202 and no body", n)
	}
	return s, nil
}

// newID returns a fresh request id; they start at 1001 so that the small
// ids tests pick by hand never collide with them.
func (s *sess) newID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return 1000 + s.next
}

func (s *sess) hdr(extra ...string) []string {
	return append([]string{"Mcp-Session-Id", s.id}, extra...)
}

// post sends a raw body on the session.
func (s *sess) post(body []byte, hdr ...string) *resp {
	s.h.t.Helper()
	return s.h.do("POST", s.h.mcpPath(s.dest), body, s.hdr(hdr...)...)
}

// call sends a request with a fresh id and returns the whole answer.
func (s *sess) call(method string, params any, hdr ...string) *resp {
	s.h.t.Helper()
	return s.post(rpc(s.newID(), method, params), hdr...)
}

// tool calls a test server tool and returns its (successful) result.
func (s *sess) tool(name string, args any) toolOut {
	s.h.t.Helper()
	r := s.call("tools/call", toolParams(name, args, nil))
	if r.status != 200 {
		s.h.t.Fatalf("tools/call %s: %s", name, r)
	}
	return parseTool(s.h.t, r.last(s.h.t))
}

// openCall sends a request whose answer is read while it streams.
func (s *sess) openCall(id any, method string, params any, hdr ...string) *stream {
	s.h.t.Helper()
	return s.h.open("POST", s.h.mcpPath(s.dest), rpc(id, method, params), s.hdr(hdr...)...)
}

// listen opens the session's GET stream.
func (s *sess) listen() *stream {
	s.h.t.Helper()
	st := s.h.open("GET", s.h.mcpPath(s.dest), nil, s.hdr()...)
	if st.status != 200 || mediaType(st.header) != "text/event-stream" {
		s.h.t.Fatalf("GET stream: HTTP %d %s", st.status, st.header.Get("Content-Type"))
	}
	return st
}

func (s *sess) delete() *resp {
	s.h.t.Helper()
	return s.h.do("DELETE", s.h.mcpPath(s.dest), nil, s.hdr()...)
}

// state returns the test server's recorded state (via this session).
func (s *sess) state() serverState {
	s.h.t.Helper()
	return s.tool("state", map[string]any{}).State
}

// waitStarted opens a "wait" call (which reports progress once it runs on
// the server) and returns its stream after that first progress.
func (s *sess) waitStarted(id any, key string) *stream {
	s.h.t.Helper()
	st := s.openCall(id, "tools/call", toolParams("wait", map[string]any{"key": key}, "w-"+key))
	m := st.next()
	if m.Method != "notifications/progress" {
		s.h.t.Fatalf("wait %s: first message %+v, want progress", key, m)
	}
	return st
}

func expectMethod(t testing.TB, m wireMsg, method string) {
	t.Helper()
	if m.Method != method {
		t.Fatalf("got %s, want method %s", describe(m), method)
	}
}

func describe(m wireMsg) string {
	b, _ := json.Marshal(m)
	return clip(b)
}

func expectRPCError(t testing.TB, r *resp, status, code int) *wireError {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %s, want HTTP %d", r, status)
	}
	if len(r.msgs) != 1 || r.msgs[0].Error == nil {
		t.Fatalf("got %s, want one JSON-RPC error", r)
	}
	if code != 0 && r.msgs[0].Error.Code != code {
		t.Fatalf("error code %d (%s), want %d", r.msgs[0].Error.Code, r.msgs[0].Error.Message, code)
	}
	return r.msgs[0].Error
}

func both(t *testing.T, f func(t *testing.T, isolation string)) {
	for _, iso := range []string{"shared", "session"} {
		t.Run(iso, func(t *testing.T) {
			t.Parallel()
			f(t, iso)
		})
	}
}

func paramsOf(t testing.TB, m wireMsg, v any) {
	t.Helper()
	if err := json.Unmarshal(m.Params, v); err != nil {
		t.Fatalf("params of %s: %v", describe(m), err)
	}
}

// ===========================================================================
// Seed 003 "Testing Guidelines", one test each.

// POST /mcp without Mcp-Session-Id spawns the subprocess and returns the
// response with an Mcp-Session-Id header.
func TestStdioInitializeSpawnsAndMintsSessionID(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		// A shared process starts with the gateway (so a broken server shows
		// in /healthz at once); a per-session one waits for its session.
		if p := h.procs(); iso == "session" && len(p) != 0 {
			t.Fatalf("processes before the first session: %v", p)
		}
		r := h.do("POST", "/d/mcp", rpc(1, "initialize", initParams("")))
		if r.status != 200 || mediaType(r.header) != "application/json" {
			t.Fatalf("initialize: %s", r)
		}
		sid := r.header.Get("Mcp-Session-Id")
		if !uuidV4.MatchString(sid) {
			t.Fatalf("Mcp-Session-Id %q is not a lowercase UUIDv4", sid)
		}
		m := r.last(t)
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct{ Name string }
			Instructions    string `json:"instructions"`
		}
		if err := json.Unmarshal(m.Result, &res); err != nil || string(m.ID) != "1" {
			t.Fatalf("initialize response %s", describe(m))
		}
		if res.ProtocolVersion != "2025-11-25" || res.ServerInfo.Name != "switchboard-testserver" {
			t.Fatalf("initialize result %s", m.Result)
		}
		procs := h.procs()
		if len(procs) != 1 || res.Instructions != fmt.Sprintf("pid=%d", procs[0]) {
			t.Fatalf("processes %v, server says %q", procs, res.Instructions)
		}
		// A second initialize mints a different id.
		r2 := h.do("POST", "/d/mcp", rpc(1, "initialize", initParams("")))
		if sid2 := r2.header.Get("Mcp-Session-Id"); sid2 == sid || !uuidV4.MatchString(sid2) {
			t.Fatalf("second session id %q (first %q)", sid2, sid)
		}
		want := map[string]int{"shared": 1, "session": 2}[iso]
		if p := h.procs(); len(p) != want {
			t.Fatalf("%s isolation: %d processes after two sessions, want %d", iso, len(p), want)
		}
	})
}

// POST /mcp with a valid session id routes to that session's process.
func TestStdioSessionRoutesToItsProcess(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		a := h.initialize("d", "")
		b := h.initialize("d", "")
		pa1, pa2 := a.tool("pid", nil).PID, a.tool("pid", nil).PID
		pb := b.tool("pid", nil).PID
		if pa1 != pa2 || pa1 == 0 {
			t.Fatalf("session A reached pids %d and %d", pa1, pa2)
		}
		if iso == "shared" && pa1 != pb {
			t.Fatalf("shared: sessions reached pids %d and %d, want one process", pa1, pb)
		}
		if iso == "session" && pa1 == pb {
			t.Fatalf("session isolation: both sessions reached pid %d", pa1)
		}
		if got := a.tool("echo", map[string]any{"text": "hello A"}).Text; got != "hello A" {
			t.Fatalf("echo: %q", got)
		}
		tl := a.call("tools/list", nil)
		if tl.status != 200 || !strings.Contains(string(tl.last(t).Result), `"echo"`) {
			t.Fatalf("tools/list: %s", tl)
		}
		if r := a.call("ping", nil); r.status != 200 || r.last(t).Result == nil {
			t.Fatalf("ping: %s", r)
		}
	})
}

// POST /mcp with an unknown session id returns 404; so do ids of ended
// sessions, on POST, GET and DELETE.
func TestStdioUnknownSession404(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"}, dest{name: "other", mode: "plain"})
	unknown := "3f2b8c1e-9d4a-4e7b-8c2d-1a2b3c4d5e6f"
	r := h.do("POST", "/d/mcp", rpc(1, "tools/list", nil), "Mcp-Session-Id", unknown)
	expectRPCError(t, r, 404, -32600)
	if r := h.do("GET", "/d/mcp", nil, "Mcp-Session-Id", unknown); r.status != 404 {
		t.Fatalf("GET unknown: %s", r)
	}
	if r := h.do("DELETE", "/d/mcp", nil, "Mcp-Session-Id", unknown); r.status != 404 {
		t.Fatalf("DELETE unknown: %s", r)
	}
	// A session of another destination is unknown here.
	o := h.initialize("other", "")
	if r := h.do("POST", "/d/mcp", rpc(1, "tools/list", nil), "Mcp-Session-Id", o.id); r.status != 404 {
		t.Fatalf("session of another destination: %s", r)
	}
	// Ended sessions.
	s := h.initialize("d", "")
	if r := s.delete(); r.status != 204 {
		t.Fatalf("DELETE: %s", r)
	}
	expectRPCError(t, s.call("tools/list", nil), 404, 0)
	if r := h.do("GET", "/d/mcp", nil, s.hdr()...); r.status != 404 {
		t.Fatalf("GET ended: %s", r)
	}
	if r := s.delete(); r.status != 404 {
		t.Fatalf("second DELETE: %s", r)
	}
}

// POST /mcp with a malformed session id returns 400.
func TestStdioMalformedSession400(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	for _, id := range []string{
		"abc",
		"3f2b8c1e9d4a4e7b8c2d1a2b3c4d5e6f",       // no dashes
		"3f2b8c1e-9d4a-1e7b-8c2d-1a2b3c4d5e6f",   // version 1
		"3f2b8c1e-9d4a-4e7b-0c2d-1a2b3c4d5e6f",   // wrong variant
		"3f2b8c1e-9d4a-4e7b-8c2d-1a2b3c4d5e6g",   // not hex
		"3f2b8c1e-9d4a-4e7b-8c2d-1a2b3c4d5e6f00", // too long
		"../../etc/passwd",
	} {
		r := h.do("POST", "/d/mcp", rpc(1, "tools/list", nil), "Mcp-Session-Id", id)
		expectRPCError(t, r, 400, -32600)
		if r := h.do("GET", "/d/mcp", nil, "Mcp-Session-Id", id); r.status != 400 {
			t.Fatalf("GET with %q: %s", id, r)
		}
		if r := h.do("DELETE", "/d/mcp", nil, "Mcp-Session-Id", id); r.status != 400 {
			t.Fatalf("DELETE with %q: %s", id, r)
		}
	}
	// A request other than initialize without any session id is 400 too.
	expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "tools/list", nil)), 400, -32600)
}

// A subprocess notification (no id) goes to the session's notification
// queue, not into the POST response.
func TestStdioNotificationNotInPostResponse(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", "")
	r := s.call("tools/call", toolParams("changed", map[string]any{}, nil))
	if r.status != 200 || r.sse || len(r.msgs) != 1 || r.msgs[0].Result == nil {
		t.Fatalf("POST answer %s, want just the JSON response", r)
	}
	if parseTool(t, r.msgs[0]).Text != "changed" {
		t.Fatalf("result %s", describe(r.msgs[0]))
	}
	// The notification was queued for the session: a GET opened later
	// still gets it.
	expectMethod(t, s.listen().next(), "notifications/tools/list_changed")
}

// GET /mcp with a valid session id receives notifications as SSE events.
func TestStdioGetReceivesNotifications(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		s := h.initialize("d", "")
		st := s.listen()
		if cc := st.header.Get("Cache-Control"); !strings.Contains(cc, "no-cache") {
			t.Errorf("GET stream Cache-Control %q", cc)
		}
		s.tool("changed", nil)
		expectMethod(t, st.next(), "notifications/tools/list_changed")
		s.tool("changed", nil)
		expectMethod(t, st.next(), "notifications/tools/list_changed")
	})
}

// GET /mcp without a session id returns 400.
func TestStdioGetWithoutSession400(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	r := h.do("GET", "/d/mcp", nil)
	expectRPCError(t, r, 400, -32600)
	// DELETE without one is 400 as well.
	expectRPCError(t, h.do("DELETE", "/d/mcp", nil), 400, -32600)
}

// DELETE /mcp terminates the session (and, per session, its subprocess)
// and returns 204.
func TestStdioDeleteTerminatesSubprocess(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		keep := h.initialize("d", "")
		s := h.initialize("d", "")
		pid := s.tool("pid", nil).PID
		st := s.listen()
		r := s.delete()
		if r.status != 204 || len(r.body) != 0 {
			t.Fatalf("DELETE: %s", r)
		}
		st.expectEnd() // its GET stream ends with it
		expectRPCError(t, s.call("tools/list", nil), 404, 0)
		if iso == "session" {
			waitGone(t, 5*time.Second, pid)
		} else if !alive(pid) || keep.tool("pid", nil).PID != pid {
			t.Fatalf("shared: the process serving the other session must stay")
		}
		keep.tool("echo", map[string]any{"text": "still here"})
	})
}

// GET /sse and POST /message for a stdio destination return 410 when the
// legacy transport is disabled.
func TestStdioLegacyDisabledSSE410(t *testing.T) {
	t.Parallel()
	// isolation: session, because shared processes start with the gateway.
	h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: "session", extra: "legacy_sse: false"})
	r := h.do("GET", "/d/sse", nil)
	if r.status != 410 || !strings.Contains(string(r.body), "/d/mcp") {
		t.Fatalf("GET /d/sse: %s, want 410 pointing at /d/mcp", r)
	}
	if p := h.procs(); len(p) != 0 {
		t.Fatalf("a refused legacy request started processes %v", p)
	}
}

func TestStdioLegacyDisabledMessage410(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain", extra: "legacy_sse: false"})
	r := h.do("POST", "/d/message?session_id=3f2b8c1e-9d4a-4e7b-8c2d-1a2b3c4d5e6f", rpc(1, "initialize", initParams("")))
	if r.status != 410 || !strings.Contains(string(r.body), "/d/mcp") {
		t.Fatalf("POST /d/message: %s, want 410", r)
	}
	// /mcp is unaffected.
	h.initialize("d", "").tool("echo", map[string]any{"text": "x"})
}

// A subprocess that exits during a pending POST: the POST gets 503, and
// with restarts exhausted (none allowed here) so does the next session.
func TestStdioExitDuringPendingPost503(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, "restart:\n  max_attempts: 0\n", dest{name: "d", mode: "plain", isolation: iso})
		s := h.initialize("d", "")
		pid := s.tool("pid", nil).PID
		st := s.listen()
		r := s.call("tools/call", toolParams("crash", map[string]any{}, nil))
		e := expectRPCError(t, r, 503, -32000)
		if !strings.Contains(e.Message, "d") {
			t.Errorf("error message %q does not name the destination", e.Message)
		}
		waitGone(t, 5*time.Second, pid)
		st.expectEnd() // the session ended with its server
		expectRPCError(t, s.call("tools/list", nil), 404, 0)
		r = h.do("POST", "/d/mcp", rpc(1, "initialize", initParams("")))
		if iso == "shared" {
			expectRPCError(t, r, 503, -32000)
		}
		// (In session isolation a new session gets a new process.)
	})
}

// The connection cap (default 10): the 11th session gets 503 while the 10
// are busy (each has its GET stream open; idle ones would be evicted, see
// TestSessionCapEvictsAbandoned).
func TestStdioSessionCap11th503(t *testing.T) {
	if os.Getenv("MAX_STDIO_CONNECTIONS") != "" {
		t.Skip("MAX_STDIO_CONNECTIONS is set in the environment")
	}
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"}, dest{name: "e", mode: "plain"})
	var ss []*sess
	for i := 0; i < 10; i++ {
		ss = append(ss, h.initialize("d", ""))
		ss[i].listen()
	}
	r := h.do("POST", "/d/mcp", rpc(1, "initialize", initParams("")))
	e := expectRPCError(t, r, 503, -32000)
	if r.header.Get("Mcp-Session-Id") != "" || !strings.Contains(e.Message, "too many sessions") {
		t.Fatalf("11th session: %s", r)
	}
	// The cap is per destination.
	h.initialize("e", "")
	// An ended session frees its place.
	if r := ss[3].delete(); r.status != 204 {
		t.Fatal(r)
	}
	h.initialize("d", "").listen()
	expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
}

// In session isolation the cap also bounds the processes.
func TestStdioSessionCapIsolatedProcesses(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart+"max_sessions: 3\n", dest{name: "d", mode: "plain", isolation: "session"})
	for i := 0; i < 3; i++ {
		h.initialize("d", "").listen() // busy: not evictable
	}
	expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
	if p := h.procs(); len(p) != 3 {
		t.Fatalf("%d processes, want 3", len(p))
	}
}

// MAX_STDIO_CONNECTIONS replaces max_sessions.
func TestStdioSessionCapEnv(t *testing.T) {
	t.Setenv("MAX_STDIO_CONNECTIONS", "2")
	h := start(t, fastRestart+"max_sessions: 50\n", dest{name: "d", mode: "plain"})
	h.initialize("d", "").listen() // busy: not evictable
	h.initialize("d", "").listen()
	expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
}

// ===========================================================================
// Issue requirements.

// Shared isolation: one process, and request ids are rewritten so that
// sessions may use the same ids at once.
func TestStdioSharedRewritesRequestIDs(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	a, b := h.initialize("d", ""), h.initialize("d", "")
	// Both sessions have request id "same" in flight at once.
	wa := a.waitStarted("same", "a")
	wb := b.waitStarted("same", "b")
	a.tool("release", map[string]any{"key": "a"})
	ra := wa.next()
	b.tool("release", map[string]any{"key": "b"})
	rb := wb.next()
	if string(ra.ID) != `"same"` || string(rb.ID) != `"same"` {
		t.Fatalf("responses carry ids %s and %s, want the clients' own", ra.ID, rb.ID)
	}
	ta, tb := parseTool(t, ra), parseTool(t, rb)
	if ta.Text != "released:a" || tb.Text != "released:b" {
		t.Fatalf("cross-talk: A got %q, B got %q", ta.Text, tb.Text)
	}
	if ta.PID != tb.PID {
		t.Fatalf("shared: pids %d and %d", ta.PID, tb.PID)
	}
	if bytes.Equal(ta.SeenID, tb.SeenID) || string(ta.SeenID) == `"same"` {
		t.Fatalf("the server saw ids %s and %s: not rewritten", ta.SeenID, tb.SeenID)
	}
	// Numeric, string, negative and large ids all come back as sent.
	for _, id := range []string{`0`, `-5`, `9007199254740993`, `"x y"`, `"42"`} {
		r := a.post([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"t"}}}`))
		if r.status != 200 || string(r.last(t).ID) != id {
			t.Fatalf("id %s came back as %s", id, r)
		}
	}
}

// logging/setLevel filters notifications/message per session in shared
// isolation; the server gets the lowest level any session asked for.
func TestStdioLogLevelPerSession(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	a, b, c := h.initialize("d", ""), h.initialize("d", ""), h.initialize("d", "")
	la, lb, lc := a.listen(), b.listen(), c.listen()
	if r := a.call("logging/setLevel", map[string]any{"level": "error"}); r.status != 200 || r.last(t).Result == nil {
		t.Fatalf("setLevel: %s", r)
	}
	if r := b.call("logging/setLevel", map[string]any{"level": "debug"}); r.status != 200 {
		t.Fatalf("setLevel: %s", r)
	}
	expectRPCError(t, c.call("logging/setLevel", map[string]any{"level": "loud"}), 400, -32602)
	if got := a.state().Levels; !slices.Equal(got, []string{"error", "debug"}) {
		t.Fatalf("the server was set to levels %v, want [error debug]", got)
	}

	// Messages whose call cannot be told apart (several sessions have calls
	// in flight) go to every session whose level admits them.
	wa := a.waitStarted(1, "a")
	wb := b.waitStarted(1, "b")
	c.tool("log", map[string]any{"level": "info", "text": "info-1"})
	c.tool("log", map[string]any{"level": "error", "text": "error-1"})
	type logParams struct{ Level, Data string }
	var p logParams
	next := func(st *stream) string {
		t.Helper()
		m := st.next()
		expectMethod(t, m, "notifications/message")
		paramsOf(t, m, &p)
		return p.Data
	}
	if got := next(la); got != "error-1" {
		t.Fatalf("session at level error got %q first", got)
	}
	if got := next(lb); got != "info-1" {
		t.Fatalf("session at level debug got %q", got)
	}
	if got := next(lb); got != "error-1" {
		t.Fatalf("session at level debug got %q", got)
	}
	if got := next(lc); got != "info-1" { // no level set: everything
		t.Fatalf("session without a level got %q", got)
	}
	next(lc)
	a.tool("release", map[string]any{"key": "a"})
	b.tool("release", map[string]any{"key": "b"})
	wa.next()
	wb.next()

	// A message caused by a session's own call goes to that call, if its
	// level admits it, and to nobody else.
	r := a.call("tools/call", toolParams("log", map[string]any{"level": "error", "text": "a-error"}, nil))
	if !r.sse || len(r.msgs) != 2 || r.msgs[0].Method != "notifications/message" {
		t.Fatalf("A's own error log: %s, want it on the call's stream", r)
	}
	r = a.call("tools/call", toolParams("log", map[string]any{"level": "info", "text": "a-info"}, nil))
	if r.sse || len(r.msgs) != 1 {
		t.Fatalf("A's own info log (A is at error): %s, want the response alone", r)
	}
	// Nobody else got A's messages: the next thing B and C see is the marker.
	a.tool("changed", nil)
	for _, st := range []*stream{la, lb, lc} {
		if m := st.next(); m.Method != "notifications/tools/list_changed" {
			t.Fatalf("a session's listen stream got %s, want only the marker", describe(m))
		}
	}
}

// Resource subscriptions are ref-counted on the shared server, and
// notifications/resources/updated reaches only the subscribers.
func TestStdioResourceSubscriptionsRefCounted(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	a, b, c := h.initialize("d", ""), h.initialize("d", ""), h.initialize("d", "")
	la, lb, lc := a.listen(), b.listen(), c.listen()
	const uri = "test://res/1"
	for _, s := range []*sess{a, b} {
		if r := s.call("resources/subscribe", map[string]any{"uri": uri}); r.status != 200 || r.last(t).Result == nil {
			t.Fatalf("subscribe: %s", r)
		}
	}
	if got := a.state().Subs; !slices.Equal(got, []string{"subscribe:" + uri}) {
		t.Fatalf("server subscriptions %v, want one subscribe", got)
	}
	updated := func(st *stream) {
		t.Helper()
		m := st.next()
		expectMethod(t, m, "notifications/resources/updated")
		var p struct{ URI string }
		paramsOf(t, m, &p)
		if p.URI != uri {
			t.Fatalf("updated %q", p.URI)
		}
	}
	marker := func(st *stream) { t.Helper(); expectMethod(t, st.next(), "notifications/tools/list_changed") }

	c.tool("update", map[string]any{"uri": uri})
	c.tool("update", map[string]any{"uri": "test://other"}) // nobody subscribed
	c.tool("changed", nil)
	updated(la)
	marker(la)
	updated(lb)
	marker(lb)
	marker(lc) // C is not subscribed: the marker comes first

	if r := a.call("resources/unsubscribe", map[string]any{"uri": uri}); r.status != 200 {
		t.Fatal(r)
	}
	if got := a.state().Subs; len(got) != 1 {
		t.Fatalf("server subscriptions %v: B still subscribes, nothing must be sent", got)
	}
	c.tool("update", map[string]any{"uri": uri})
	c.tool("changed", nil)
	marker(la)
	updated(lb)
	marker(lb)
	marker(lc)

	if r := b.call("resources/unsubscribe", map[string]any{"uri": uri}); r.status != 200 {
		t.Fatal(r)
	}
	if got := a.state().Subs; !slices.Equal(got, []string{"subscribe:" + uri, "unsubscribe:" + uri}) {
		t.Fatalf("server subscriptions %v, want subscribe then unsubscribe", got)
	}
	expectRPCError(t, a.call("resources/subscribe", map[string]any{}), 400, -32602)
}

// Progress reaches only the session whose request carried the token, under
// that client's own token.
func TestStdioProgressOnlyToOwner(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		a, b := h.initialize("d", ""), h.initialize("d", "")
		la, lb := a.listen(), b.listen()
		// A has a call in flight whose token equals B's.
		wa := a.openCall(1, "tools/call", toolParams("wait", map[string]any{"key": "a"}, "tok"))
		expectMethod(t, wa.next(), "notifications/progress")
		for _, tok := range []any{"tok", 42} {
			r := b.call("tools/call", toolParams("progress", map[string]any{"n": 3}, tok))
			if r.status != 200 || !r.sse || len(r.msgs) != 4 {
				t.Fatalf("progress call: %s, want 3 progress events and the result on the POST stream", r)
			}
			want, _ := json.Marshal(tok)
			for i, m := range r.msgs[:3] {
				expectMethod(t, m, "notifications/progress")
				var p struct {
					ProgressToken json.RawMessage `json:"progressToken"`
					Progress      int             `json:"progress"`
				}
				paramsOf(t, m, &p)
				if !bytes.Equal(p.ProgressToken, want) || p.Progress != i+1 {
					t.Fatalf("progress %s, want token %s and progress %d", m.Params, want, i+1)
				}
			}
			if seen := parseTool(t, r.msgs[3]).Text; seen == string(want) || seen == "" {
				t.Fatalf("the server saw token %q: not rewritten", seen)
			}
		}
		a.tool("release", map[string]any{"key": "a"})
		if m := wa.next(); m.Result == nil {
			t.Fatalf("A's wait ended with %s: it got B's progress?", describe(m))
		}
		// A call without a token gets no progress at all.
		if r := b.call("tools/call", toolParams("progress", map[string]any{"n": 3}, nil)); r.sse || len(r.msgs) != 1 {
			t.Fatalf("progress without a token: %s", r)
		}
		b.tool("changed", nil)
		a.tool("changed", nil)
		for _, st := range []*stream{la, lb} {
			expectMethod(t, st.next(), "notifications/tools/list_changed")
		}
	})
}

// notifications/cancelled cancels only the sender's own request, even when
// another session has a request with the same id in flight.
func TestStdioCancelOnlyOwnRequest(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	a, b := h.initialize("d", ""), h.initialize("d", "")
	wa := a.waitStarted(7, "ka")
	wb := b.waitStarted(7, "kb")
	// A cancels its request 7, and also an id it never used.
	for _, id := range []any{7, 99, "7"} {
		r := a.post(rpc(nil, "notifications/cancelled", map[string]any{"requestId": id, "reason": "user"}))
		if r.status != 202 || len(r.body) != 0 {
			t.Fatalf("cancel: %s", r)
		}
	}
	if m := wa.next(); m.Error == nil || string(m.ID) != "7" {
		t.Fatalf("A's cancelled call ended with %s, want an error for id 7", describe(m))
	}
	if got := b.state().Cancelled; !slices.Equal(got, []string{"ka"}) {
		t.Fatalf("the server cancelled %v, want only A's request", got)
	}
	b.tool("release", map[string]any{"key": "kb"})
	if m := wb.next(); string(m.ID) != "7" || parseTool(t, m).Text != "released:kb" {
		t.Fatalf("B's request: %s", describe(m))
	}
}

// */list_changed reaches every session.
func TestStdioListChangedReachesAll(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	var streams []*stream
	var ss []*sess
	for i := 0; i < 4; i++ {
		s := h.initialize("d", "")
		ss = append(ss, s)
		streams = append(streams, s.listen())
	}
	ss[2].tool("changed", nil)
	for _, st := range streams {
		expectMethod(t, st.next(), "notifications/tools/list_changed")
	}
}

// Server→client requests reach the session whose call caused them, on that
// call's POST stream; the client's answer (202) reaches the server.
func TestStdioServerRequestOnPostStream(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		idle := h.initialize("d", `{"sampling":{}}`)
		li := idle.listen()
		s := h.initialize("d", `{"sampling":{}}`)
		st := s.openCall("q1", "tools/call", toolParams("ask", map[string]any{"text": "meaning"}, nil))
		req := st.next()
		expectMethod(t, req, "sampling/createMessage")
		if req.ID == nil || !strings.Contains(string(req.Params), "question: meaning") {
			t.Fatalf("sampling request %s", describe(req))
		}
		ans, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"result": map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "forty-two"}}})
		if r := s.post(ans); r.status != 202 || len(r.body) != 0 {
			t.Fatalf("answer: %s", r)
		}
		res := st.next()
		if string(res.ID) != `"q1"` || parseTool(t, res).Text != "answer:forty-two" {
			t.Fatalf("ask result %s", describe(res))
		}
		// The idle session saw nothing of it.
		idle.tool("changed", nil)
		expectMethod(t, li.next(), "notifications/tools/list_changed")
	})
}

// When the call's POST stream is gone, the server→client request goes to
// the session's GET stream.
func TestStdioServerRequestFallsBackToGetStream(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		other := h.initialize("d", `{"sampling":{}}`)
		lo := other.listen()
		s := h.initialize("d", `{"sampling":{}}`)
		ls := s.listen()
		st := s.openCall("ask-1", "tools/call", toolParams("ask", map[string]any{"key": "k", "text": "later"}, "p"))
		expectMethod(t, st.next(), "notifications/progress")
		st.close() // the client drops the POST stream; the call stays in flight
		h.audit.wait(t, "the abandoned POST", func(a auditLine) bool {
			return a.Session == s.id && a.MCPMethod == "tools/call" && string(a.RPCID) == `"ask-1"`
		})
		s.tool("release", map[string]any{"key": "k"})
		req := ls.next()
		expectMethod(t, req, "sampling/createMessage")
		ans, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"result": map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "via-get"}}})
		if r := s.post(ans); r.status != 202 {
			t.Fatal(r)
		}
		if got := s.state().Answers; !slices.Equal(got, []string{"answer:via-get"}) {
			t.Fatalf("the server got answers %v", got)
		}
		other.tool("changed", nil)
		expectMethod(t, lo.next(), "notifications/tools/list_changed")
	})
}

// In shared isolation, when several sessions have calls in flight the owner
// of a server→client request cannot be told apart: it is refused with a
// JSON-RPC error, never guessed. In session isolation it is delivered.
func TestStdioServerRequestAmbiguousRefused(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		a, b := h.initialize("d", `{"sampling":{}}`), h.initialize("d", `{"sampling":{}}`)
		la := a.listen()
		wa := a.waitStarted(1, "a")
		sb := b.openCall(1, "tools/call", toolParams("ask", map[string]any{"text": "who"}, nil))
		first := sb.next()
		if iso == "shared" {
			out := parseTool(t, first)
			if !strings.HasPrefix(out.Text, "error:-32007:") || !strings.Contains(out.Text, "cannot tell") {
				t.Fatalf("shared, ambiguous: the server's request was answered %q, want a -32007 refusal", out.Text)
			}
		} else {
			expectMethod(t, first, "sampling/createMessage")
			ans, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": first.ID,
				"result": map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "b"}}})
			b.post(ans)
			if out := parseTool(t, sb.next()); out.Text != "answer:b" {
				t.Fatalf("session isolation: %q", out.Text)
			}
		}
		a.tool("release", map[string]any{"key": "a"})
		if m := wa.next(); m.Result == nil {
			t.Fatalf("A's call got %s, want its result (no stray request)", describe(m))
		}
		a.tool("changed", nil)
		expectMethod(t, la.next(), "notifications/tools/list_changed")
	})
}

// Elicitation and roots requests are routed like sampling, each needing
// its capability.
func TestStdioServerRequestKinds(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", `{"elicitation":{},"roots":{"listChanged":true}}`)
	for _, c := range []struct {
		method string
		result string
		want   string
	}{
		{"elicitation/create", `{"action":"accept","content":{"name":"bob"}}`, `result:{"action":"accept","content":{"name":"bob"}}`},
		{"roots/list", `{"roots":[{"uri":"file:///tmp"}]}`, `result:{"roots":[{"uri":"file:///tmp"}]}`},
	} {
		st := s.openCall(c.method, "tools/call", toolParams("ask", map[string]any{"method": c.method}, nil))
		req := st.next()
		expectMethod(t, req, c.method)
		if r := s.post([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + c.result + `}`)); r.status != 202 {
			t.Fatal(r)
		}
		if out := parseTool(t, st.next()); out.Text != c.want {
			t.Fatalf("%s: the server got %q, want %q", c.method, out.Text, c.want)
		}
	}
	// Without the sampling capability, sampling is refused.
	out := s.tool("ask", map[string]any{})
	if !strings.HasPrefix(out.Text, "error:-32601:") {
		t.Fatalf("sampling without the capability: %q", out.Text)
	}
}

// A server→client request needs the client's capability.
func TestStdioServerRequestNeedsCapability(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", `{}`)
	out := s.tool("ask", map[string]any{"text": "x"})
	if !strings.HasPrefix(out.Text, "error:-32601:") || !strings.Contains(out.Text, "sampling") {
		t.Fatalf("answer %q, want a -32601 refusal naming sampling", out.Text)
	}
}

// Responses are JSON or SSE as the Accept header allows and prefers.
func TestStdioAcceptJSONOrSSE(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", "")
	echo := toolParams("echo", map[string]any{"text": "a"}, nil)
	for _, c := range []struct {
		accept string
		sse    bool
	}{
		{"application/json, text/event-stream", false},
		{"application/json", false},
		{"", false}, // no Accept: anything goes
		{"*/*", false},
		{"text/event-stream", true},
		{"text/event-stream, application/json", true},
	} {
		r := s.call("tools/call", echo, "Accept", c.accept)
		if r.status != 200 || r.sse != c.sse || len(r.msgs) != 1 || parseTool(t, r.msgs[0]).Text != "a" {
			t.Fatalf("Accept %q: %s (sse=%v), want sse=%v", c.accept, r, r.sse, c.sse)
		}
	}
	if r := s.call("tools/call", echo, "Accept", "text/html"); r.status != 406 {
		t.Fatalf("Accept text/html: %s, want 406", r)
	}
	if r := s.call("tools/call", echo, "Content-Type", "text/plain"); r.status != 415 {
		t.Fatalf("Content-Type text/plain: %s, want 415", r)
	}
	// Something before the response turns the answer into a stream.
	r := s.call("tools/call", toolParams("progress", map[string]any{"n": 2}, "t"))
	if !r.sse || len(r.msgs) != 3 {
		t.Fatalf("progress: %s", r)
	}
	// GET needs text/event-stream.
	if r := h.do("GET", "/d/mcp", nil, s.hdr("Accept", "application/json")...); r.status != 406 {
		t.Fatalf("GET with Accept application/json: %s", r)
	}
}

// Client notifications and responses get 202 with no body.
func TestStdioClientNotificationsAndResponses202(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", "")
	for _, body := range [][]byte{
		rpc(nil, "notifications/initialized", nil),
		rpc(nil, "notifications/roots/list_changed", nil),
		rpc(nil, "notifications/cancelled", map[string]any{"requestId": 12345}),
		[]byte(`{"jsonrpc":"2.0","id":777,"result":{}}`),                                  // answer to nothing
		[]byte(`{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"client error"}}`), // error answer
	} {
		if r := s.post(body); r.status != 202 || len(r.body) != 0 {
			t.Fatalf("%s: %s, want 202 and no body", body, r)
		}
	}
	s.tool("echo", map[string]any{"text": "fine"})
}

// A batch (JSON array) is refused with 400; so is malformed JSON.
func TestStdioBatch400(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", "")
	batch := []byte(`[` + string(rpc(1, "ping", nil)) + `,` + string(rpc(2, "ping", nil)) + `]`)
	expectRPCError(t, s.post(batch), 400, -32600)
	expectRPCError(t, h.do("POST", "/d/mcp", []byte(`[`+string(rpc(1, "initialize", initParams("")))+`]`)), 400, -32600)
	expectRPCError(t, s.post([]byte(`{"jsonrpc":"2.0","id":1,`)), 400, -32700)
	expectRPCError(t, s.post([]byte(`{"jsonrpc":"1.0","id":1,"method":"ping"}`)), 400, -32600)
	s.tool("echo", map[string]any{"text": "fine"})
}

// A request body over max_body_bytes gets 413.
func TestStdioBodyTooLarge413(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart+"max_body_bytes: 4096\n", dest{name: "d", mode: "plain"})
	s := h.initialize("d", "")
	r := s.call("tools/call", toolParams("echo", map[string]any{"text": strings.Repeat("z", 8000)}, nil))
	expectRPCError(t, r, 413, 0)
	expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", map[string]any{"pad": strings.Repeat("z", 5000)})), 413, 0)
	if got := s.tool("echo", map[string]any{"text": strings.Repeat("z", 3000)}).Text; len(got) != 3000 {
		t.Fatalf("echo after 413: %d bytes", len(got))
	}
}

// An upstream message over max_message_bytes fails the call with 502; the
// session and server stay usable.
func TestStdioUpstreamMessageTooLarge502(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart+"max_message_bytes: 65536\n", dest{name: "d", mode: "plain", isolation: iso})
		s := h.initialize("d", "")
		pid := s.tool("pid", nil).PID
		// (The result holds the text twice: content and structuredContent.)
		if got := s.tool("big", map[string]any{"bytes": 30000}).Text; len(got) != 30000 {
			t.Fatalf("big under the limit: %d bytes", len(got))
		}
		r := s.call("tools/call", toolParams("big", map[string]any{"bytes": 300000}, nil))
		expectRPCError(t, r, 502, -32006)
		if got := s.tool("echo", map[string]any{"text": "after"}); got.Text != "after" || got.PID != pid {
			t.Fatalf("after 502: %+v (pid was %d)", got, pid)
		}
	})
}

// No response within the timeout gives 504; the server is told to cancel.
func TestStdioTimeout504(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart+"timeout: 1s\n", dest{name: "d", mode: "plain", isolation: iso})
		s := h.initialize("d", "")
		t0 := time.Now()
		r := s.call("tools/call", toolParams("slow", map[string]any{"ms": 60000, "tag": "t1"}, nil))
		expectRPCError(t, r, 504, -32001)
		if el := time.Since(t0); el < time.Second || el > 8*time.Second {
			t.Fatalf("504 after %s, want about 1s", el)
		}
		if got := s.state().Cancelled; !slices.Equal(got, []string{"t1"}) {
			t.Fatalf("the server cancelled %v, want [t1]", got)
		}
		s.tool("echo", map[string]any{"text": "after"})
	})
}

// Two requests with the same id in flight on one session: the second is
// refused with 409.
func TestStdioDuplicateID409(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", "")
	w := s.waitStarted(7, "k")
	r := s.post(rpc(7, "tools/call", toolParams("echo", map[string]any{"text": "dup"}, nil)))
	expectRPCError(t, r, 409, 0)
	s.tool("release", map[string]any{"key": "k"})
	w.next()
	if r := s.post(rpc(7, "tools/call", toolParams("echo", map[string]any{"text": "again"}, nil))); r.status != 200 {
		t.Fatalf("id 7 after its call ended: %s", r)
	}
}

// Non-JSON-RPC stdout lines are skipped and logged; stderr is logged at
// WARN; neither ever reaches a client.
func TestStdioGarbageStdoutAndStderr(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "garbage", isolation: iso})
		s := h.initialize("d", "")
		st := s.listen()
		var bodies [][]byte
		for i := 0; i < 5; i++ {
			text := fmt.Sprintf("clean-%d", i)
			r := s.call("tools/call", toolParams("echo", map[string]any{"text": text}, nil))
			if r.status != 200 || parseTool(t, r.last(t)).Text != text {
				t.Fatalf("echo through garbage: %s", r)
			}
			bodies = append(bodies, r.body)
		}
		r := s.call("tools/call", toolParams("progress", map[string]any{"n": 3}, "g"))
		if len(r.msgs) != 4 {
			t.Fatalf("progress through garbage: %s", r)
		}
		bodies = append(bodies, r.body)
		s.tool("changed", nil)
		m := st.next()
		expectMethod(t, m, "notifications/tools/list_changed")
		bodies = append(bodies, m.Params)
		for _, b := range bodies {
			if bytes.Contains(b, []byte("GARBAGE")) || bytes.Contains(b, []byte("STDERR")) {
				t.Fatalf("junk reached a client: %s", clip(b))
			}
		}
		h.logs.wait(t, slog.LevelWarn, "non-JSON-RPC line on stdout skipped", "GARBAGE banner")
		h.logs.wait(t, slog.LevelWarn, "invalid message from server skipped", "GARBAGE-not-json")
		h.logs.wait(t, slog.LevelInfo, "stderr", "STDERR-NOISE line 0")
		h.logs.wait(t, slog.LevelInfo, "stderr", "destination=d")
		// 300 lines at once are over the log budget: the rest are counted.
		h.logs.wait(t, slog.LevelWarn, "child output lines suppressed (over the log budget)", "destination=d")
	})
}

// The legacy HTTP+SSE transport: GET /{d}/sse announces the endpoint,
// POST /{d}/message?session_id=… gets 202 and answers on the stream.
func TestStdioLegacySSE(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	st := h.open("GET", "/d/sse", nil)
	if st.status != 200 || mediaType(st.header) != "text/event-stream" {
		t.Fatalf("GET /d/sse: %d %s", st.status, st.header.Get("Content-Type"))
	}
	ev := st.nextEvent()
	if ev.name != "endpoint" || !strings.HasPrefix(string(ev.data), "/d/message?session_id=") {
		t.Fatalf("first event %s %q, want the endpoint", ev.name, ev.data)
	}
	endpoint := string(ev.data)
	sid := strings.TrimPrefix(endpoint, "/d/message?session_id=")
	if !uuidV4.MatchString(sid) {
		t.Fatalf("legacy session id %q", sid)
	}
	post := func(body []byte) {
		t.Helper()
		if r := h.do("POST", endpoint, body); r.status != 202 {
			t.Fatalf("POST %s: %s", endpoint, r)
		}
	}
	post(rpc(1, "initialize", map[string]any{"protocolVersion": "2024-11-05", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "legacy", "version": "1"}}))
	m := st.next()
	if string(m.ID) != "1" || !strings.Contains(string(m.Result), `"2024-11-05"`) {
		t.Fatalf("initialize on the stream: %s", describe(m))
	}
	post(rpc(nil, "notifications/initialized", nil))
	post(rpc(2, "tools/call", toolParams("echo", map[string]any{"text": "over sse"}, nil)))
	if out := parseTool(t, st.next()); out.Text != "over sse" {
		t.Fatalf("echo: %q", out.Text)
	}
	post(rpc(3, "tools/call", toolParams("progress", map[string]any{"n": 2}, "lp")))
	expectMethod(t, st.next(), "notifications/progress")
	expectMethod(t, st.next(), "notifications/progress")
	if m := st.next(); string(m.ID) != "3" {
		t.Fatalf("progress result %s", describe(m))
	}
	post(rpc(4, "tools/call", toolParams("changed", nil, nil)))
	got := []string{st.next().Method, st.next().Method}
	slices.Sort(got)
	if !slices.Equal(got, []string{"", "notifications/tools/list_changed"}) {
		t.Fatalf("changed: got %v", got)
	}
	// Errors of the message endpoint.
	if r := h.do("POST", "/d/message", rpc(5, "ping", nil)); r.status != 400 {
		t.Fatalf("no session_id: %s", r)
	}
	if r := h.do("POST", "/d/message?session_id=3f2b8c1e-9d4a-4e7b-8c2d-1a2b3c4d5e6f", rpc(5, "ping", nil)); r.status != 404 {
		t.Fatalf("unknown session_id: %s", r)
	}
	if r := h.do("POST", endpoint, batchOf(rpc(5, "ping", nil))); r.status != 400 {
		t.Fatalf("batch: %s", r)
	}
	// Closing the stream ends the session.
	st.close()
	h.audit.wait(t, "the closed SSE stream", func(a auditLine) bool { return a.Path == "/d/sse" && a.Session == sid })
	if r := h.do("POST", endpoint, rpc(6, "ping", nil)); r.status != 404 {
		t.Fatalf("after the stream closed: %s", r)
	}
}

func batchOf(ms ...[]byte) []byte {
	return []byte("[" + string(bytes.Join(ms, []byte(","))) + "]")
}

// Origin that is not loopback or allowed → 403; Host not allowed → 403.
func TestStdioOriginAndHostGuard(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart+"allowed_origins: [\"https://app.example\"]\nallowed_hosts: [gw.internal]\n", dest{name: "d", mode: "plain"})
	h2 := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: "session"}) // no process until a session
	guarded := func(h *harness, want int, hdr ...string) {
		t.Helper()
		// GET without a session is 400 once past the guard.
		r := h.do("GET", "/d/mcp", nil, hdr...)
		if r.status != want {
			t.Fatalf("%v: %s, want %d", hdr, r, want)
		}
		if want == 403 {
			expectRPCError(t, r, 403, -32600)
		}
	}
	guarded(h, 403, "Origin", "http://evil.example")
	guarded(h, 403, "Origin", "null")
	guarded(h, 403, "Origin", "http://localhost.evil.example")
	guarded(h, 400, "Origin", "https://app.example")
	guarded(h, 400, "Origin", "http://localhost:5173")
	guarded(h, 400, "Origin", "http://127.0.0.1:9")
	guarded(h, 400, "Origin", "http://[::1]:9")
	guarded(h, 403, "Host", "evil.example")
	guarded(h, 403, "Host", "evil.example:80")
	guarded(h, 400, "Host", "gw.internal")
	guarded(h, 400, "Host", "localhost:1234")
	// Without allowed_origins only loopback origins pass; without
	// allowed_hosts only loopback names (and the listen host).
	guarded(h2, 403, "Origin", "https://app.example")
	guarded(h2, 403, "Host", "gw.internal")
	guarded(h2, 400, "Host", "127.0.0.1")
	// A forbidden initialize starts nothing.
	r := h2.do("POST", "/d/mcp", rpc(1, "initialize", initParams("")), "Origin", "http://evil.example")
	if r.status != 403 || r.header.Get("Mcp-Session-Id") != "" || len(h2.procs()) != 0 {
		t.Fatalf("forbidden initialize: %s, processes %v", r, h2.procs())
	}
}

// Graceful shutdown ends streams and calls and leaves no process behind.
func TestStdioGracefulShutdownNoOrphans(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "sh", mode: "plain"}, dest{name: "ses", mode: "plain", isolation: "session"})
	var streams []*stream
	var pids []int
	for _, d := range []string{"sh", "ses"} {
		for i := 0; i < 3; i++ {
			s := h.initialize(d, "")
			pids = append(pids, s.tool("pid", nil).PID)
			streams = append(streams, s.listen())
		}
	}
	s := h.initialize("ses", "")
	w := s.waitStarted(1, "never")
	if n := len(h.procs()); n != 5 {
		t.Fatalf("%d processes, want 5 (1 shared + 4 per session)", n)
	}
	h.stop() // fails the test if Serve hangs or a process is left
	for _, st := range streams {
		st.expectEnd()
	}
	for _, m := range w.expectEnd() {
		if m.Result != nil {
			t.Fatalf("a call that never ends got a result at shutdown: %s", describe(m))
		}
	}
	waitGone(t, time.Second, pids...)
}

// A client that disconnects during a POST does not end the process or
// the session.
func TestStdioClientDisconnectKeepsProcess(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, iso string) {
		h := start(t, fastRestart, dest{name: "d", mode: "plain", isolation: iso})
		s := h.initialize("d", "")
		pid := s.tool("pid", nil).PID
		w := s.waitStarted("gone", "k")
		w.close()
		h.audit.wait(t, "the dropped POST", func(a auditLine) bool { return string(a.RPCID) == `"gone"` })
		if got := s.tool("pid", nil).PID; got != pid {
			t.Fatalf("pid %d after a client disconnect, was %d", got, pid)
		}
		s.tool("release", map[string]any{"key": "k"})
		s.tool("echo", map[string]any{"text": "fine"})
	})
}

// /healthz reports the destinations.
func TestStdioHealthz(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"}, dest{name: "e", mode: "plain", isolation: "session"})
	h.initialize("d", "")
	r := h.do("GET", "/healthz", nil)
	var hz struct {
		Status       string
		Destinations []struct {
			Name, State string
			Sessions    int
		}
	}
	if r.status != 200 || json.Unmarshal(r.body, &hz) != nil || hz.Status != "ok" || len(hz.Destinations) != 2 {
		t.Fatalf("healthz: %s", r)
	}
	if d := hz.Destinations[0]; d.Name != "d" || d.State != "ready" || d.Sessions != 1 {
		t.Fatalf("healthz d: %+v", d)
	}
}

// ---------------------------------------------------------------------------
// Audit log

func TestStdioAuditLog(t *testing.T) {
	if os.Getenv("AUDIT_LOG_BODIES") != "" {
		t.Skip("AUDIT_LOG_BODIES is set in the environment")
	}
	t.Parallel()
	h := start(t, fastRestart, dest{name: "d", mode: "plain"})
	s := h.initialize("d", "") // 2 requests
	s.tool("echo", map[string]any{"text": "secret-body-text"})
	st := s.listen()
	opened := time.Now()
	s.tool("changed", nil)
	st.next()
	st.close()
	openFor := time.Since(opened)
	s.delete()
	h.do("POST", "/d/mcp", rpc(1, "tools/list", nil), "Mcp-Session-Id", "3f2b8c1e-9d4a-4e7b-8c2d-1a2b3c4d5e6f")
	h.do("GET", "/healthz", nil) // not audited
	h.stop()

	lines := h.audit.parsed(t)
	type want struct {
		method, mcp, id string
		status          int
		session         bool
	}
	wants := []want{
		{"POST", "initialize", "0", 200, true},
		{"POST", "notifications/initialized", "", 202, true},
		{"POST", "tools/call", "1001", 200, true},
		{"POST", "tools/call", "1002", 200, true},
		{"GET", "", "", 200, true},
		{"DELETE", "", "", 204, true},
		{"POST", "tools/list", "1", 404, false},
	}
	if len(lines) != len(wants) {
		for _, l := range lines {
			t.Logf("%+v", l)
		}
		t.Fatalf("%d audit lines, want %d (one per request)", len(lines), len(wants))
	}
	// The GET line is written when its stream closes, so match lines to
	// requests by content, not order.
	used := make([]bool, len(lines))
	for _, w := range wants {
		found := false
		for i, l := range lines {
			if used[i] || l.HTTPMethod != w.method || l.MCPMethod != w.mcp || l.Status != w.status || string(l.RPCID) != w.id && !(w.id == "" && l.RPCID == nil) {
				continue
			}
			used[i], found = true, true
			if (l.Session == s.id) != w.session {
				t.Errorf("%+v: session %q", w, l.Session)
			}
			if l.Destination != "d" || l.Path != "/d/mcp" || l.SourceIP != "127.0.0.1" || l.LatencyMS < 0 {
				t.Errorf("audit line %+v", l)
			}
			if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil {
				t.Errorf("time %q: %v", l.Time, err)
			}
			for _, k := range []string{"time", "destination", "session", "source_ip", "http_method", "path", "mcp_method", "status", "latency_ms"} {
				if !l.keys[k] {
					t.Errorf("audit line %+v lacks %q", w, k)
				}
			}
			if l.keys["request_body"] || l.keys["response_body"] {
				t.Errorf("bodies logged without log_bodies: %+v", l)
			}
			if (l.Status >= 400) != (l.Error != "") {
				t.Errorf("status %d with error %q", l.Status, l.Error)
			}
			// Half: the client's clock runs a little longer than the server's.
			if w.method == "GET" && l.LatencyMS < float64(openFor.Microseconds())/2e3 {
				t.Errorf("GET stream latency %.3f ms, but it was open %s: the line must be written at close", l.LatencyMS, openFor)
			}
		}
		if !found {
			t.Errorf("no audit line for %+v", w)
		}
	}
	h.audit.mu.Lock()
	defer h.audit.mu.Unlock()
	for _, l := range h.audit.lines {
		if bytes.Contains(l, []byte("secret-body-text")) {
			t.Errorf("a body reached the audit log: %s", l)
		}
	}
}

func auditBodies(t *testing.T, top string) {
	h := start(t, fastRestart+top, dest{name: "d", mode: "plain"})
	s := h.initialize("d", "")
	s.tool("echo", map[string]any{"text": "body-text-1"})
	h.stop()
	for _, l := range h.audit.parsed(t) {
		if l.MCPMethod == "tools/call" {
			if !strings.Contains(l.RequestBody, "body-text-1") || !strings.Contains(l.ResponseBody, "body-text-1") {
				t.Fatalf("bodies not logged: %+v", l)
			}
			return
		}
	}
	t.Fatal("no tools/call audit line")
}

func TestStdioAuditLogBodies(t *testing.T) {
	if os.Getenv("AUDIT_LOG_BODIES") != "" {
		t.Skip("AUDIT_LOG_BODIES is set in the environment")
	}
	t.Parallel()
	auditBodies(t, "audit:\n  log_bodies: true\n")
}

func TestStdioAuditLogBodiesEnv(t *testing.T) {
	t.Setenv("AUDIT_LOG_BODIES", "1")
	auditBodies(t, "")
}

// ---------------------------------------------------------------------------
// The official go-sdk client against the go-sdk everything-server as a
// stdio destination, over /mcp and the legacy /sse.

func sdkClient(t *testing.T, progress chan<- *mcp.ProgressNotificationParams) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "sdk-e2e", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled-by-client"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice", "name": "alice"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
}

func sdkExercise(t *testing.T, cs *mcp.ClientSession, progress <-chan *mcp.ProgressNotificationParams) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, n := range []string{"test_simple_text", "test_tool_with_progress", "test_sampling", "test_elicitation"} {
		if !names[n] {
			t.Fatalf("tool %s missing from %d tools", n, len(tools.Tools))
		}
	}
	text := func(res *mcp.CallToolResult, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		if res.IsError || len(res.Content) == 0 {
			b, _ := json.Marshal(res.Content)
			t.Fatalf("CallTool result isError=%v: %s", res.IsError, b)
		}
		tc, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T", res.Content[0])
		}
		return tc.Text
	}
	if got := text(cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})); !strings.Contains(got, "simple text") {
		t.Fatalf("test_simple_text: %q", got)
	}
	p := &mcp.CallToolParams{Name: "test_tool_with_progress"}
	p.SetProgressToken("sdk-token")
	// (The tool answers with the token it saw, which is the gateway's
	// rewritten one; the client sees its own token in the notifications.)
	text(cs.CallTool(ctx, p))
	for i := 0; i < 3; i++ {
		select {
		case pn := <-progress:
			if pn.ProgressToken != "sdk-token" {
				t.Fatalf("progress token %v", pn.ProgressToken)
			}
		case <-ctx.Done():
			t.Fatalf("progress notification %d never arrived", i+1)
		}
	}
	if v := cs.InitializeResult().ProtocolVersion; v >= "2026-07-28" {
		// The stateless era has no server→client requests: the server asks
		// in its result (multi round-trip requests) and the client's
		// handlers answer on a retry, through the gateway.
		if got := text(cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_sampling"})); !strings.Contains(got, "sampled-by-client") {
			t.Fatalf("%s test_input_required_result_sampling: %q", v, got)
		}
		if got := text(cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"})); !strings.Contains(got, "alice") {
			t.Fatalf("%s test_input_required_result_elicitation: %q", v, got)
		}
		return
	}
	if got := text(cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "hi"}})); !strings.Contains(got, "sampled-by-client") {
		t.Fatalf("test_sampling: %q", got)
	}
	if got := text(cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "name?"}})); !strings.Contains(got, "accept") || !strings.Contains(got, "alice") {
		t.Fatalf("test_elicitation: %q", got)
	}
}

func TestSDKClientEverythingServer(t *testing.T) {
	bin := peertest.EverythingServer(t)
	t.Parallel()
	for _, iso := range []string{"shared", "session"} {
		for _, tr := range []string{"streamable", "sse"} {
			for _, version := range []string{"2025-11-25", ""} {
				name := iso + "/" + tr + "/" + version
				if version == "" {
					name += "default"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					h := start(t, fastRestart, dest{name: "every", command: []string{bin}, isolation: iso})
					progress := make(chan *mcp.ProgressNotificationParams, 16)
					var transport mcp.Transport
					if tr == "streamable" {
						transport = &mcp.StreamableClientTransport{Endpoint: h.url("/every/mcp"), HTTPClient: &http.Client{Transport: h.tr}}
					} else {
						transport = &mcp.SSEClientTransport{Endpoint: h.url("/every/sse"), HTTPClient: &http.Client{Transport: h.tr}}
					}
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					var opts *mcp.ClientSessionOptions
					if version != "" {
						opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
					}
					cs, err := sdkClient(t, progress).Connect(ctx, transport, opts)
					if err != nil {
						t.Fatalf("Connect: %v", err)
					}
					defer cs.Close()
					sdkExercise(t, cs, progress)
				})
			}
		}
	}
}

// /{dest}/mcp is served without the mux (directFront) exactly as the mux
// would: the destination answers; an escaped slash, a trailing slash, an
// unknown destination and the aggregated /mcp/{ns} route go where they
// went before.
func TestDirectFrontRouting(t *testing.T) {
	t.Parallel()
	h := start(t, "", dest{name: "a", mode: "plain"})
	body := rpc(0, "initialize", initParams(""))
	if r := h.do("POST", "/a/mcp", body); r.status != http.StatusOK {
		t.Fatalf("/a/mcp: HTTP %d %s", r.status, r.body)
	}
	// (Unclean paths, //a/mcp or /a/../a/mcp, name no front: the mux
	// redirects them to /a/mcp, as before.)
	for _, path := range []string{"/a%2Fmcp", "/a/mcp/", "/nope/mcp"} {
		if r := h.do("POST", path, body); r.status == http.StatusOK {
			t.Errorf("%s: HTTP 200, want it refused as the mux refuses it", path)
		}
	}
	if r := h.do("POST", "/mcp/nope", body); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "no namespace or group") {
		t.Errorf("/mcp/nope: HTTP %d %s, want the aggregated route's 404", r.status, r.body)
	}
}
