package gateway_test

// End-to-end tests of tool shaping, tool search and code mode on an
// aggregated namespace of three real reference servers (server-everything,
// server-filesystem rooted at a temporary folder, server-memory), driven by
// the go-sdk client through the gateway.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// codeModeTop is the namespace under test: "work" has the three servers
// with code mode on; "outside" has a server that work does not.
const codeModeTop = `max_sessions: 50
timeout: 60s
namespaces:
  work:
    servers: [everything, fs, memory]
    prefix: {fs: never}
    overrides:
      everything:
        echo: {name: say, description: Repeats the message back verbatim., annotations: {title: Say it}}
        get-env: {hide: true}
      memory:
        delete_entities: {hide: true}
    code_mode: true
    sandbox: {timeout: 5s, memory: 48MiB, max_calls: 20, concurrency: 2}
  only:
    servers: [everything]
    code_mode: only
  outside:
    servers: [secret]
`

// codeModeGateway starts the gateway with the three reference servers and
// returns its base URL, the filesystem server's root and the harness.
func codeModeGateway(t *testing.T) (string, string, *harness) {
	t.Helper()
	everything := peertest.ServerEverythingTS(t)
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	fs := peertest.ServerFilesystemTS(t, root)
	memory := peertest.ServerMemoryTS(t)
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("buy milk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startAgg(t, codeModeTop, "",
		dest{name: "everything", command: everything},
		dest{name: "fs", command: fs},
		dest{name: "memory", command: memory, env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
		aggDest("secret", "peek"),
	)
	return h.url(""), root, h
}

// callTool calls a tool and returns the result (a protocol error fails the test).
func callTool(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// execResult is execute's answer.
type execResult struct {
	Status          string          `json:"status"`
	Result          json.RawMessage `json:"result"`
	Stdout          string          `json:"stdout"`
	Error           string          `json:"error"`
	ExecutionTimeMS float64         `json:"execution_time_ms"`
	ToolCalls       int             `json:"tool_calls"`
	Limit           string          `json:"limit"`
}

func execute(ctx context.Context, t *testing.T, cs *mcp.ClientSession, script string) execResult {
	t.Helper()
	res := callTool(ctx, t, cs, "execute", map[string]any{"script": script})
	var text string
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	var r execResult
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("execute answer is not JSON: %v: %q", err, text)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	var r2 execResult
	if err := json.Unmarshal(sc, &r2); err != nil || r2.Status != r.Status {
		t.Errorf("structuredContent %s differs from the text %s", sc, text)
	}
	if res.IsError != (r.Status != "ok") {
		t.Errorf("isError = %v for status %q", res.IsError, r.Status)
	}
	return r
}

// TestCodeModeE2E is issue 12's acceptance: shaping, search and code mode
// over server-everything, server-filesystem and server-memory.
func TestCodeModeE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers; skipped with -short")
	}
	base, root, h := codeModeGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := aggConnect(ctx, t, base, aggConn{path: "/mcp/work", version: legacy}, nil)

	t.Run("shaping in lists", func(t *testing.T) {
		var tools []*mcp.Tool
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			tools = append(tools, tool)
		}
		byName := map[string]*mcp.Tool{}
		for _, tl := range tools {
			byName[tl.Name] = tl
		}
		for _, want := range []string{"search", "inspect", "execute", "say", "everything__get-sum", "read_text_file", "list_directory", "memory__create_entities", "memory__read_graph"} {
			if byName[want] == nil {
				t.Errorf("tools lack %q", want)
			}
		}
		for _, gone := range []string{"everything__echo", "echo", "everything__get-env", "get-env", "memory__delete_entities", "fs__read_text_file"} {
			if byName[gone] != nil {
				t.Errorf("tools list %q", gone)
			}
		}
		if say := byName["say"]; say != nil {
			if say.Description != "Repeats the message back verbatim." || say.Annotations == nil || say.Annotations.Title != "Say it" {
				t.Errorf("say = %+v (annotations %+v)", say, say.Annotations)
			}
			if say.InputSchema == nil {
				t.Error("say lost its input schema")
			}
		}
	})

	t.Run("shaping in calls", func(t *testing.T) {
		if got := peertest.Text(callTool(ctx, t, cs, "say", map[string]any{"message": "hi"})); got != "Echo: hi" {
			t.Errorf("say = %q", got)
		}
		for _, name := range []string{"everything__echo", "echo", "everything__get-env", "memory__delete_entities"} {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("call %s: err = %v, want unknown tool", name, err)
			}
		}
	})

	t.Run("search across members", func(t *testing.T) {
		cases := map[string]string{
			"create knowledge graph entities": "memory__create_entities",
			"sum of two numbers":              "everything__get-sum",
			"verbatim":                        "say",
			"contents of a file":              "",
		}
		for q, want := range cases {
			res := callTool(ctx, t, cs, "search", map[string]any{"query": q, "limit": 5, "kind": "tool"})
			var out struct {
				Results []struct{ Name, Server, Kind string } `json:"results"`
			}
			if err := json.Unmarshal([]byte(peertest.Text(res)), &out); err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			if len(out.Results) == 0 {
				t.Errorf("search %q found nothing", q)
				continue
			}
			switch {
			case want != "" && out.Results[0].Name != want:
				t.Errorf("search %q: first %q, want %q (all %+v)", q, out.Results[0].Name, want, out.Results)
			case want == "" && out.Results[0].Server != "fs":
				t.Errorf("search %q: first %+v, want a filesystem tool", q, out.Results[0])
			}
			for _, r := range out.Results {
				if r.Name == "everything__get-env" || r.Name == "memory__delete_entities" {
					t.Errorf("search %q shows hidden %s", q, r.Name)
				}
			}
		}
		res := callTool(ctx, t, cs, "inspect", map[string]any{"names": []string{"read_text_file"}})
		if txt := peertest.Text(res); !strings.Contains(txt, `"inputSchema"`) || !strings.Contains(txt, `"path"`) {
			t.Errorf("inspect read_text_file = %s", txt)
		}
	})

	t.Run("parallel calls combined in one execute", func(t *testing.T) {
		script := fmt.Sprintf(`
const [file, sum] = parallel([
  {server: "fs", tool: "read_text_file", args: {path: %q}},
  {server: "everything", tool: "get-sum", args: {a: 19, b: 23}},
]);
api.server("memory").create_entities({entities: [{name: "notes", entityType: "file", observations: [file.content.trim()]}]});
const graph = call_tool("memory", "read_graph", {});
print("sum says:", sum);
({file: file.content.trim(), sum: Number(sum.match(/is (\d+)/)[1]), said: call_tool("everything", "say", {message: "ok"}),
  observations: graph.entities.find(e => e.name === "notes").observations})`, filepath.Join(root, "notes.txt"))
		r := execute(ctx, t, cs, script)
		if r.Status != "ok" {
			t.Fatalf("execute = %+v", r)
		}
		var got struct {
			File         string   `json:"file"`
			Sum          int      `json:"sum"`
			Said         string   `json:"said"`
			Observations []string `json:"observations"`
		}
		if err := json.Unmarshal(r.Result, &got); err != nil {
			t.Fatalf("result %s: %v", r.Result, err)
		}
		if got.File != "buy milk" || got.Sum != 42 || got.Said != "Echo: ok" || !slices.Equal(got.Observations, []string{"buy milk"}) {
			t.Errorf("result = %s", r.Result)
		}
		if r.Stdout != "sum says: The sum of 19 and 23 is 42.\n" || r.ToolCalls != 5 || r.ExecutionTimeMS <= 0 {
			t.Errorf("stdout %q, tool_calls %d, execution_time_ms %v", r.Stdout, r.ToolCalls, r.ExecutionTimeMS)
		}
		// Each call the script made has its audit record.
		h.audit.wait(t, "a script's call to fs", func(a auditLine) bool {
			return a.Destination == "fs" && a.MCPMethod == "tools/call"
		})
		h.audit.mu.Lock()
		var via []string
		for _, l := range h.audit.lines {
			var rec struct{ Destination, Tool, Via string }
			if json.Unmarshal(l, &rec) == nil && rec.Via == "execute" {
				via = append(via, rec.Destination+"."+rec.Tool)
			}
		}
		h.audit.mu.Unlock()
		for _, want := range []string{"fs.read_text_file", "everything.get-sum", "memory.create_entities", "memory.read_graph", "everything.echo"} {
			if !slices.Contains(via, want) {
				t.Errorf("no audit record of %s via execute (have %q)", want, via)
			}
		}
	})

	t.Run("outside the namespace", func(t *testing.T) {
		for _, script := range []string{`call_tool("secret", "peek", {})`, `call_tool("everything", "get-env", {})`, `call_tool("memory", "delete_entities", {entityNames: ["notes"]})`} {
			r := execute(ctx, t, cs, script)
			if r.Status != "error" || !strings.Contains(r.Error, "PermissionError") || !strings.Contains(r.Error, "view work") {
				t.Errorf("%s = %+v", script, r)
			}
		}
		// The refusal is in the audit log.
		h.audit.wait(t, "the refused call to secret", func(a auditLine) bool {
			return a.Destination == "secret" && strings.Contains(a.Error, "PermissionError")
		})
		r := execute(ctx, t, cs, `try { call_tool("secret", "peek", {}) } catch (e) { e.name }`)
		if r.Status != "ok" || string(r.Result) != `"PermissionError"` {
			t.Errorf("caught permission error = %+v", r)
		}
	})

	t.Run("bounds", func(t *testing.T) {
		cases := []struct{ name, script, limit, err string }{
			{"infinite loop", `while (true) {}`, "timeout", "timeout: the script ran longer than 5s"},
			// 8 MiB a step: the bound, not a niced worker's CPU share on a
			// loaded machine, stops it.
			{"memory bomb", `const a = []; while (true) a.push(new Float64Array(1 << 20))`, "memory", "memory: "},
			{"10000 calls", `for (let i = 0; i < 10000; i++) call_tool("everything", "get-sum", {a: i, b: 1})`, "max_calls", "max_calls: the script made more than 20 tool calls"},
		}
		for _, c := range cases {
			r := execute(ctx, t, cs, c.script)
			if r.Status != "error" || r.Limit != c.limit || !strings.Contains(r.Error, c.err) {
				t.Errorf("%s = %+v; want limit %q, error with %q", c.name, r, c.limit, c.err)
			}
			// The gateway still serves a normal call.
			if got := peertest.Text(callTool(ctx, t, cs, "say", map[string]any{"message": "still here"})); got != "Echo: still here" {
				t.Errorf("after %s: say = %q", c.name, got)
			}
		}
	})

	t.Run("serving while a script runs away", func(t *testing.T) {
		other := aggConnect(ctx, t, base, aggConn{path: "/mcp/work", version: legacy}, nil)
		var wg sync.WaitGroup
		var r execResult
		stopped := make(chan struct{})
		wg.Go(func() {
			defer close(stopped)
			r = execute(ctx, t, cs, `while (true) {}`)
		})
		// While the loop spins (5 s), another session's calls are answered:
		// calls keep completing before the script is stopped.
		answered := 0
		for i := 0; ; i++ {
			if got := peertest.Text(callTool(ctx, t, other, "everything__get-sum", map[string]any{"a": i, "b": 1})); !strings.Contains(got, fmt.Sprintf("is %d", i+1)) {
				t.Errorf("get-sum = %q", got)
			}
			select {
			case <-stopped:
			default:
				answered++
				continue
			}
			break
		}
		wg.Wait()
		if r.Limit != "timeout" {
			t.Errorf("runaway = %+v", r)
		}
		if answered == 0 {
			t.Error("no call was answered while the script ran")
		}
		t.Logf("%d calls answered while the script ran", answered)
	})

	t.Run("code_mode only", func(t *testing.T) {
		oc := aggConnect(ctx, t, base, aggConn{path: "/mcp/only", version: legacy}, nil)
		names := aggTools(ctx, t, oc)
		wantNames(t, "code_mode only tools", names, "execute", "inspect", "search")
		if _, err := oc.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "x"}}); err == nil {
			t.Error("a direct call of a server's tool succeeded under code_mode only")
		}
		r := execute(ctx, t, oc, `call_tool("everything", "echo", {message: "via script"})`)
		if r.Status != "ok" || string(r.Result) != `"Echo: via script"` {
			t.Errorf("execute = %+v", r)
		}
	})
}
