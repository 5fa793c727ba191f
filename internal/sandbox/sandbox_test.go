package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeCaller answers tools of two servers: "math" (add: {a, b} →
// structuredContent {sum}) and "text" (echo: text; fail: isError; slow:
// waits for its context or 50 ms). Other servers are not in the view.
type fakeCaller struct {
	calls    atomic.Int64
	inFlight atomic.Int64
	peak     atomic.Int64
}

func (f *fakeCaller) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	f.calls.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if server == "" { // exposed names: server__tool
		server, tool, _ = strings.Cut(tool, "__")
	}
	switch server + "." + tool {
	case "math.add":
		var a struct{ A, B float64 }
		_ = json.Unmarshal(args, &a)
		return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"%g"}],"structuredContent":{"sum":%g}}`, a.A+a.B, a.A+a.B)), nil
	case "text.echo":
		var a struct{ Message string }
		_ = json.Unmarshal(args, &a)
		b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": a.Message}}})
		return b, nil
	case "text.fail":
		return json.RawMessage(`{"content":[{"type":"text","text":"it broke"}],"isError":true}`), nil
	case "text.slow":
		select {
		case <-ctx.Done():
			return nil, &ToolError{Msg: ctx.Err().Error()}
		case <-time.After(50 * time.Millisecond):
		}
		return json.RawMessage(`{"content":[{"type":"text","text":"slow"}]}`), nil
	case "text.image":
		return json.RawMessage(`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`), nil
	}
	if server != "math" && server != "text" {
		return nil, &PermissionError{Msg: fmt.Sprintf("server %q is not in namespace ns", server)}
	}
	return nil, &PermissionError{Msg: fmt.Sprintf("tool %q of server %q is not available in namespace ns", tool, server)}
}

// limits are the tests' bounds; their workers run at nice 1, so that a
// busy machine does not starve them.
func limits() Limits {
	return Limits{Timeout: 5 * time.Second, Memory: 32 << 20, MaxCalls: 50, MaxOutput: 4 << 10, Concurrency: 2, Nice: 1}
}

func runScript(t *testing.T, l Limits, script string) (*Result, *fakeCaller) {
	t.Helper()
	c := &fakeCaller{}
	res := NewRunner(l).Run(t.Context(), script, c)
	return res, c
}

func TestRunValuesAndAPI(t *testing.T) {
	cases := []struct {
		name, script, result, stdout string
	}{
		{"expression", `1 + 2`, `3`, ""},
		{"object", `({a: [1, "x"], b: null})`, `{"a":[1,"x"],"b":null}`, ""},
		{"undefined", `var x = 1;`, `null`, ""},
		{"call_tool structured", `call_tool("math", "add", {a: 2, b: 3}).sum`, `5`, ""},
		{"call_tool text", `call_tool("text", "echo", {message: "hi"})`, `"hi"`, ""},
		{"exposed name", `call_tool("math__add", {a: 1, b: 1})`, `{"sum":2}`, ""},
		{"proxy", `api.server("math").add({a: 4, b: 5}).sum`, `9`, ""},
		{"api property", `api.math.add({a: 1, b: 5}).sum + api.parallel([["math", "add", {a: 1, b: 1}]])[0].sum`, `8`, ""},
		{"api keys", `Object.keys(api).join()`, `"call_tool,call_tool_raw,server,parallel"`, ""},
		{"raw", `api.call_tool_raw("text", "fail", {}).isError`, `true`, ""},
		{"non-text", `call_tool("text", "image", {}).content[0].mimeType`, `"image/png"`, ""},
		{"parallel", `const [x, y] = parallel([{server: "math", tool: "add", args: {a: 1, b: 2}}, ["text", "echo", {message: "m"}]]); x.sum + y`, `"3m"`, ""},
		{"print", `print("a", 1, {b: 2}); console.log("c"); 0`, `0`, "a 1 {\"b\":2}\nc\n"},
		{"return and await", `const r = await call_tool("math", "add", {a: 1, b: 1}); return r.sum * 10;`, `20`, ""},
		{"catch tool error", `try { call_tool("text", "fail", {}) } catch (e) { e.name + ": " + e.message }`, `"ToolError: text.fail failed: it broke"`, ""},
		{"catch permission", `try { call_tool("other", "x", {}) } catch (e) { e instanceof PermissionError }`, `true`, ""},
		{"for-in over an array", `const ks = []; for (const k in [7, 8]) ks.push(k); [1, 2, 3].map(x => x * 2).concat(ks).join()`, `"2,4,6,0,1"`, ""},
		{"no modules or process", `typeof require + typeof process + typeof os`, `"undefinedundefinedundefined"`, ""},
		{"typed arrays", `new Uint8Array([1, 2, 300]).join()`, `"1,2,44"`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, _ := runScript(t, limits(), c.script)
			if res.Status != StatusOK || string(res.Result) != c.result || res.Stdout != c.stdout {
				t.Errorf("got %+v (result %s), want result %s stdout %q", res, res.Result, c.result, c.stdout)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	cases := []struct {
		name, script, limit, err string
	}{
		{"syntax", `let = ;`, "", "SyntaxError"},
		{"thrown", `throw new Error("boom")`, "", "Error: boom"},
		{"rejected", `await 1; throw new TypeError("late")`, "", "TypeError: late"},
		{"permission", `call_tool("secret", "x", {})`, "", `PermissionError: server "secret" is not in namespace ns`},
		{"tool error", `call_tool("text", "fail")`, "", "ToolError: text.fail failed: it broke"},
		{"timeout", `while (true) {}`, "timeout", "timeout: the script ran longer than 300ms"},
		{"timeout caught", `for (;;) { try { while (true) {} } catch (e) {} }`, "timeout", "timeout"},
		{"max_calls", `for (let i = 0; i < 10000; i++) call_tool("math", "add", {a: i, b: 1})`, "max_calls", "max_calls: the script made more than 50 tool calls"},
		{"max_calls caught", `for (let i = 0; i < 10000; i++) { try { call_tool("math", "add", {a: i, b: 1}) } catch (e) {} }`, "max_calls", "max_calls"},
		{"parallel max_calls", `parallel(Array.from({length: 51}, () => ["math", "add", {}]))`, "max_calls", "max_calls"},
		{"print", `while (true) print("xxxxxxxxxxxxxxxxxxxxxxxxxxxx")`, "max_output", "max_output: the script printed more than 4 KiB"},
		{"result size", `"x".repeat(10000)`, "max_output", "max_output: the result is"},
		{"repeat", `"ab".repeat(1e9)`, "memory", "memory: the script used more than 32 MiB (String.prototype.repeat"},
		{"array from", `Array.from({length: 1e9}, (_, i) => i)`, "memory", "Array.from of 1000000000 elements"},
		{"sparse join", `const a = []; a.length = 4e9 - 1; a.join("x")`, "memory", "Array.prototype.join"},
		{"array bomb", `const a = []; while (true) a.push(new Array(100000).fill(1.5))`, "memory", "memory: the heap grew by more than 32 MiB"},
		{"string bomb", `let s = "x"; const keep = []; while (true) { s = s + s; keep.push(s + "y") }`, "memory", "memory"},
		{"sparse array filled", `new Array(4e9 - 1).fill(1)`, "memory", "Array.prototype.fill over 3999999999 elements"},
		{"stack", `function f(n) { return f(n + 1) + 1 } f(0)`, "stack", "stack: the script's calls nested deeper than 2048"},
		{"stack caught", `function f(n) { return f(n + 1) + 1 } try { f(0) } catch (e) { "caught" }`, "stack", "stack"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := limits()
			l.Timeout = time.Minute // the bound must be the script's, not time (a loaded machine, -race)
			if c.limit == "timeout" {
				l.Timeout = 300 * time.Millisecond
			}
			res, calls := runScript(t, l, c.script)
			if res.Status != StatusError || res.Limit != c.limit || !strings.Contains(res.Error, c.err) {
				t.Errorf("got status %q limit %q error %q; want limit %q error containing %q", res.Status, res.Limit, res.Error, c.limit, c.err)
			}
			if c.limit == "max_calls" && calls.calls.Load() > 50 {
				t.Errorf("%d calls made past max_calls 50", calls.calls.Load())
			}
			if c.limit == "max_output" && len(res.Stdout) > 4<<10 {
				t.Errorf("stdout %d bytes past max_output", len(res.Stdout))
			}
		})
	}
}

func TestParallelRunsConcurrently(t *testing.T) {
	res, c := runScript(t, limits(), `parallel([["text","slow"],["text","slow"],["text","slow"],["text","slow"]]).join(",")`)
	if res.Status != StatusOK || string(res.Result) != `"slow,slow,slow,slow"` {
		t.Fatalf("%+v", res)
	}
	if c.peak.Load() < 2 {
		t.Errorf("parallel calls never overlapped (peak %d in flight)", c.peak.Load())
	}
}

func TestTimeoutEndsCallsInFlight(t *testing.T) {
	l := limits()
	l.Timeout = 20 * time.Millisecond
	// slow waits 50 ms unless its context ends: the timeout must end it.
	res, _ := runScript(t, l, `while (true) call_tool("text", "slow")`)
	if res.Limit != "timeout" {
		t.Fatalf("%+v", res)
	}
	if res.ExecutionTimeMS > 2000 {
		t.Errorf("took %.0f ms to stop", res.ExecutionTimeMS)
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	done := make(chan *Result, 1)
	go func() {
		done <- NewRunner(limits()).Run(ctx, `call_tool("text", "block")`, &blockingCaller{started: started, release: release})
	}()
	<-started
	cancel()
	res := <-done
	if res.Limit != "cancelled" || !strings.Contains(res.Error, "cancelled") {
		t.Errorf("cancelled script = %+v", res)
	}
}

func TestConcurrencyBounded(t *testing.T) {
	l := limits()
	l.Concurrency = 1
	r := NewRunner(l)
	started := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r.Run(t.Context(), `call_tool("text", "block")`, &blockingCaller{started: started, release: release})
	})
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	res := r.Run(ctx, `1`, &fakeCaller{})
	close(release)
	wg.Wait()
	if res.Limit != "concurrency" || !strings.Contains(res.Error, "no script slot free") {
		t.Errorf("second script while the only slot is taken: %+v", res)
	}
	if res := r.Run(t.Context(), `1`, &fakeCaller{}); res.Status != StatusOK {
		t.Errorf("after the slot is free: %+v", res)
	}
}

type blockingCaller struct{ started, release chan struct{} }

func (b *blockingCaller) CallTool(ctx context.Context, _, _ string, _ json.RawMessage) (json.RawMessage, error) {
	close(b.started)
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, &ToolError{Msg: ctx.Err().Error()}
	}
	return json.RawMessage(`{"content":[]}`), nil
}

func TestResultJSON(t *testing.T) {
	res, _ := runScript(t, limits(), `print("x"); ({ok: true})`)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"status", "result", "stdout", "execution_time_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result JSON lacks %q: %s", k, b)
		}
	}
}

// BenchmarkRunEmpty is the cost of one script that calls nothing: a fresh
// interpreter with the API installed, compiling and running "1".
func BenchmarkRunEmpty(b *testing.B) {
	r := NewRunner(limits())
	c := &fakeCaller{}
	for b.Loop() {
		if res := r.Run(context.Background(), `1`, c); res.Status != StatusOK {
			b.Fatal(res.Error)
		}
	}
}
