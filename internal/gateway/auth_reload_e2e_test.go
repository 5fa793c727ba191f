package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// A reload changes clients and rules at once, for open sessions too.
func TestAuthReload(t *testing.T) {
	top := func(extra string) string {
		return `timeout: 20s
clients:
  ci:
    tokens: ["sha256:` + sha256Hex(limitedToken) + `"]
    destinations: [alpha]
` + extra
	}
	h, cf := startFile(t, gateway.Options{NoReload: true}, top(""), aggDest("alpha", "a1", "a2"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	cs := connectAs(ctx, t, h, "/alpha/mcp", limitedToken)
	wantNames(t, "tools before the reload", aggTools(ctx, t, cs), "a1", "a2")
	init := rpc(0, "initialize", initParams(""))
	if r := h.do("POST", "/alpha/mcp", init, bearer(fullToken)...); r.status != http.StatusUnauthorized {
		t.Fatalf("unknown token before the reload: %d", r.status)
	}

	cf.write(cf.yaml(top(`    tools: {deny: [a2]}
  ops:
    tokens: ["sha256:`+sha256Hex(fullToken)+`"]
    destinations: [alpha]
`), aggDest("alpha", "a1", "a2")))
	if err := cf.g.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	wantNames(t, "the open session's tools after the reload", aggTools(ctx, t, cs), "a1")
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a2", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Errorf("a2, denied by the reload, was called")
	}
	if r := h.do("POST", "/alpha/mcp", init, bearer(fullToken)...); r.status != http.StatusOK {
		t.Errorf("the client added by the reload: %s", r)
	}
}
