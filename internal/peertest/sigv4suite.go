package peertest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// SigV4Suite returns the directory of the official SigV4 test suite
// (awslabs/aws-c-auth tests/aws-signing-test-suite/v4) and its case names.
// It is not part of this repository: $SWITCHBOARD_SIGV4_SUITE, else
// shared/testdata/aws-signing-test-suite/v4 beside the repository root (as
// CI has it) or beside one of its parents (a git worktree's). When it is
// absent the test is skipped, saying where to put it, or fails under
// CI=true.
func SigV4Suite(t testing.TB) (dir string, cases []string) {
	t.Helper()
	dir = os.Getenv("SWITCHBOARD_SIGV4_SUITE")
	if dir == "" {
		dir = findSuite()
	}
	entries, err := os.ReadDir(dir)
	if dir == "" || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the AWS SigV4 test suite is not here (%s), and CI=true: it must be at ../shared/testdata/aws-signing-test-suite/v4 beside the clone", dir)
		}
		t.Skipf("the AWS SigV4 test suite is not here (%s): set SWITCHBOARD_SIGV4_SUITE to aws-c-auth's tests/aws-signing-test-suite/v4", dir)
	}
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, e.Name())
		}
	}
	return dir, cases
}

// findSuite is the suite beside the repository root or one of its parents,
// else where it is expected beside the root ("" outside the repository).
func findSuite() string {
	const suite = "shared/testdata/aws-signing-test-suite/v4"
	wd, _ := os.Getwd()
	root := wd
	for ; filepath.Dir(root) != root; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
	}
	if filepath.Dir(root) == root {
		return ""
	}
	for d := root; filepath.Dir(d) != d; d = filepath.Dir(d) {
		p := filepath.Join(filepath.Dir(d), filepath.FromSlash(suite))
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
	}
	return filepath.Join(filepath.Dir(root), filepath.FromSlash(suite))
}

// SigV4SuiteContext is a suite case's context.json: the credentials, scope,
// time and options the case is signed with.
type SigV4SuiteContext struct {
	Credentials struct {
		AccessKeyID     string `json:"access_key_id"`
		SecretAccessKey string `json:"secret_access_key"`
		Token           string `json:"token"`
	} `json:"credentials"`
	Normalize        bool      `json:"normalize"`
	Region           string    `json:"region"`
	Service          string    `json:"service"`
	SignBody         bool      `json:"sign_body"`
	Timestamp        time.Time `json:"timestamp"`
	OmitSessionToken bool      `json:"omit_session_token"`
}

// ReadSigV4SuiteContext reads the context.json of case name under dir.
func ReadSigV4SuiteContext(dir, name string) (SigV4SuiteContext, error) {
	var c SigV4SuiteContext
	b, err := os.ReadFile(filepath.Join(dir, name, "context.json"))
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	return c, err
}
