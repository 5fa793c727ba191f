package gateway

// Shared helpers of the end-to-end tests in this package (conformance_e2e_test.go,
// interop_e2e_test.go): a real Switchboard built from a YAML config, served on 127.0.0.1:0 in
// this process, and stopped (with every process it started) at the end of the test.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// harnessGateway is a running Switchboard under test.
type harnessGateway struct {
	// URL is the gateway's base URL, "http://127.0.0.1:PORT" (no trailing slash).
	URL string

	t    testing.TB
	logs *harnessBuffer // the operational log, JSON lines at info level
	stop func()         // idempotent
}

// startHarnessGateway parses yamlText (config.Parse, file name "test.yaml"), builds the gateway and
// serves it on a fresh 127.0.0.1 port until Stop or the end of the test. Its operational log is
// kept in memory and logged only if the test fails; the audit log is discarded.
func startHarnessGateway(t testing.TB, yamlText string) *harnessGateway {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, yamlText)
	}
	logs := &harnessBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	g, err := New(cfg, Options{Logger: logger, AuditWriter: io.Discard})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()

	h := &harnessGateway{URL: "http://" + ln.Addr().String(), t: t, logs: logs}
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("gateway.Serve returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("gateway.Serve did not return within 30 s of its context being cancelled")
				return
			}
			// Serve returns after a full shutdown: every process it started must be gone.
			for _, pid := range h.pids() {
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("upstream process %d still exists after the gateway stopped (kill(pid, 0) = %v)", pid, err)
				}
			}
		})
	}
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("switchboard log (%s):\n%s", h.URL, logs.String())
		}
	})
	return h
}

// Stop shuts the gateway down, waits for Serve to return, and checks that every upstream process
// it started has exited. It also runs at test cleanup.
func (h *harnessGateway) Stop() { h.stop() }

// pids returns the process ids of the upstream processes the gateway has started so far (from its
// "process started" log records).
func (h *harnessGateway) pids() []int {
	var out []int
	sc := bufio.NewScanner(bytes.NewReader([]byte(h.logs.String())))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var rec struct {
			Msg string          `json:"msg"`
			Pid json.RawMessage `json:"pid"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Msg != "process started" {
			continue
		}
		if pid, err := strconv.Atoi(string(rec.Pid)); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// harnessStdioYAML is a config with one stdio destination named dest running argv. extra is
// appended to the destination's block (each line indented by four spaces), e.g.
// "isolation: session".
func harnessStdioYAML(dest string, argv []string, maxSessions int, extra ...string) string {
	var b bytes.Buffer
	b.WriteString("listen: 127.0.0.1:0\n")
	b.WriteString("max_sessions: " + strconv.Itoa(maxSessions) + "\n")
	b.WriteString("destinations:\n")
	b.WriteString("  " + dest + ":\n")
	b.WriteString("    type: stdio\n")
	b.WriteString("    command: [")
	for i, a := range argv {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(a)) // a Go-quoted path is a valid YAML double-quoted scalar
	}
	b.WriteString("]\n")
	for _, e := range extra {
		b.WriteString("    " + e + "\n")
	}
	return b.String()
}

// harnessBuffer is a goroutine-safe bytes.Buffer.
type harnessBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *harnessBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *harnessBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
