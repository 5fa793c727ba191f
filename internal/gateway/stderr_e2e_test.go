package gateway_test

import (
	"strings"
	"testing"
)

// A server that dies at start says why where users look: the client's
// error and /healthz carry its last stderr lines, not only "exit status 3".
func TestStartFailureShowsStderr(t *testing.T) {
	t.Parallel()
	h := start(t, "restart: {delays: [10ms], max_attempts: 1, retry_after: 1h}\n",
		dest{name: "d", command: []string{"sh", "-c", `echo starting >&2; echo "fatal: no API key set" >&2; exit 3`}})
	e := expectRPCError(t, h.do("POST", "/d/mcp", rpc(1, "initialize", initParams(""))), 503, -32000)
	for _, want := range []string{"fatal: no API key set", "exit status 3"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("initialize error %q, want it to contain %q", e.Message, want)
		}
	}
	_, ds := h.healthz()
	if len(ds) != 1 || !strings.Contains(ds[0].Error, "fatal: no API key set") {
		t.Errorf("healthz %+v, want the stderr line in the error", ds)
	}
}
