package main

import (
	"bytes"
	"strings"
	"testing"
)

// A --url the relay cannot use is refused at start (exit 2) with what to
// do about it; before, a URL without a scheme failed only when dialled.
func TestRelayURLValidatedAtStart(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"example.com/mcp", `--url "example.com/mcp" has no scheme: add http:// or https://`},
		{"localhost:8080/mcp", "add http:// or https://"},
		{"ftp://example.com/mcp", "the scheme must be http:// or https://, not ftp://"},
		{"https:///mcp", "has no host"},
		{"http://exa mple.com/", "invalid character"},
	} {
		var stdout, stderr bytes.Buffer
		code := runRelay([]string{"--url", tc.url}, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("--url %s: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.url, code, stderr.String(), stdout.String(), tc.want)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:9/mcp", "HTTPS://example.com/mcp"} {
		if err := checkRelayURL(ok); err != nil {
			t.Errorf("checkRelayURL(%q) = %v, want nil", ok, err)
		}
	}
}
