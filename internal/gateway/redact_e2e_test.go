package gateway_test

import (
	"log/slog"
	"strings"
	"testing"
)

// A secret across the 256-byte clip of a server's invalid line is redacted
// whole in the operational log: before, the line was cut first and the
// secret's prefix was logged (issue 8, item 6). Not parallel: t.Setenv.
func TestInvalidServerLineRedactedBeforeClip(t *testing.T) {
	const secret = "sk-e2e-STRADDLES-256-abcdef0123"
	t.Setenv("SB_TEST_SECRET", secret)
	h := start(t, "", dest{name: "d",
		// '{', 250 zeros, the secret (bytes 251-282), a quote: not JSON.
		command: []string{"sh", "-c", `printf '{%0250d%s"\n' 0 "$API_KEY"; exec cat`},
		env:     map[string]string{"API_KEY": "${SB_TEST_SECRET}"}})
	rec := h.logs.wait(t, slog.LevelWarn, "invalid message from server skipped", "00000")
	if !strings.Contains(rec.Attrs, "[REDA") { // the marker may be cut itself
		t.Errorf("the logged line is not redacted: %s", rec.Attrs)
	}
	for _, r := range h.logs.all() {
		if strings.Contains(r.Msg+r.Attrs, secret[:4]) {
			t.Errorf("a prefix of the secret was logged: %s %s", r.Msg, r.Attrs)
		}
	}
}
