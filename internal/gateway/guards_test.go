package gateway_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/guard/gate"
)

// TestGuardsOffNoGate: without guards a destination is served as it is
// (nothing added on the request path); a destination with guards is
// served through its gate, and one whose settings turn everything off is
// not; a hook limited to some destinations gates only those.
func TestGuardsOffNoGate(t *testing.T) {
	for _, c := range []struct {
		guards string
		want   map[string]bool // destination -> gated
	}{
		{"", map[string]bool{"a": false, "b": false}},
		{"guards: {destinations: {a: {pinning: monitor}}}", map[string]bool{"a": true, "b": false}},
		{"guards: {defaults: {detectors: [pii]}, destinations: {b: {detectors: []}}}", map[string]bool{"a": true, "b": false}},
		{"guards: {hook: {url: 'http://127.0.0.1:1/check', fail: open, destinations: [b]}}", map[string]bool{"a": false, "b": true}},
	} {
		yml := c.guards + `
destinations:
  a: {type: stdio, command: [/bin/true]}
  b: {type: stdio, command: [/bin/true]}
`
		cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range g.ViewServers("") {
			switch s := s.(type) {
			case *gate.Gate:
				if !c.want[s.Name()] {
					t.Errorf("%q: %s is gated", c.guards, s.Name())
				}
			case *destination.Destination:
				if c.want[s.Name()] {
					t.Errorf("%q: %s is not gated", c.guards, s.Name())
				}
			default:
				t.Errorf("%q: a view's server is a %T", c.guards, s)
			}
		}
	}
}

// TestGateHookToken: the hook's bearer token comes from token_env or the
// first line of token_file; a variable unset or a file missing is an
// error (logged), and the hook is still used, without a token.
func TestGateHookToken(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_HOOK_TOKEN", "from-env")
	file := filepath.Join(t.TempDir(), "hook.token")
	if err := os.WriteFile(file, []byte(" from-file \nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		hc      config.GuardHook
		want    string
		wantErr bool
	}{
		{config.GuardHook{TokenEnv: "SWITCHBOARD_TEST_HOOK_TOKEN"}, "from-env", false},
		{config.GuardHook{TokenFile: file}, "from-file", false},
		{config.GuardHook{TokenEnv: "SWITCHBOARD_TEST_HOOK_UNSET"}, "", true},
		{config.GuardHook{TokenFile: file + ".missing"}, "", true},
		{config.GuardHook{Directions: []string{"result"}, Fail: "closed"}, "", false},
	} {
		h, err := gateway.GateHook(&c.hc)
		if h == nil || h.Token != c.want || (err != nil) != c.wantErr {
			t.Errorf("%+v: token %q, err %v; want %q (error %v)", c.hc, h.Token, err, c.want, c.wantErr)
		}
		if c.hc.Fail == "closed" && (!h.FailClosed || h.Arguments || !h.Result) {
			t.Errorf("%+v: %+v", c.hc, h)
		}
	}
}
