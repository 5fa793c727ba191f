package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// updateGolden rewrites the golden files (the command's TestMain owns the
// flags, so an environment variable says it).
var updateGolden = os.Getenv("UPDATE_GOLDEN") != ""

// TestCheckExplainAccess: `check --explain-access` prints, per client, what
// it can reach, and check warns where a grant reads wider or narrower than
// it is (golden: testdata/access.golden; UPDATE_GOLDEN=1 go test -run
// TestCheckExplainAccess ./cmd/switchboard/ rewrites it).
func TestCheckExplainAccess(t *testing.T) {
	p := filepath.Join("testdata", "access.yaml")
	code, out, errOut := runCmd("check", "--explain-access", "--config", p)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	got := strings.ReplaceAll(out+"--- stderr\n"+errOut, p, "access.yaml")
	golden := filepath.Join("testdata", "access.golden")
	if updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("check --explain-access differs from %s (UPDATE_GOLDEN=1 rewrites it):\n--- got\n%s--- want\n%s", golden, got, want)
	}
	// Without the flag: the warnings, not the explanation.
	_, out, errOut = runCmd("check", "--config", p)
	if strings.Contains(out, "client alice") || !strings.Contains(errOut, "warning: client alice") {
		t.Errorf("check without --explain-access: stdout %q, stderr %q", out, errOut)
	}
}
