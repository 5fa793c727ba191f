package main

// Issue 25's external hook, end to end: a real HTTP hook on loopback, a
// real go-sdk server behind the gateway, go-sdk clients in front.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hookServer is a classifier on loopback: it blocks arguments holding
// "BLOCK-ARGS", results holding "BLOCK-RESULT", redacts "Alice" in
// results, and never answers a check holding "SLOW" (it waits for the
// gateway to give up). It refuses a check without the bearer token.
type hookServer struct {
	url string
	mu  sync.Mutex
	got []map[string]any // the checks received
}

const hookToken = "hook-token-5b1d0c"

func startHookServer(t *testing.T) *hookServer {
	t.Helper()
	h := &hookServer{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+hookToken {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		var req struct {
			Destination, Tool, Direction string
			Strings                      []struct{ Path, Text string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var raw map[string]any
		b, _ := json.Marshal(req)
		_ = json.Unmarshal(b, &raw)
		h.mu.Lock()
		h.got = append(h.got, raw)
		h.mu.Unlock()
		answer := map[string]any{"action": "allow"}
		for _, s := range req.Strings {
			switch {
			case strings.Contains(s.Text, "SLOW"):
				<-r.Context().Done() // the gateway's timeout ends it
				return
			case req.Direction == "arguments" && strings.Contains(s.Text, "BLOCK-ARGS"),
				req.Direction == "result" && strings.Contains(s.Text, "BLOCK-RESULT"):
				answer = map[string]any{"action": "block", "rule": "test-" + req.Direction}
			case req.Direction == "result" && strings.Contains(s.Text, "Alice"):
				answer = map[string]any{"action": "redact", "spans": []map[string]any{
					{"path": s.Path, "offset": strings.Index(s.Text, "Alice"), "length": 5, "rule": "person"}}}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(hs.Close)
	h.url = hs.URL
	return h
}

func (h *hookServer) checks() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.got...)
}

// startEchoServer is a go-sdk server whose tool "say" answers "said: "
// and its text, and counts its calls.
func startEchoServer(t *testing.T) (string, func() int) {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "say", Description: "Say the text.", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"text": map[string]any{"type": "string"}}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			calls++
			mu.Unlock()
			var a struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return textResult("said: " + a.Text), nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL + "/", func() int { mu.Lock(); defer mu.Unlock(); return calls }
}

// hookGateway starts a gateway whose destination "hooked" is checked by
// the hook at hookURL (fail: fail, timeout: timeout) and "plain" (the same
// server) is not.
func hookGateway(t *testing.T, serverURL, hookURL, fail, timeout string) (string, *auditSink) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook.token"), []byte(hookToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "switchboard.yaml")
	yml := fmt.Sprintf(`listen: 127.0.0.1:0
audit: {path: off}
guards:
  hook: {url: %q, fail: %s, timeout: %s, token_file: hook.token, destinations: [hooked]}
destinations:
  hooked: {type: streamable_http, url: %q}
  plain: {type: streamable_http, url: %q}
`, hookURL, fail, timeout, serverURL, serverURL)
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return startPinGateway(t, path)
}

// waitAudit returns the first audit line of tool call text with want in
// it, waiting for it (the record is written as the response ends).
func waitAudit(ctx context.Context, t *testing.T, sink *auditSink, text, want string) string {
	t.Helper()
	for {
		next := sink.wrote()
		for _, l := range sink.all() {
			if strings.Contains(l, `"mcp_method":"tools/call"`) && strings.Contains(l, want) {
				return l
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no audit line with %s in %v", text, want, sink.all())
		case <-next:
		}
	}
}

// TestGuardHookE2E: allow, block (arguments: the server is not called;
// result: withheld), redact, a timeout with fail open and with fail
// closed, the hook down (connection refused) with fail closed; a
// destination the hook is not configured for is served as without it.
// The hook gets the bearer token; the audit line says what the hook did,
// never the token.
func TestGuardHookE2E(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hook := startHookServer(t)
	srvURL, calls := startEchoServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/check"
	ln.Close() // nothing listens there: connection refused

	// A generous timeout where the hook answers (a loaded machine must not
	// turn an answer into a timeout); 300ms where the test waits for it.
	open, openAudit := hookGateway(t, srvURL, hook.url, "open", "30s")
	short, shortAudit := hookGateway(t, srvURL, hook.url, "open", "300ms")
	closed, closedAudit := hookGateway(t, srvURL, hook.url, "closed", "300ms")
	down, downAudit := hookGateway(t, srvURL, downURL, "closed", "30s")

	say := func(t *testing.T, base, dest, text string) (*mcp.CallToolResult, error) {
		t.Helper()
		s := connectHTTP(ctx, t, dest, base+"/"+dest+"/mcp", "", false)
		return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"text": text}})
	}
	text := func(t *testing.T) func(*mcp.CallToolResult, error) string {
		return func(res *mcp.CallToolResult, err error) string {
			t.Helper()
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			return res.Content[0].(*mcp.TextContent).Text
		}
	}

	t.Run("allow", func(t *testing.T) {
		got := text(t)(say(t, open, "hooked", "hello"))
		if got != "said: hello" {
			t.Errorf("got %q", got)
		}
		l := waitAudit(ctx, t, openAudit, "hello", `"hook":"arguments: allow`)
		if !strings.Contains(l, "; result: allow") || strings.Contains(l, hookToken) {
			t.Errorf("audit: %s", l)
		}
		var args, res bool
		for _, c := range hook.checks() {
			if c["Destination"] != "hooked" || c["Tool"] != "say" {
				continue
			}
			s, _ := json.Marshal(c["Strings"])
			args = args || c["Direction"] == "arguments" && strings.Contains(string(s), `{"Path":"/text","Text":"hello"}`)
			res = res || c["Direction"] == "result" && strings.Contains(string(s), `{"Path":"/content/0/text","Text":"said: hello"}`)
		}
		if !args || !res {
			t.Errorf("the hook was not asked about the arguments (%v) and the result (%v): %v", args, res, hook.checks())
		}
	})
	t.Run("block-arguments", func(t *testing.T) {
		before := calls()
		_, err := say(t, open, "hooked", "BLOCK-ARGS now")
		if err == nil || !strings.Contains(err.Error(), "refused by switchboard's guard hook: test-arguments") {
			t.Errorf("err = %v", err)
		}
		if calls() != before {
			t.Error("the server was called with blocked arguments")
		}
		waitAudit(ctx, t, openAudit, "BLOCK-ARGS", `"hook":"arguments: block test-arguments`)
	})
	t.Run("block-result", func(t *testing.T) {
		res, err := say(t, open, "hooked", "BLOCK-RESULT")
		got := text(t)(res, err)
		if !res.IsError || strings.Contains(got, "said") || !strings.Contains(got, "withheld by Switchboard's guard hook: test-result") {
			t.Errorf("isError %v, %q", res.IsError, got)
		}
		waitAudit(ctx, t, openAudit, "BLOCK-RESULT", `result: block test-result`)
	})
	t.Run("redact", func(t *testing.T) {
		got := text(t)(say(t, open, "hooked", "hi Alice!"))
		if got != "said: hi [REDACTED:person]!" {
			t.Errorf("got %q", got)
		}
		waitAudit(ctx, t, openAudit, "Alice", `result: redact 1 span(s)`)
	})
	t.Run("timeout-fail-open", func(t *testing.T) {
		got := text(t)(say(t, short, "hooked", "SLOW"))
		if got != "said: SLOW" {
			t.Errorf("got %q", got)
		}
		waitAudit(ctx, t, shortAudit, "SLOW", `"hook":"arguments: timeout after 300ms, fail open`)
	})
	t.Run("timeout-fail-closed", func(t *testing.T) {
		before := calls()
		_, err := say(t, closed, "hooked", "SLOW")
		if err == nil || !strings.Contains(err.Error(), "refused by switchboard's guard hook: unavailable") {
			t.Errorf("err = %v", err)
		}
		if calls() != before {
			t.Error("the server was called though the check failed closed")
		}
		waitAudit(ctx, t, closedAudit, "SLOW", `"hook":"arguments: timeout after 300ms, fail closed`)
	})
	t.Run("down-fail-closed", func(t *testing.T) {
		_, err := say(t, down, "hooked", "hello")
		if err == nil || !strings.Contains(err.Error(), "unavailable") {
			t.Errorf("err = %v", err)
		}
		l := waitAudit(ctx, t, downAudit, "hello", `"hook":"arguments: unreachable, fail closed`)
		if strings.Contains(l, downURL) {
			t.Errorf("the audit line names the hook's URL: %s", l)
		}
	})
	t.Run("not-configured", func(t *testing.T) {
		n := len(hook.checks())
		for _, base := range []string{open, short, closed, down} {
			got := text(t)(say(t, base, "plain", "BLOCK-ARGS SLOW Alice"))
			if got != "said: BLOCK-ARGS SLOW Alice" {
				t.Errorf("got %q", got)
			}
		}
		if len(hook.checks()) != n {
			t.Errorf("the hook was asked about a destination it is not configured for: %v", hook.checks()[n:])
		}
		for _, sink := range []*auditSink{openAudit, shortAudit, closedAudit, downAudit} {
			l := waitAudit(ctx, t, sink, "plain", `"destination":"plain"`)
			if strings.Contains(l, `"hook"`) {
				t.Errorf("audit of plain: %s", l)
			}
		}
	})
}
