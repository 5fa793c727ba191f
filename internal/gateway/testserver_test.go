package gateway_test

// The stdio test server of these tests is peertest's (StdioServerMain):
// SWITCHBOARD_TEST_SERVER=<mode> re-executes this test binary as it.

import (
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
)

const (
	envServerMode = peertest.StdioServerEnv
	envServerTag  = "SWITCHBOARD_TEST_TAG" // marks a test's processes (procsWithEnv)
	envDieFile    = peertest.StdioServerDieEnv
)

// wireMsg is a JSON-RPC message as the test server and the tests see it.
type (
	wireMsg   = peertest.WireMsg
	wireError = peertest.WireError
)

func TestMain(m *testing.M) {
	sandbox.WorkerMain() // code mode's workers are this binary
	peertest.StdioServerMain()
	// A gateway built without an AuditWriter writes its audit log to the
	// default file in the state directory: a temporary one, not the home
	// directory's.
	state, err := os.MkdirTemp("", "switchboard-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", state)
	os.Unsetenv("STATE_DIRECTORY")
	code := m.Run()
	_ = os.RemoveAll(state)
	os.Exit(code)
}
