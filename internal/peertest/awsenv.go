package peertest

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// AWSEnvKeyID is the access key id of every AWSEnv's base credentials.
const AWSEnvKeyID = "AKIDSWITCHBOARDTEST1"

// AWSEnv is a test's isolated AWS configuration: static long-term keys in
// the environment, empty shared config and credentials files, no profile,
// region or IMDS, and STS served by an emulator (AWS_ENDPOINT_URL_STS).
type AWSEnv struct {
	KeyID, Secret string                 // the base credentials, as set in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
	Creds         map[string]Credentials // every key the verifiers accept: the base key and those STS issues
	STS           *STS
	Dir           string // holds the config and credentials files (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE)
}

// NewAWSEnv isolates the test's AWS configuration (t.Setenv, so the test
// cannot be parallel) and starts its STS emulator.
func NewAWSEnv(t testing.TB) *AWSEnv {
	t.Helper()
	e := &AWSEnv{KeyID: AWSEnvKeyID, Secret: "dGVzdC1zZWNyZXQtbm90LWEtcmVhbC1vbmUtMDEyMzQ1", Dir: t.TempDir()}
	for _, f := range []string{"config", "credentials"} {
		if err := os.WriteFile(filepath.Join(e.Dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.Creds = map[string]Credentials{e.KeyID: {Secret: e.Secret}}
	e.STS = NewSTS(t, e.Creds)
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":                        filepath.Join(e.Dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE":            filepath.Join(e.Dir, "credentials"),
		"AWS_ACCESS_KEY_ID":                      e.KeyID,
		"AWS_SECRET_ACCESS_KEY":                  e.Secret,
		"AWS_SESSION_TOKEN":                      "",
		"AWS_PROFILE":                            "",
		"AWS_DEFAULT_PROFILE":                    "",
		"AWS_REGION":                             "",
		"AWS_DEFAULT_REGION":                     "",
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_ENDPOINT_URL":                       "",
		"AWS_ENDPOINT_URL_STS":                   e.STS.URL,
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_ROLE_ARN":                           "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
	} {
		t.Setenv(k, v)
	}
	return e
}

// Verify returns a SigV4 verifier of the environment's keys (the base key
// and every key its STS issued) for service in region ("" accepts any).
func (e *AWSEnv) Verify(service, region string) func(r *http.Request, body []byte) error {
	return VerifySigV4Scope(service, region, e.Creds)
}

// Identity is what sts:GetCallerIdentity answers for the base key.
func (e *AWSEnv) Identity() (account, userID, arn string) { return e.STS.Identity(e.KeyID) }
