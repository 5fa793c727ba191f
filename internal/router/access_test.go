package router

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// callAs is call with the caller's access in the context, as the
// gateway's policy wrapper passes it.
func callAs(t *testing.T, acc *policy.Access, b session.Backend, method string, params any) []*jsonrpc.Message {
	t.Helper()
	nextID++
	ctx, cancel := context.WithTimeout(policy.NewContext(context.Background(), acc), 5*time.Second)
	defer cancel()
	c, err := b.Call(ctx, jsonrpc.NewRequest(jsonrpc.IntID(nextID), method, jsonrpc.Marshal(params)))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	msgs, err := drainAll(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return msgs
}

// Inside a view the router decides with the caller's Access: lists,
// search, inspect, calls and a script's calls show and reach only the
// members whose destinations the client is granted, under its tool rules.
func TestViewAccess(t *testing.T) {
	v, _, _ := codeView(t, CodeModeOn)
	var mu sync.Mutex
	var recs []audit.Record
	be, _, _ := join(t, v, Options{Audit: func(r *audit.Record) { mu.Lock(); recs = append(recs, *r); mu.Unlock() }})
	clients := map[string]*policy.Client{
		"alice": {Destinations: []string{"a"}, Namespaces: []string{"ns"}, Tools: policy.Filter{Deny: []string{"add"}}},
	}
	acc := policy.NewAuthority(clients, nil).Client("alice")

	var list struct{ Tools []struct{ Name string } }
	_ = json.Unmarshal(lastResult(t, callAs(t, acc, be, "tools/list", map[string]any{})), &list)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"search", "inspect", "execute", "say"}; !slices.Equal(names, want) {
		t.Errorf("alice's tools = %q, want %q", names, want)
	}
	for _, n := range []string{"bee__echo", "add"} {
		if e := callAs(t, acc, be, "tools/call", map[string]any{"name": n})[0].ErrorOf(); e == nil || !strings.Contains(e.Message, "unknown tool") {
			t.Errorf("alice calls %s: %+v, want unknown tool", n, e)
		}
	}
	if got := toolText(t, callAs(t, acc, be, "tools/call", map[string]any{"name": "say"})); got != "a:echo" {
		t.Errorf("alice calls say = %q", got)
	}

	s := structured(t, callAs(t, acc, be, "tools/call", map[string]any{"name": "search", "arguments": map[string]any{"query": "echo add secret", "limit": 50}}))
	for _, r := range s["results"].([]any) {
		if n := r.(map[string]any)["name"]; n == "bee__echo" || n == "add" || n == "bee__secret" {
			t.Errorf("search as alice found %v", n)
		}
	}
	s = structured(t, callAs(t, acc, be, "tools/call", map[string]any{"name": "inspect", "arguments": map[string]any{"names": []string{"say", "bee__echo", "add"}}}))
	if u, _ := json.Marshal(s["unknown"]); string(u) != `["bee__echo","add"]` {
		t.Errorf("inspect as alice: %v", s)
	}

	s = structured(t, callAs(t, acc, be, "tools/call", map[string]any{"name": "execute", "arguments": map[string]any{
		"script": `const out = []; for (const [s, n] of [["b", "echo"], ["a", "add"], ["a", "say"]]) { try { call_tool(s, n, {}); out.push("ok") } catch (e) { out.push(e.name) } } out`}}))
	if r, _ := json.Marshal(s["result"]); string(r) != `["PermissionError","PermissionError","ok"]` {
		t.Errorf("alice's script: %v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 3 {
		t.Fatalf("%d audit records of the script's calls, want 3", len(recs))
	}
	for _, r := range recs {
		if r.Client != "alice" || r.Via != MetaExecute {
			t.Errorf("script call's audit record: client %q via %q", r.Client, r.Via)
		}
	}
}
