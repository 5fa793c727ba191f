package upstream

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// TestURLElicitationFallback: a server's (or an OAuth destination's)
// URLElicitationRequired answer reaches a 2025-11-25 client that declared
// elicitation.url as it is, and any other client (no url capability, an
// older version) as the -32005 fallback naming the URL.
func TestURLElicitationFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{})
		h.srv.auto["initialize"] = false
		h.srv.onWrite = func(c *fakeConn, m *jsonrpc.Message) {
			switch m.Method {
			case "initialize":
				c.send(jsonrpc.NewResult(m.ID, []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)))
			case "tools/call":
				c.send(jsonrpc.NewError(m.ID, mcp.URLElicitationRequired("e-1", "https://as.example.com/authorize", "Authorize")))
			}
		}
		for _, tc := range []struct {
			version, caps string
			want          int
		}{
			{"2025-11-25", `{"elicitation":{"url":{}}}`, mcp.CodeURLElicitationRequired},
			{"2025-11-25", `{"elicitation":{}}`, mcp.CodeOpenURL},
			{"2025-06-18", `{"elicitation":{"url":{}}}`, mcp.CodeOpenURL},
		} {
			m, _, err := h.u.Join(h.ctx, &fakeDown{}, initMsg(`0`, tc.version, tc.caps))
			if err != nil {
				t.Fatal(err)
			}
			c := h.call(m, `7`, "tools/call", `{"name":"x"}`)
			synctest.Wait()
			got := next(t, c)
			if code := errCode(t, got); code != tc.want {
				t.Errorf("%s %s: code %d, want %d", tc.version, tc.caps, code, tc.want)
			}
			if e := got.ErrorOf(); tc.want == mcp.CodeOpenURL && (e == nil || !strings.Contains(e.Message, "https://as.example.com/authorize")) {
				t.Errorf("%s %s: the fallback does not name the URL: %v", tc.version, tc.caps, e)
			}
			if string(got.ID) != `7` {
				t.Errorf("id %s, want the client's 7", got.ID)
			}
		}
	})
}
