package gateway_test

// End-to-end tests of the aws block of type agentcore destinations: the
// go-sdk client through the gateway to the AgentCore emulator, every
// invocation's SigV4 signature checked by peertest.VerifySigV4Scope, the
// role assumed through the STS emulator.

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
)

// startAgentCoreAWS starts an emulator accepting the keys in creds for
// bedrock-agentcore in us-east-1, and a gateway with one agentcore
// destination "runtime" whose aws block is awsYAML (unindented; "" for
// none).
func startAgentCoreAWS(t *testing.T, mode, awsYAML string, creds map[string]peertest.Credentials) (*peertest.AgentCore, *harness) {
	t.Helper()
	emu := peertest.NewAgentCore(t, peertest.AgentCoreOptions{Stateless: mode == agentcore.ModeRequest,
		Verify: peertest.VerifySigV4Scope("bedrock-agentcore", "us-east-1", creds)})
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
	yml := "  runtime:\n    type: agentcore\n    arn: " + gatewayTestARN + "\n    session_mode: " + mode + "\n"
	if awsYAML != "" {
		yml += "    aws: " + awsYAML + "\n"
	}
	return emu, startAgg(t, "", yml)
}

// invocationKeys returns the access key of each invocation the emulator
// accepted, and how many it refused.
func invocationKeys(emu *peertest.AgentCore) (keys []string, refused int) {
	for _, c := range emu.Calls() {
		if c.Status != 0 {
			refused++
			continue
		}
		r := &http.Request{Header: c.Header}
		keys = append(keys, scopeOf(r).keyID)
	}
	return keys, refused
}

// TestAgentCoreDestinationAssumeRole: with aws.assume_role_arn every
// invocation is signed with the role's temporary key (asked of the STS
// emulator once, signed with the base key, with the configured session
// name), while the identity mode's runtime session is the hash of the
// base credentials' identity, the same for two client sessions.
func TestAgentCoreDestinationAssumeRole(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "")
	creds := awsTestCreds()
	sts := peertest.NewSTS(t, creds)
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	const role = "arn:aws:iam::123456789012:role/agentcore-invoker"
	emu, h := startAgentCoreAWS(t, agentcore.ModeIdentity, "{assume_role_arn: "+role+", role_session_name: gw-e2e}", creds)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		cs := remoteFronts[0].connect(ctx, t, h, "runtime", newLogClient().Client)
		if got := agentCoreCall(ctx, t, cs, "echo", map[string]any{"text": "role"}); got != "agentcore echo: role" {
			t.Errorf("client %d: echo = %q", i, got)
		}
		_ = cs.Close()
	}
	keys, refused := invocationKeys(emu)
	if refused != 0 || len(keys) < 6 {
		t.Errorf("the emulator accepted %d invocations and refused %d, want at least 6 and none", len(keys), refused)
	}
	for _, k := range keys {
		if _, _, arn := sts.Identity(k); arn != "arn:aws:sts::123456789012:assumed-role/agentcore-invoker/gw-e2e" {
			t.Errorf("an invocation was signed with %s (%s), want the role's temporary key", k, arn)
		}
	}
	if n := sts.Count("AssumeRole"); n != 1 {
		t.Errorf("%d AssumeRole calls, want 1: the destination keeps its signer", n)
	}
	for _, c := range sts.Calls() {
		if c.Status != http.StatusOK || c.AccessKeyID != awsTestKeyID ||
			c.Action == "AssumeRole" && (c.RoleARN != role || c.RoleSessionName != "gw-e2e") {
			t.Errorf("STS call %+v, want AssumeRole of %s as gw-e2e or GetCallerIdentity, signed with the base key", c, role)
		}
	}
	want := agentcore.IdentitySessionID(sts.Identity(awsTestKeyID))
	if ids := emu.Sessions(); len(ids) != 1 || ids[0] != want {
		t.Errorf("runtime sessions %q, want [%s]: the base identity's, for both clients", ids, want)
	}
}

// TestAgentCoreDestinationProfile: aws.profile's key (from the shared
// credentials file) signs, not the environment's; the region is the
// ARN's.
func TestAgentCoreDestinationProfile(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "eu-west-1") // the ARN's region wins
	const keyID, secret = "AKIDPROFILEDOCS00001", "cHJvZmlsZS1kb2NzLXNlY3JldC0wMDAwMDAwMDAwMDE"
	if err := os.WriteFile(os.Getenv("AWS_SHARED_CREDENTIALS_FILE"),
		[]byte("[docs]\naws_access_key_id = "+keyID+"\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emu, h := startAgentCoreAWS(t, agentcore.ModeSession, "{profile: docs}", map[string]peertest.Credentials{keyID: {Secret: secret}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newLogClient()
	cs := remoteFronts[1].connect(ctx, t, h, "runtime", c.Client)
	if got := agentCoreCall(ctx, t, cs, "echo", map[string]any{"text": "profile"}); got != "agentcore echo: profile" {
		t.Errorf("echo = %q", got)
	}
	keys, refused := invocationKeys(emu)
	if refused != 0 || len(keys) < 3 {
		t.Errorf("the emulator accepted %d invocations and refused %d, want at least 3 and none", len(keys), refused)
	}
	for _, k := range keys {
		if k != keyID {
			t.Errorf("an invocation was signed with %s, want the profile's %s", k, keyID)
		}
	}
}
