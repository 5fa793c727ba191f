package gateway_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// healthzDest is one destination of /healthz.
type healthzDest struct {
	Name, Type, State, Error string
	Sessions, Members        int
	Children                 int
	NextRetry                string `json:"next_retry"`
}

func (h *harness) healthz() (status string, dests []healthzDest) {
	h.t.Helper()
	r := h.do("GET", "/healthz", nil)
	var out struct {
		Status       string
		Destinations []healthzDest
	}
	if r.status != 200 || json.Unmarshal(r.body, &out) != nil {
		h.t.Fatalf("healthz: %s", r)
	}
	return out.Status, out.Destinations
}

// A destination whose restarts are spent is started again by the first
// request after the cool-down (restart.retry_after), which /healthz shows;
// a server that works again by then is served again.
func TestFailedDestinationRecovers(t *testing.T) {
	t.Parallel()
	die := filepath.Join(t.TempDir(), "die")
	if err := os.WriteFile(die, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const retryAfter = 2 * time.Second
	h := start(t, "restart: {delays: [10ms], max_attempts: 2, retry_after: 2s, retry_max: 4s}\n",
		dest{name: "d", mode: "plain", env: map[string]string{envDieFile: die}})
	h.logs.wait(t, slog.LevelError, "upstream failed; restarts exhausted", "retry_in=2s")
	status, ds := h.healthz()
	if status != "degraded" || ds[0].State != "failed" {
		t.Fatalf("healthz after the restarts: %s %+v", status, ds)
	}
	next, err := time.Parse(time.RFC3339Nano, ds[0].NextRetry)
	if err != nil {
		t.Fatalf("healthz next_retry %q: %v", ds[0].NextRetry, err)
	}
	if d := time.Until(next); d > retryAfter || d < -retryAfter {
		t.Fatalf("next_retry %v away, want about %v", d, retryAfter)
	}
	// The server works again (as a flaky one does after a while).
	if err := os.Remove(die); err != nil {
		t.Fatal(err)
	}
	if time.Until(next) > 500*time.Millisecond {
		// Within the cool-down: refused at once, without a start.
		expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
	}
	// After it: the next session starts it and is served.
	time.Sleep(time.Until(next)) // the cool-down is the behaviour under test
	s, err := h.tryInitialize("d", "")
	if err != nil {
		t.Fatalf("initialize after the cool-down: %v", err)
	}
	s.tool("echo", map[string]any{"text": "back"})
	if status, ds := h.healthz(); status != "ok" || ds[0].State != "ready" || ds[0].NextRetry != "" {
		t.Fatalf("healthz once recovered: %s %+v", status, ds)
	}
}

// A reload (SIGHUP) retries a failed destination at once, long before its
// cool-down ends, even when its config did not change.
func TestFailedDestinationRetriedOnReload(t *testing.T) {
	t.Parallel()
	die := filepath.Join(t.TempDir(), "die")
	if err := os.WriteFile(die, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tag := newTag(t)
	yml := configYAML(t, tag, "restart: {delays: [10ms], max_attempts: 1, retry_after: 1h}\n",
		dest{name: "d", mode: "plain", env: map[string]string{envDieFile: die}})
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	cfg, err := config.Parse([]byte(yml), path)
	if err != nil {
		t.Fatal(err)
	}
	h, g := serveConfig(t, tag, cfg, gateway.Options{}, nil)
	h.logs.wait(t, slog.LevelError, "upstream failed; restarts exhausted", "retry_in=1h")
	expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
	if err := os.Remove(die); err != nil {
		t.Fatal(err)
	}
	cfg2, err := config.Parse([]byte(yml), path)
	if err != nil {
		t.Fatal(err)
	}
	g.Reload(cfg2)
	h.logs.wait(t, slog.LevelInfo, "config reloaded: retrying a failed destination", "destination=d")
	s, err := h.tryInitialize("d", "")
	if err != nil {
		t.Fatalf("initialize after the reload: %v", err)
	}
	s.tool("echo", map[string]any{"text": "back"})
}
