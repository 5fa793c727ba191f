package router

import (
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/sandbox"
)

// TestMain makes the test binary a code-mode worker when a Runner starts
// it as one (see sandbox.WorkerMain).
func TestMain(m *testing.M) {
	sandbox.WorkerMain()
	os.Exit(m.Run())
}
