package upstream

import (
	"strings"
	"testing"
)

// A remote's error text is cut before the gateway redacts it: the cut
// falls between words, so a secret it would split is dropped whole (before,
// its prefix was left in the client's error and the log).
func TestOneLineNeverSplitsAWord(t *testing.T) {
	const secret = "sk-remote-ECHOED-TOKEN-0123456789"
	msg := "invalid bearer token: " + strings.Repeat("x", 170) + " " + secret + " was rejected"
	got := OneLine(msg)
	if strings.Contains(got, secret[:3]) || len(got) > 200+len("…") || !strings.HasSuffix(got, "…") {
		t.Fatalf("OneLine = %q (%d bytes): want it cut before the secret, marked", got, len(got))
	}
	if short := OneLine("  first line\nsecond"); short != "first line" {
		t.Fatalf("OneLine of a short text = %q", short)
	}
}
