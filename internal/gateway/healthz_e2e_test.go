package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// /healthz answers GET and HEAD; anything else gets 405 with Allow.
func TestHealthzMethods(t *testing.T) {
	t.Parallel()
	h := start(t, "", dest{name: "d", mode: "plain"})
	if r := h.do("HEAD", "/healthz", nil); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("HEAD /healthz: %s", r)
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		r := h.do(m, "/healthz", []byte("{}"))
		if r.status != http.StatusMethodNotAllowed {
			t.Fatalf("%s /healthz: %s, want 405", m, r)
		}
		allow := strings.Split(strings.ReplaceAll(r.header.Get("Allow"), " ", ""), ",")
		if !slices.Contains(allow, "GET") || !slices.Contains(allow, "HEAD") {
			t.Fatalf("%s /healthz: Allow %q, want GET and HEAD", m, r.header.Get("Allow"))
		}
	}
}

// A remote destination whose host refuses connections is "unreachable" and
// makes the gateway "degraded"; one that accepts is "ready".
func TestHealthzUnreachableRemote(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	up, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel's backlog) and is never read
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	extra := fmt.Sprintf(`  down_http:
    type: streamable_http
    url: http://%[1]s/mcp
  down_sse:
    type: sse
    url: http://%[1]s/sse
  up_http:
    type: streamable_http
    url: http://%[2]s/mcp
`, refused, up.Addr())
	h := startAgg(t, "", extra)
	status, ds := h.healthz()
	if status != "degraded" {
		t.Errorf("status %q, want degraded", status)
	}
	want := map[string]string{"down_http": "unreachable", "down_sse": "unreachable", "up_http": "ready"}
	for _, d := range ds {
		if d.State != want[d.Name] {
			t.Errorf("%s: state %q (%s), want %q", d.Name, d.State, d.Error, want[d.Name])
		}
		if d.State == "unreachable" && !strings.Contains(d.Error, refused) {
			t.Errorf("%s: error %q does not name the host", d.Name, d.Error)
		}
	}
}

// Sessions through an aggregated endpoint count for the destination, and
// their per-session processes show as children.
func TestHealthzCountsAggregatedChildren(t *testing.T) {
	t.Parallel()
	h := startAgg(t, "", "namespaces:\n  ns:\n    servers: [d]\n",
		dest{name: "d", mode: "plain", isolation: "session"}, dest{name: "s", mode: "plain"})
	a, r := h.initAt("/mcp/ns")
	if a == nil {
		t.Fatalf("initialize /mcp/ns: %s", r)
	}
	b, r := h.initAt("/mcp")
	if b == nil {
		t.Fatalf("initialize /mcp: %s", r)
	}
	h.initialize("d", "")
	_, ds := h.healthz()
	got := map[string]healthzDest{}
	for _, d := range ds {
		got[d.Name] = d
	}
	if d := got["d"]; d.Sessions != 1 || d.Members != 3 || d.Children != 3 {
		t.Errorf("d: sessions %d members %d children %d, want 1, 3, 3", d.Sessions, d.Members, d.Children)
	}
	if s := got["s"]; s.Sessions != 0 || s.Members != 1 || s.Children != 0 {
		t.Errorf("s (shared, in /mcp only): sessions %d members %d children %d, want 0, 1, 0", s.Sessions, s.Members, s.Children)
	}
}
