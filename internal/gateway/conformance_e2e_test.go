package gateway_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// The official conformance suite against Switchboard in front of the go-sdk everything-server
// over stdio. The figures are those the same suites show against everything-server directly
// (shared/docs/testing.md); a gateway that serves both eras must reach all three.

// conformanceScenarioRE matches a per-scenario summary line, e.g. "✗ tasks-lifecycle: 1 passed, 8 failed".
var conformanceScenarioRE = regexp.MustCompile(`(?m)^\S+ (\S+): (\d+) passed, (\d+) failed\s*$`)

// conformanceFailures returns the scenarios of a conformance run's summary with failures, and the sum
// of their failure counts.
func conformanceFailures(output string) (names []string, failures int) {
	for _, m := range conformanceScenarioRE.FindAllStringSubmatch(output, -1) {
		n, _ := strconv.Atoi(m[3])
		if n > 0 {
			names = append(names, m[1])
			failures += n
		}
	}
	return names, failures
}

func TestConformanceE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real conformance suite; skipped with -short")
	}
	bin := peertest.EverythingServer(t)
	peertest.Conformance(t, peertest.ConformanceStable) // skip (or fail under SWITCHBOARD_REQUIRE_PEERS=1) early
	peertest.Conformance(t, peertest.ConformanceNext)

	suites := []struct {
		name, version string
		extra         []string
		wantPassed    int
		exact         bool // else: >= wantPassed, and only tasks-* (extension) scenarios may fail
	}{
		{"0.1.16", peertest.ConformanceStable, nil, 40, true},
		{"0.2.0-alpha.12/2025-11-25", peertest.ConformanceNext, []string{"--requirements", "2025-11-25"}, 82, true},
		// 165 passed straight against everything-server; 164 is allowed
		// because server-stateless runs one check only when a timing allows
		// it (29 or 30 checks, never a failure), seen on a loaded CI machine.
		// Every scenario but the tasks-* extension must still fail nothing.
		{"0.2.0-alpha.12/2026-07-28", peertest.ConformanceNext, []string{"--requirements", "2026-07-28"}, 164, false},
	}
	for _, isolation := range []string{"shared", "session"} {
		t.Run("isolation="+isolation, func(t *testing.T) {
			t.Parallel()
			for _, s := range suites {
				t.Run(s.name, func(t *testing.T) {
					// A fresh gateway per suite run: protocol eras never mix in one process.
					// The suite opens many sessions and deletes few of them.
					h := start(t, "max_sessions: 500\n", dest{name: "everything", command: []string{bin}, isolation: isolation})
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					defer cancel()
					began := time.Now()
					passed, failed, out, err := peertest.RunConformance(ctx, t, s.version, h.url("/everything/mcp"), s.extra...)
					t.Logf("conformance %s %s, isolation %s: %d passed / %d failed in %v",
						s.version, strings.Join(s.extra, " "), isolation, passed, failed, time.Since(began).Round(time.Millisecond))
					if err != nil {
						t.Fatalf("RunConformance: %v\n%s", err, out)
					}
					bad, badSum := conformanceFailures(out)
					if s.exact {
						if passed != s.wantPassed || failed != 0 {
							t.Errorf("got %d passed, %d failed; want exactly %d passed, 0 failed (failing scenarios: %v)",
								passed, failed, s.wantPassed, bad)
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
						t.Logf("conformance output:\n%s", out) // only ever a failing run's output
					}
					stopNoStragglers(t, h)
				})
			}
		})
	}
}

// stopNoStragglers stops the gateway and checks that Serve returned only after every upstream
// process had exited: the suite leaves dozens of sessions (and, with isolation session, dozens of
// processes) open, all ended by the shutdown at once. (h.stop, which also runs at cleanup, gives
// processes a grace period after Serve returns; this check gives none.)
func stopNoStragglers(t *testing.T, h *harness) {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.served:
		left := h.procs()
		h.served <- err // for h.stop, which reports it
		if len(left) > 0 {
			t.Errorf("Serve returned while upstream processes %v were still running", left)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("Serve did not return within 30 s of shutdown")
	}
	h.stop()
}
