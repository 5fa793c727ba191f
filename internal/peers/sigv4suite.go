package peers

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
// ../shared/testdata/aws-signing-test-suite/v4 beside the repository root.
// The test is skipped, saying where to put it, when it is absent.
func SigV4Suite(t testing.TB) (dir string, cases []string) {
	t.Helper()
	dir = os.Getenv("SWITCHBOARD_SIGV4_SUITE")
	if dir == "" {
		wd, _ := os.Getwd()
		for d := wd; filepath.Dir(d) != d; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(d, "..", "shared", "testdata", "aws-signing-test-suite", "v4")
				break
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if dir == "" || err != nil {
		t.Skipf("the AWS SigV4 test suite is not here (%s): set SWITCHBOARD_SIGV4_SUITE to aws-c-auth's tests/aws-signing-test-suite/v4", dir)
	}
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, e.Name())
		}
	}
	return dir, cases
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
