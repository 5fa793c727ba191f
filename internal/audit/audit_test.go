package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// decodeLines parses the log output, failing on any line that is not one
// JSON object.
func decodeLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		recs = append(recs, m)
	}
	return recs
}

func logOne(t *testing.T, opts Options, r *Record) (string, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	New(&buf, opts).Log(r)
	recs := decodeLines(t, buf.Bytes())
	if len(recs) != 1 {
		t.Fatalf("got %d lines; want 1: %q", len(recs), buf.String())
	}
	return buf.String(), recs[0]
}

func TestLogShape(t *testing.T) {
	when := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
	line, _ := logOne(t, Options{}, &Record{
		Time:        when,
		Destination: "github",
		Session:     "sess-1",
		SourceIP:    "127.0.0.1",
		HTTPMethod:  "POST",
		Path:        "/github/mcp",
		MCPMethod:   "tools/call",
		Tool:        "create_issue",
		RPCID:       json.RawMessage(`"abc"`),
		Status:      200,
		Latency:     12345678 * time.Nanosecond,
		RequestBody: []byte(`{"x":1}`), // not logged without LogBodies
	})
	const want = `{"time":"2025-01-02T02:04:05.123456789Z","destination":"github","session":"sess-1",` +
		`"source_ip":"127.0.0.1","http_method":"POST","path":"/github/mcp","mcp_method":"tools/call",` +
		`"tool":"create_issue","rpc_id":"abc","status":200,"latency_ms":12.346}` + "\n"
	if line != want {
		t.Errorf("line =\n%s\nwant\n%s", line, want)
	}
}

func TestLogOptionalFields(t *testing.T) {
	_, m := logOne(t, Options{}, &Record{HTTPMethod: "GET", Status: 200, Error: "upstream closed <eof>"})
	if _, ok := m["rpc_id"]; ok {
		t.Error("rpc_id present for nil RPCID")
	}
	if m["error"] != "upstream closed <eof>" {
		t.Errorf("error = %v", m["error"])
	}
	if _, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil {
		t.Errorf("zero Time not filled: %v", err)
	}
	for _, k := range []string{"request_body", "response_body", "truncated", "tool", "via", "hook"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s present without LogBodies or a value", k)
		}
	}
	_, m = logOne(t, Options{}, &Record{MCPMethod: "tools/call", Tool: "echo", Via: "execute"})
	if m["tool"] != "echo" || m["via"] != "execute" {
		t.Errorf("tool, via = %v, %v", m["tool"], m["via"])
	}
	_, m = logOne(t, Options{}, &Record{MCPMethod: "tools/call", Tool: "echo", Hook: "arguments: allow (1ms)"})
	if m["hook"] != "arguments: allow (1ms)" {
		t.Errorf("hook = %v", m["hook"])
	}
	_, m = logOne(t, Options{}, &Record{RPCID: json.RawMessage(`{not json`)})
	if m["rpc_id"] != "{not json" {
		t.Errorf("invalid rpc_id written as %v; want a string", m["rpc_id"])
	}
	_, m = logOne(t, Options{}, &Record{RPCID: json.RawMessage(`7`)})
	if m["rpc_id"] != 7.0 {
		t.Errorf("rpc_id = %v; want 7", m["rpc_id"])
	}
}

func TestLogBodiesTruncation(t *testing.T) {
	for _, tt := range []struct {
		name      string
		reqLen    int
		respLen   int
		truncated bool
	}{
		{"small", 10, 20, false},
		{"exactly limit", MaxBodyBytes, MaxBodyBytes, false},
		{"request one over", MaxBodyBytes + 1, 5, true},
		{"response far over", 0, 5 * MaxBodyBytes, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := bytes.Repeat([]byte("q"), tt.reqLen)
			resp := bytes.Repeat([]byte("r"), tt.respLen)
			_, m := logOne(t, Options{LogBodies: true}, &Record{RequestBody: req, ResponseBody: resp})
			check := func(key string, n int) {
				got, _ := m[key].(string)
				want := min(n, MaxBodyBytes)
				if len(got) != want {
					t.Errorf("len(%s) = %d; want %d", key, len(got), want)
				}
				if n == 0 {
					if _, ok := m[key]; ok {
						t.Errorf("%s present for empty body", key)
					}
				}
			}
			check("request_body", tt.reqLen)
			check("response_body", tt.respLen)
			if got := m["truncated"] == true; got != tt.truncated {
				t.Errorf("truncated = %v; want %v", m["truncated"], tt.truncated)
			}
		})
	}
}

func TestLogRedaction(t *testing.T) {
	const secret = "sk-live-1234567890"
	rd := NewRedactor([]string{secret, `pa"ss\word`, "abc"}) // "abc" too short: ignored
	req := []byte(`{"params":{"arguments":{"token":"` + secret + `","pw":"pa\"ss\\word","note":"abc"}}}`)
	// A secret straddling the cut must not leave a prefix behind.
	long := append(bytes.Repeat([]byte("x"), MaxBodyBytes-5), secret...)
	line, m := logOne(t, Options{LogBodies: true, Redact: rd}, &Record{
		Path:         "/d/mcp?key=" + secret,
		Error:        "upstream said: bad key " + secret,
		RequestBody:  req,
		ResponseBody: long,
	})
	for _, leak := range []string{secret, "sk-li", `pa\"ss`, `pa\\\"ss`} {
		if strings.Contains(line, leak) {
			t.Errorf("line leaks %q: %s", leak, line)
		}
	}
	if !strings.Contains(m["request_body"].(string), `"token":"[REDACTED]"`) ||
		!strings.Contains(m["request_body"].(string), `"pw":"[REDACTED]"`) ||
		!strings.Contains(m["request_body"].(string), `"note":"abc"`) {
		t.Errorf("request_body = %s", m["request_body"])
	}
	if m["error"] != "upstream said: bad key [REDACTED]" {
		t.Errorf("error = %v", m["error"])
	}
	if m["path"] != "/d/mcp?key=[REDACTED]" {
		t.Errorf("path = %v", m["path"])
	}
	if m["truncated"] != true || len(m["response_body"].(string)) != MaxBodyBytes {
		t.Errorf("response body not cut to %d: truncated=%v len=%d", MaxBodyBytes, m["truncated"], len(m["response_body"].(string)))
	}
}

func TestLogConcurrentWholeLines(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	// A writer that writes in small pieces would interleave without the
	// logger's own serialisation.
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	l := New(w, Options{LogBodies: true})
	const goroutines, each = 16, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				l.Log(&Record{
					Destination: fmt.Sprintf("d%d", g),
					RPCID:       json.RawMessage(fmt.Sprint(i)),
					RequestBody: bytes.Repeat([]byte{'a' + byte(g)}, 2000+i),
				})
			}
		})
	}
	wg.Wait()
	recs := decodeLines(t, out.Bytes())
	if len(recs) != goroutines*each {
		t.Fatalf("got %d lines; want %d", len(recs), goroutines*each)
	}
	if l.WriteErrors() != 0 {
		t.Errorf("WriteErrors = %d", l.WriteErrors())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestLogWriteErrorsCounted(t *testing.T) {
	var out bytes.Buffer
	fail := true
	w := writerFunc(func(p []byte) (int, error) {
		if fail {
			n, _ := out.Write(p[:len(p)/2])
			return n, errors.New("disk full")
		}
		return out.Write(p)
	})
	l := New(w, Options{})
	l.Log(&Record{Status: 500})
	fail = false
	l.Log(&Record{Status: 200})
	if l.WriteErrors() != 1 {
		t.Errorf("WriteErrors = %d; want 1", l.WriteErrors())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["status"] != 200.0 {
		t.Errorf("line after a partial write is not whole: %q (%v)", lines[len(lines)-1], err)
	}
	var nilLogger *Logger
	nilLogger.Log(&Record{}) // must not panic
}

func TestSourceIP(t *testing.T) {
	for _, tt := range []struct{ remote, want string }{
		{"192.0.2.7:5555", "192.0.2.7"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"@", "@"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		r.Header.Set("X-Real-Ip", "203.0.113.10")
		if got := SourceIP(r); got != tt.want {
			t.Errorf("SourceIP(%q) = %q; want %q", tt.remote, got, tt.want)
		}
	}
}

func TestRedactor(t *testing.T) {
	var nilR *Redactor
	if nilR.String("secret") != "secret" || string(nilR.Bytes([]byte("x"))) != "x" {
		t.Fatal("nil Redactor changed input")
	}
	r := NewRedactor([]string{"token", "tokenXYZ", "", "ab", "tok<&>en"})
	for _, tt := range []struct{ in, want string }{
		{"no secrets here", "no secrets here"},
		{"a tokenXYZ b token c", "a [REDACTED] b [REDACTED] c"},
		{"tokentoken", "[REDACTED][REDACTED]"},
		{"ab ab", "ab ab"},
		{`"tok\u003c\u0026\u003een" and "tok<&>en"`, `"[REDACTED]" and "[REDACTED]"`},
	} {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q; want %q", tt.in, got, tt.want)
		}
		if got := string(r.Bytes([]byte(tt.in))); got != tt.want {
			t.Errorf("Bytes(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	in := []byte("clean")
	if out := r.Bytes(in); &out[0] != &in[0] {
		t.Error("Bytes copied input with no secret")
	}
	if n := testing.AllocsPerRun(100, func() { r.String("nothing secret in this string at all") }); n != 0 {
		t.Errorf("String allocates %v times with no secret", n)
	}
	empty := NewRedactor([]string{"x"})
	if empty.String("x marks") != "x marks" {
		t.Error("short secret redacted")
	}
}

type secretStringer struct{}

func (secretStringer) String() string { return "has hunter22 inside" }

type secretValuer struct{}

func (secretValuer) LogValue() slog.Value { return slog.StringValue("lv hunter22") }

func TestRedactingHandler(t *testing.T) {
	const secret = "hunter22"
	r := NewRedactor([]string{secret, "424242"})
	for _, kind := range []string{"text", "json"} {
		t.Run(kind, func(t *testing.T) {
			var buf bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&buf, nil)
			if kind == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			log := slog.New(RedactingHandler(h, r)).With("with", "w-"+secret).WithGroup("g")
			log.Info("login as "+secret,
				"str", secret,
				"err", fmt.Errorf("dial: password %s rejected", secret),
				"bytes", []byte("b-"+secret),
				"stringer", secretStringer{},
				"valuer", secretValuer{},
				"num", 424242,
				"ok", 42,
				slog.Group("inner", "deep", "x"+secret),
				secret, "as key",
			)
			out := buf.String()
			if strings.Contains(out, secret) || strings.Contains(out, "424242") {
				t.Errorf("output leaks a secret:\n%s", out)
			}
			if !strings.Contains(out, "[REDACTED]") || !strings.Contains(out, "42") {
				t.Errorf("output lost content:\n%s", out)
			}
		})
	}
	h := slog.NewTextHandler(io.Discard, nil)
	if RedactingHandler(h, nil) != slog.Handler(h) {
		t.Error("nil Redactor should return the handler unchanged")
	}
}

func BenchmarkLog(b *testing.B) {
	l := New(io.Discard, Options{LogBodies: true, Redact: NewRedactor([]string{"sk-live-1234567890", "another-secret"})})
	rec := &Record{
		Time: time.Now(), Destination: "github", Session: "0b6c4a1e-2f57-4a8e-9f0e-1c2d3e4f5a6b",
		SourceIP: "127.0.0.1", HTTPMethod: "POST", Path: "/github/mcp", MCPMethod: "tools/call",
		RPCID: json.RawMessage("42"), Status: 200, Latency: 3 * time.Millisecond,
		RequestBody:  []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`),
		ResponseBody: []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"hi"}]}}`),
	}
	b.ReportAllocs()
	for b.Loop() {
		l.Log(rec)
	}
}

// gateWriter's first Write blocks until release is closed; it records
// every Write.
type gateWriter struct {
	entered, release chan struct{}
	mu               sync.Mutex
	writes           [][]byte
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	first := len(g.writes) == 0
	g.writes = append(g.writes, bytes.Clone(p))
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	return len(p), nil
}

// Lines logged while a write is in progress go out together in the next
// Write, whole and once each; every Log returns only once its line is
// written; a failed batch counts each of its lines.
func TestLogGroupCommit(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	l := New(g, Options{})
	first := make(chan struct{})
	go func() { l.Log(&Record{Status: 1}); close(first) }()
	<-g.entered

	const n = 10
	done := make(chan struct{}, n)
	for i := 2; i <= n+1; i++ {
		go func() { l.Log(&Record{Status: i}); done <- struct{}{} }()
	}
	for {
		l.mu.Lock()
		q := l.queued
		l.mu.Unlock()
		if q == n+1 {
			break
		}
		select {
		case <-done:
			t.Fatal("a queued Log returned before the write in progress ended")
		default:
		}
		runtime.Gosched()
	}
	close(g.release)
	<-first
	for range n {
		<-done
	}
	if len(g.writes) != 2 {
		t.Fatalf("%d writes for %d lines, want 2", len(g.writes), n+1)
	}
	seen := map[int]int{}
	for _, w := range g.writes {
		for _, r := range decodeLines(t, w) {
			seen[int(r["status"].(float64))]++
		}
	}
	for i := 1; i <= n+1; i++ {
		if seen[i] != 1 {
			t.Fatalf("line %d written %d times", i, seen[i])
		}
	}

	// A batch cut off mid-way loses the lines after the cut, counted
	// one each; the next line starts on a line of its own.
	var out bytes.Buffer
	cut := true
	w := writerFunc(func(p []byte) (int, error) {
		if cut {
			cut = false
			m, _ := out.Write(p[:5])
			return m, errors.New("disk full")
		}
		return out.Write(p)
	})
	l = New(w, Options{})
	l.pending = []byte("{\"queued\":1}\n") // as if queued behind a write
	l.queued = 1
	l.Log(&Record{Status: 2})
	if got := l.WriteErrors(); got != 2 {
		t.Errorf("WriteErrors = %d after a batch of two lines was cut, want 2", got)
	}
	l.Log(&Record{Status: 3})
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"status":3`) {
		t.Errorf("after a cut batch: %q", out.String())
	}
}

// Release runs what OnRelease registered, in order, once, and clears the
// bodies that may point into what it frees.
func TestRecordRelease(t *testing.T) {
	var got []int
	r := &Record{RequestBody: []byte("req"), ResponseBody: []byte("resp"), RPCID: []byte("1")}
	r.Release() // nothing registered
	r.RequestBody = []byte("req")
	r.OnRelease(func() { got = append(got, 1) })
	r.OnRelease(func() { got = append(got, 2) })
	r.Release()
	r.Release()
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("released %v, want [1 2]", got)
	}
	if r.RequestBody != nil || r.ResponseBody != nil || r.RPCID != nil {
		t.Fatal("bodies kept after Release")
	}
}
