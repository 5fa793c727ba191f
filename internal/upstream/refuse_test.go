package upstream

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// TestServerRequestRefusalMessages: a server→client request that cannot be
// attributed is refused with a message naming the actual reason: nothing in
// flight, several sessions in flight, or a stateless caller.
func TestServerRequestRefusalMessages(t *testing.T) {
	const caps = `{"sampling":{},"roots":{}}`
	tests := []struct {
		name     string
		members  int
		left     bool  // the members leave before the request
		calls    []int // members with a call in flight
		stateles bool  // one stateless call in flight instead
		want     string
		notWant  string
	}{
		{name: "every session left", members: 1, left: true, want: "no session has a call in flight to receive this request", notWant: "several"},
		{name: "two sessions, nothing in flight", members: 2, want: "no session has a call in flight to receive this request; a shared server can send roots/list only while handling a client's call", notWant: "several"},
		{name: "two sessions with calls", members: 2, calls: []int{0, 1}, want: "cannot tell which client session roots/list belongs to (several sessions have calls in flight)", notWant: "no session"},
		{name: "stateless call in flight", members: 1, stateles: true, want: "the call in flight is a stateless request, which cannot receive roots/list", notWant: "several"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Options{Shared: true})
				var ms []*Member
				for range tt.members {
					m, _ := h.join(caps)
					ms = append(ms, m)
				}
				for i, mi := range tt.calls {
					h.call(ms[mi], string(jsonrpc.IntID(int64(i+1))), "tools/call", "")
				}
				if tt.stateles {
					if _, err := h.u.CallStateless(h.ctx, req(`"s"`, "tools/call", "")); err != nil {
						t.Fatalf("CallStateless: %v", err)
					}
				}
				if tt.left {
					for _, m := range ms {
						m.Leave()
					}
				}
				conn := h.srv.conn(t)
				conn.sendRaw(`{"jsonrpc":"2.0","id":"srv-1","method":"roots/list"}`)
				responses := conn.sent("")
				if len(responses) != 1 || string(responses[0].ID) != `"srv-1"` {
					t.Fatalf("server got %v, want one error response for srv-1", responses)
				}
				e := responses[0].ErrorOf()
				if e == nil || e.Code != mcp.CodeRequestRefused {
					t.Fatalf("response %s, want a %d refusal", responses[0], mcp.CodeRequestRefused)
				}
				if !strings.Contains(e.Message, tt.want) || strings.Contains(e.Message, tt.notWant) {
					t.Errorf("refusal %q, want it to contain %q and not %q", e.Message, tt.want, tt.notWant)
				}
			})
		})
	}
}
