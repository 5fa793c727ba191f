package destination

import (
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// envServerMode runs this test binary as peertest's stdio test server
// (legacy era; the tools echo, wait, release and ask are the pool's).
const envServerMode = peertest.StdioServerEnv

func TestMain(m *testing.M) {
	peertest.StdioServerMain()
	os.Exit(m.Run())
}
