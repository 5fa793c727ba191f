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
// older version) as the -32008 fallback naming the URL.
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

// TestElicitationComplete: the members given a URL elicitation, and the
// client of a stateless call made for one that takes it, hear
// notifications/elicitation/complete once it is done; a member that
// left, or that got the fallback, does not; a second completion of the
// same id sends nothing.
func TestElicitationComplete(t *testing.T) {
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
		var downs []*fakeDown
		var members []*Member
		for _, caps := range []string{`{"elicitation":{"url":{}}}`, `{"elicitation":{"url":{}}}`, `{}`} {
			d := &fakeDown{}
			m, _, err := h.u.Join(h.ctx, d, initMsg(`0`, "2025-11-25", caps))
			if err != nil {
				t.Fatal(err)
			}
			h.call(m, `1`, "tools/call", `{"name":"x"}`)
			downs, members = append(downs, d), append(members, m)
		}
		// A stateless call made for a legacy client (package era).
		sd := &fakeDown{}
		sc, err := h.u.CallStateless(WithURLElicitation(h.ctx, sd), req(`2`, "tools/call", `{"name":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		downs = append(downs, sd)
		synctest.Wait()
		if code := errCode(t, next(t, sc)); code != mcp.CodeURLElicitationRequired {
			t.Errorf("the stateless call for a client that takes it got %d", code)
		}
		members[1].Leave()
		h.u.ElicitationComplete("e-1")
		h.u.ElicitationComplete("e-1")
		for i, want := range []int{1, 0, 0, 1} {
			var got []*jsonrpc.Message
			for _, m := range downs[i].take() {
				if m.Method == "notifications/elicitation/complete" {
					got = append(got, m)
				}
			}
			if len(got) != want {
				t.Errorf("member %d: %d completions, want %d", i, len(got), want)
			} else if want == 1 && str(got[0].Params, "elicitationId") != "e-1" {
				t.Errorf("member %d: %s", i, got[0].Params)
			}
		}
	})
}
