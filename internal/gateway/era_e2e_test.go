package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peers"
)

// Protocol-era translation (package era) against the conformance suites: a
// client of one era through Switchboard in front of a server of the other.

// eraSuite is one conformance run and what it must show.
type eraSuite struct {
	name, version string
	extra         []string
	wantPassed    int
	exact         bool // else: >= wantPassed and only tasks-* (extension) scenarios may fail
}

func runEraSuite(t *testing.T, h *harness, path string, s eraSuite) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	began := time.Now()
	passed, failed, out, err := peers.RunConformance(ctx, t, s.version, h.url(path), s.extra...)
	t.Logf("conformance %s %s: %d passed / %d failed in %v", s.version, strings.Join(s.extra, " "), passed, failed, time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("RunConformance: %v\n%s", err, out)
	}
	bad, badSum := conformanceFailures(out)
	if s.exact {
		if passed != s.wantPassed || failed != 0 {
			t.Errorf("got %d passed, %d failed; want exactly %d passed, 0 failed (failing scenarios: %v)", passed, failed, s.wantPassed, bad)
		}
	} else {
		if passed < s.wantPassed {
			t.Errorf("got %d passed, want >= %d", passed, s.wantPassed)
		}
		if badSum != failed {
			t.Errorf("the failing scenario lines add up to %d failures, the Total line says %d", badSum, failed)
		}
		for _, name := range bad {
			if !strings.HasPrefix(name, "tasks-") {
				t.Errorf("scenario %s failed; only tasks-* (extension) scenarios may fail", name)
			}
		}
	}
	if t.Failed() {
		t.Logf("conformance output:\n%s", out)
	}
}

// TestEraModernClientLegacyServer: the 2026-07-28 suite through Switchboard
// in front of the everything-server pinned to the legacy era (protocol:
// legacy: Switchboard only ever sends it initialize and legacy requests, so
// its sampling, elicitation and roots come as server→client requests, which
// Switchboard turns into input_required results).
func TestEraModernClientLegacyServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real conformance suite; skipped with -short")
	}
	bin := peers.EverythingServer(t)
	peers.Conformance(t, peers.ConformanceNext)
	h := start(t, "max_sessions: 500\n", dest{name: "everything", command: []string{bin}, extra: "protocol: legacy"})
	// The figure straight against the stateless everything-server is 165
	// (164 when server-stateless skips its timing check); every required
	// scenario, input-required-result-* included, must pass.
	runEraSuite(t, h, "/everything/mcp", eraSuite{"0.2.0-alpha.12/2026-07-28", peers.ConformanceNext, []string{"--requirements", "2026-07-28"}, 164, false})
	stopNoStragglers(t, h)
}
