package gateway

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// TestAuditOutput: where audit.path sends the audit log: off (none),
// stderr, a file, and by default a file in the state directory, which
// falls back to stderr with a warning when it cannot be created.
func TestAuditOutput(t *testing.T) {
	state := t.TempDir()
	t.Setenv("STATE_DIRECTORY", "")
	t.Setenv("XDG_STATE_HOME", state)
	var logged bytes.Buffer
	g := &Gateway{log: slog.New(slog.NewTextHandler(&logged, nil))}
	defer func() {
		for _, c := range g.closers {
			c.Close()
		}
	}()
	out := func(path string) any {
		t.Helper()
		w, err := g.auditOutput(&config.Config{Audit: config.Audit{Path: path}}, nil)
		if err != nil {
			t.Fatalf("%q: %v", path, err)
		}
		if f, ok := w.(*os.File); ok && f != os.Stderr {
			return f.Name()
		}
		return w
	}
	if w := out(config.AuditOff); w != nil || g.auditDest != "off" {
		t.Errorf("off: %v %q", w, g.auditDest)
	}
	if w := out(config.AuditStderr); w != os.Stderr || g.auditDest != "stderr" {
		t.Errorf("stderr: %v %q", w, g.auditDest)
	}
	file := filepath.Join(t.TempDir(), "logs", "a.jsonl")
	if w := out(file); w != file || g.auditDest != file {
		t.Errorf("a file: %v %q", w, g.auditDest)
	}
	def := filepath.Join(state, "switchboard", "audit.jsonl")
	if w := out(""); w != def || g.auditDest != def {
		t.Errorf("default: %v %q; want %s", w, g.auditDest, def)
	}
	if logged.Len() != 0 {
		t.Errorf("logged %s", logged.String())
	}
	// A state directory that cannot be made: stderr, and why.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", blocker)
	if w := out(""); w != os.Stderr || g.auditDest != "stderr" || !strings.Contains(logged.String(), "cannot create the default file") {
		t.Errorf("unwritable default: %v %q, log %s", w, g.auditDest, logged.String())
	}
	// A configured file that cannot be made is an error.
	if _, err := g.auditOutput(&config.Config{Audit: config.Audit{Path: filepath.Join(blocker, "a.jsonl")}}, nil); err == nil {
		t.Error("an impossible audit.path was accepted")
	}
}
