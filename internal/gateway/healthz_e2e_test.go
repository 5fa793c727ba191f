package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
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

// `serve --stdio` starts only the servers its view can reach, and a reload
// does not start the others either.
func TestServeStdioStartsOnlyItsView(t *testing.T) {
	t.Parallel()
	tag := newTag(t)
	which := func(n string) map[string]string { return map[string]string{"SB_WHICH": tag + "/" + n} }
	yml := configYAML(t, tag, "namespaces:\n  ns:\n    servers: [a]\n",
		dest{name: "a", mode: "plain", env: which("a")}, dest{name: "b", mode: "plain", env: which("b")})
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	cfg, err := config.Parse([]byte(yml), path)
	if err != nil {
		t.Fatal(err)
	}
	logs := newLogStore()
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(&logHandler{store: logs}), AuditWriter: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- g.ServeStdio(context.Background(), "ns", inR, outW); outW.Close() }()
	defer func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		if err := <-served; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		waitGone(t, 5*time.Second, procsWithEnv(envServerTag+"="+tag)...)
	}()
	out := bufio.NewReader(outR)
	send := func(b []byte) wireMsg {
		t.Helper()
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m wireMsg
		if err := json.Unmarshal(line, &m); err != nil || m.Result == nil {
			t.Fatalf("answer %s: %v", line, err)
		}
		return m
	}
	send(rpc(1, "initialize", initParams("")))
	if _, err := inW.Write(append(rpc(nil, "notifications/initialized", nil), '\n')); err != nil {
		t.Fatal(err)
	}
	if out := parseTool(t, send(rpc(2, "tools/call", toolParams("a__echo", map[string]any{"text": "hi"}, nil)))); out.Text != "hi" {
		t.Fatalf("echo: %q", out.Text)
	}
	if n := len(procsWithEnv("SB_WHICH=" + tag + "/a")); n == 0 {
		t.Fatal("the view's server is not running")
	}
	g.Reload(cfg)
	send(rpc(3, "tools/list", nil))
	if p := procsWithEnv("SB_WHICH=" + tag + "/b"); len(p) != 0 {
		t.Fatalf("a server outside the view was started: pids %v", p)
	}
}
