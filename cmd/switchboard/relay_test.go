package main

// In-process tests of `switchboard relay` flag handling: usage errors,
// --header with ${VAR} (sent upstream, never logged), --transport.

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestRelayUsageErrors(t *testing.T) {
	t.Setenv("SWITCHBOARD_RELAY_UNSET_TEST", "")
	os.Unsetenv("SWITCHBOARD_RELAY_UNSET_TEST")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no url", nil, 2, "--url is required"},
		{"bad flag", []string{"--nope"}, 2, "flag provided but not defined"},
		{"bad header", []string{"--url", "http://127.0.0.1:9/mcp", "--header", "no colon"}, 2, "want 'Name: value'"},
		{"unset variable", []string{"--url", "http://127.0.0.1:9/mcp", "--header", "Authorization: Bearer ${SWITCHBOARD_RELAY_UNSET_TEST}"}, 2, "${SWITCHBOARD_RELAY_UNSET_TEST} is not set"},
		{"bad transport", []string{"--url", "http://127.0.0.1:9/mcp", "--transport", "carrier-pigeon"}, 1, "--transport must be auto, http or sse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runRelay(tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q: usage errors belong on stderr", stdout.String())
			}
		})
	}
}

// TestRelayHeaderFromEnv: --header values expand ${VAR} from the
// environment, reach the upstream on every request, and never appear in the
// --log file, even at --debug.
func TestRelayHeaderFromEnv(t *testing.T) {
	t.Setenv("SWITCHBOARD_RELAY_TEST_TOKEN", "tok-9f8e7d6c")
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Literal"))
		mu.Unlock()
		http.Error(w, "nope", http.StatusForbidden)
	}))
	defer srv.Close()
	logFile := filepath.Join(t.TempDir(), "relay.log")
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	var stdout, stderr bytes.Buffer
	code := runRelay([]string{"--url", srv.URL + "/mcp", "--transport", "http", "--debug", "--log", logFile,
		"--header", "Authorization: Bearer ${SWITCHBOARD_RELAY_TEST_TOKEN}", "--header", "X-Literal: $${not-a-var}"},
		in, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	mu.Lock()
	got := append([]string(nil), auths...)
	mu.Unlock()
	if len(got) != 1 || got[0] != "Bearer tok-9f8e7d6c|${not-a-var}" {
		t.Errorf("upstream saw Authorization|X-Literal %q, want one request with the expanded token and the literal ${", got)
	}
	if !strings.Contains(stdout.String(), "403") {
		t.Errorf("stdout %q: want the initialize error naming the 403", stdout.String())
	}
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) == 0 {
		t.Error("--log --debug wrote nothing")
	}
	for name, b := range map[string][]byte{"stdout": stdout.Bytes(), "stderr": stderr.Bytes(), "log": logs} {
		if bytes.Contains(b, []byte("tok-9f8e7d6c")) {
			t.Errorf("the header's secret value appears in %s:\n%s", name, b)
		}
	}
}
