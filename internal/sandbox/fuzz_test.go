package sandbox

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// FuzzRun runs arbitrary scripts: every one ends within its bounds with a
// result whose JSON is valid, and nothing panics.
func FuzzRun(f *testing.F) {
	for _, s := range []string{
		`1 + 1`, `call_tool("math", "add", {a: 1, b: 2})`, `parallel([["text", "echo", {message: "x"}]])`,
		`api.server("text").echo({message: "hi"})`, `return await call_tool("text", "fail")`, `print({a: [1, 2]})`,
		`throw 1`, `while (true) {}`, `"ab".repeat(1e9)`, `[].fill.call({length: 1e10}, 1)`, `({}).constructor.constructor("return this")()`,
		`call_tool()`, `call_tool(1, 2, 3)`, `parallel(null)`, `parallel([1])`, `api.server("x")[Symbol.iterator]`, `JSON.stringify(api.server("m"))`,
	} {
		f.Add(s)
	}
	r := NewRunner(Limits{Timeout: 200 * time.Millisecond, Memory: 16 << 20, MaxCalls: 20, MaxOutput: 4 << 10, Concurrency: 1})
	f.Fuzz(func(t *testing.T, script string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		res := r.Run(ctx, script, &fakeCaller{})
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %s", d)
		}
		if res.Status != StatusOK && res.Status != StatusError {
			t.Fatalf("status %q", res.Status)
		}
		if !json.Valid(res.Result) {
			t.Fatalf("result %q is not JSON", res.Result)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatal(err)
		}
		if int64(len(res.Stdout)) > 4<<10 {
			t.Fatalf("stdout %d bytes", len(res.Stdout))
		}
	})
}
