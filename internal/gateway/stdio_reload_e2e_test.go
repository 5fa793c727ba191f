package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// TestAggregateStdioFrontReload: `serve --stdio` watches its config too. A
// destination added to the file shows in the stdio client's tools after a
// tools/list_changed, with no restart.
func TestAggregateStdioFrontReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	dir := t.TempDir()
	sb := filepath.Join(dir, "switchboard")
	if out, err := exec.Command("go", "build", "-o", sb, "github.com/switchboard-mcp/switchboard/cmd/switchboard").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tag := newTag(t)
	top := "log: {file: " + filepath.Join(dir, "switchboard.log") + "}\naudit: {path: " + filepath.Join(dir, "audit.log") + "}\n"
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	write := func(dests ...dest) {
		t.Helper()
		// Write a new file and rename it into place, as editors do.
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(configYAML(t, tag, top, dests...)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	write(aggDest("alpha", "echo"))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(sb, "serve", "--config", cfgPath, "--stdio", "--reload-interval", "50ms")
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	rc := peertest.NewRecordingClient("stdio-reload")
	cs, err := rc.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		t.Fatalf("connect to switchboard --stdio: %v\nstderr:\n%s", err, stderr.String())
	}
	defer cs.Close()
	if names := interopToolNames(ctx, t, cs); !slices.Contains(names, "alpha__echo") || slices.Contains(names, "beta__echo") {
		t.Fatalf("tools before the reload = %v", names)
	}

	write(aggDest("alpha", "echo"), aggDest("beta", "echo"))
	select {
	case <-rc.ListChanged():
	case <-ctx.Done():
		t.Fatalf("no tools/list_changed after adding a destination\nstderr:\n%s", stderr.String())
	}
	if names := interopToolNames(ctx, t, cs); !slices.Contains(names, "alpha__echo") || !slices.Contains(names, "beta__echo") {
		t.Fatalf("tools after the reload = %v", names)
	}
	if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"x": 1}}); got != `beta:echo:{"x":1}` {
		t.Errorf("beta__echo = %q", got)
	}
}
