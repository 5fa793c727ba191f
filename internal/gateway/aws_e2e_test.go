package gateway_test

// End-to-end tests of the aws block on HTTP destinations: go-sdk servers
// (Streamable HTTP and legacy HTTP+SSE) on 127.0.0.1 behind a middleware
// that checks every request's SigV4 signature with peertest.VerifySigV4 (an
// implementation independent of package sigv4) and refuses the rest with
// 403, reached by the go-sdk client through the gateway. The AWS
// environment of each test is its own (t.Setenv, temporary config and
// credentials files), so nothing of the machine's leaks in; the tests are
// therefore not parallel.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// The base credentials the tests put in the environment.
const (
	awsTestKeyID  = "AKIDSWITCHBOARDTEST1"
	awsTestSecret = "c3dpdGNoYm9hcmQtdGVzdC1zZWNyZXQta2V5LTAwMQ"
)

// awsTestCreds returns a fresh credential map holding the base key.
func awsTestCreds() map[string]peertest.Credentials {
	return map[string]peertest.Credentials{awsTestKeyID: {Secret: awsTestSecret}}
}

// awsEnv gives the AWS SDK the static credentials keyID/secret and region
// from the environment, and nothing else of this machine's: empty config
// and credentials files, no profile, no IMDS, no endpoint overrides.
func awsEnv(t *testing.T, keyID, secret, region string) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"config", "credentials"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_ACCESS_KEY_ID", keyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_REGION", region)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_DEFAULT_REGION",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", "AWS_ROLE_ARN",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
}

// sigScope is what an accepted request was signed as, read from its
// Authorization header.
type sigScope struct {
	keyID, region, service string
	token                  bool // it carried X-Amz-Security-Token
	method                 string
}

// iamUpstream is a feature server behind a SigV4 check.
type iamUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	signed  []sigScope // guarded by mu: every request accepted
	refused []string   // guarded by mu: why each refused request was
	expire  int        // guarded by mu: well-signed requests still to answer ExpiredTokenException
	expired []sigScope // guarded by mu: those answered so
}

// expireNext answers the next n well-signed requests 403
// ExpiredTokenException, as AWS does once temporary credentials expire.
func (u *iamUpstream) expireNext(n int) {
	u.mu.Lock()
	u.expire = n
	u.mu.Unlock()
}

func (u *iamUpstream) expiredAnswers() []sigScope {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.expired)
}

// startIAMUpstream serves peertest.NewFeatureServer(name) over typ
// ("streamable_http" or "sse") on 127.0.0.1; every request must pass
// verify, else it gets 403 InvalidSignatureException as AWS answers.
func startIAMUpstream(t *testing.T, typ, name string, verify func(*http.Request, []byte) error) *iamUpstream {
	t.Helper()
	srv := peertest.NewFeatureServer(name).Server
	var h http.Handler
	if typ == "sse" {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	} else {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	u := &iamUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := verify(r, body); err != nil {
			u.mu.Lock()
			u.refused = append(u.refused, err.Error())
			u.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
			w.WriteHeader(http.StatusForbidden)
			b, _ := json.Marshal(map[string]string{"message": "signature check failed: " + err.Error()})
			_, _ = w.Write(b)
			return
		}
		u.mu.Lock()
		if u.expire > 0 {
			u.expire--
			u.expired = append(u.expired, scopeOf(r))
			u.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Errortype", "ExpiredTokenException")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"The security token included in the request is expired"}`))
			return
		}
		u.signed = append(u.signed, scopeOf(r))
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// scopeOf reads the credential scope of a request's Authorization header:
// "AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/aws4_request, …".
func scopeOf(r *http.Request) sigScope {
	s := sigScope{method: r.Method, token: r.Header.Get("X-Amz-Security-Token") != ""}
	auth := r.Header.Get("Authorization")
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return s
	}
	cred, _, _ = strings.Cut(cred, ",")
	if f := strings.Split(cred, "/"); len(f) == 5 {
		s.keyID, s.region, s.service = f[0], f[2], f[3]
	}
	return s
}

func (u *iamUpstream) counts() (signed []sigScope, refused []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.signed), slices.Clone(u.refused)
}

// awsTestURL is the upstream's MCP endpoint for typ, reached at host.
func (u *iamUpstream) endpoint(typ, host string) string {
	base := u.URL
	if host != "" {
		base = strings.Replace(base, "127.0.0.1", host, 1)
	}
	if typ == "sse" {
		return base + "/sse"
	}
	return base + "/mcp"
}

// echoAndProgress calls echo and progress (3 steps) through cs and checks
// the answers and the progress notifications.
func echoAndProgress(ctx context.Context, t *testing.T, c *peertest.RecordingClient, cs *mcp.ClientSession, name, tag string) {
	t.Helper()
	if got, want := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": tag}}), name+" echo: "+tag; got != want {
		t.Errorf("echo = %q, want %q", got, want)
	}
	token := "progress-" + tag
	p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
	p.SetProgressToken(token)
	if got := peertest.CallText(ctx, t, cs, p); got != "3 steps done" {
		t.Errorf("progress = %q", got)
	}
	if got := c.WaitProgress(t, token, 3, waitFor); !slices.Equal(got, []float64{1, 2, 3}) {
		t.Errorf("progress notifications %v, want [1 2 3]", got)
	}
}

// checkSigned checks that u accepted some requests, refused none, and that
// each was signed as want (keyID, region, service; token when a session
// token must be there).
func checkSigned(t *testing.T, u *iamUpstream, want sigScope) {
	t.Helper()
	signed, refused := u.counts()
	if len(refused) > 0 {
		t.Errorf("the upstream refused %d requests: %q", len(refused), refused)
	}
	if len(signed) < 3 { // initialize, notifications/initialized, a call at least
		t.Errorf("the upstream accepted %d signed requests, want at least 3", len(signed))
	}
	methods := map[string]int{}
	for _, s := range signed {
		methods[s.method]++
		if s.keyID != want.keyID || s.region != want.region || s.service != want.service || s.token != want.token {
			t.Errorf("a %s was signed as key %s, region %s, service %s, session token %v; want %s, %s, %s, %v",
				s.method, s.keyID, s.region, s.service, s.token, want.keyID, want.region, want.service, want.token)
		}
	}
	t.Logf("%d signed requests, by method: %v", len(signed), methods)
}

// checkNoAWSSecrets fails the test if the gateway's log (every level) or
// audit log holds one of secrets, a SigV4 signature or credential, or a
// session token of the STS emulator (they start "FwoGZXIvYXdzE").
func checkNoAWSSecrets(t *testing.T, h *harness, secrets ...string) {
	t.Helper()
	var b strings.Builder
	for _, r := range h.logs.all() {
		b.WriteString(r.Msg + " " + r.Attrs + "\n")
	}
	h.audit.mu.Lock()
	b.Write(h.audit.buf)
	h.audit.mu.Unlock()
	text := b.String()
	for _, s := range append(secrets, "Signature=", "Credential=", "FwoGZXIvYXdzE") {
		if strings.Contains(text, s) {
			t.Errorf("the gateway's logs hold %q", s)
		}
	}
}

// TestAWSSignedUpstream: streamable_http and sse destinations with an aws
// block reach an IAM-protected upstream through both fronts: tools/call
// and progress work, and every request the upstream saw was signed with
// the environment's key, for the configured service and region, or those
// inferred (the host's first label, AWS_REGION). The same upstream without
// an aws block refuses the client, which is told so.
func TestAWSSignedUpstream(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "us-west-2")
	creds := awsTestCreds()
	for _, typ := range []string{"streamable_http", "sse"} {
		t.Run(typ, func(t *testing.T) {
			conf := startIAMUpstream(t, typ, "conf", peertest.VerifySigV4Scope("billing-mcp", "eu-west-3", creds))
			inferred := startIAMUpstream(t, typ, "inferred", peertest.VerifySigV4Scope("localhost", "us-west-2", creds))
			bare := startIAMUpstream(t, typ, "bare", peertest.VerifySigV4(creds))
			h := startRemote(t, "",
				remoteDest{name: "conf", typ: typ, url: conf.endpoint(typ, ""), extra: "aws: {region: eu-west-3, service: billing-mcp}"},
				remoteDest{name: "inferred", typ: typ, url: inferred.endpoint(typ, "localhost"), extra: "aws: {}"},
				remoteDest{name: "bare", typ: typ, url: bare.endpoint(typ, "")})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, f := range remoteFronts {
				for _, name := range []string{"conf", "inferred"} {
					c := peertest.NewRecordingClient("aws-e2e")
					cs := f.connect(ctx, t, h, name, c.Client)
					echoAndProgress(ctx, t, c, cs, name, typ+"-"+f.name)
					_ = cs.Close()
				}
			}
			checkSigned(t, conf, sigScope{keyID: awsTestKeyID, region: "eu-west-3", service: "billing-mcp"})
			checkSigned(t, inferred, sigScope{keyID: awsTestKeyID, region: "us-west-2", service: "localhost"})
			checkNoAWSSecrets(t, h, awsTestSecret)

			r := h.do("POST", "/bare/mcp", rpc(1, "initialize", initParams("")))
			if r.status < 400 || len(r.msgs) != 1 || r.msgs[0].Error == nil || !strings.Contains(r.msgs[0].Error.Message, "403") {
				t.Errorf("initialize without aws: %s, want an error naming the upstream's 403", r)
			}
			if signed, refused := bare.counts(); len(signed) != 0 || len(refused) == 0 {
				t.Errorf("without aws the upstream accepted %d requests and refused %d, want 0 and some", len(signed), len(refused))
			}
		})
	}
}

// TestAWSWrongSecret: credentials that do not match make the client's
// initialize fail at once, not hang: the go-sdk client gets an error, and
// the JSON-RPC error of the answer names the upstream's 403 and the AWS
// error type and message. The upstream was asked once (a bad signature is
// not an expired token: no refresh and retry), and the secret is in no log.
func TestAWSWrongSecret(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, "not-"+awsTestSecret, "us-east-1")
	ups := map[string]*iamUpstream{}
	var dests []remoteDest
	for _, typ := range []string{"streamable_http", "sse"} {
		ups[typ] = startIAMUpstream(t, typ, "up", peertest.VerifySigV4(awsTestCreds()))
		dests = append(dests, remoteDest{name: "w-" + typ, typ: typ, url: ups[typ].endpoint(typ, ""), extra: "aws: {service: billing-mcp}"})
	}
	h := startRemote(t, "restart: {delays: [10ms], max_attempts: 2}\n", dests...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for typ, up := range ups {
		t.Run(typ, func(t *testing.T) {
			t0 := time.Now()
			r := h.do("POST", "/w-"+typ+"/mcp", rpc(1, "initialize", initParams("")))
			if r.status < 400 || len(r.msgs) != 1 || r.msgs[0].Error == nil {
				t.Fatalf("initialize: %s, want an HTTP error status with a JSON-RPC error", r)
			}
			msg := r.msgs[0].Error.Message
			t.Logf("HTTP %d: %s", r.status, msg)
			if !containsAll(msg, []string{"403", "InvalidSignatureException", "signature check failed"}) {
				t.Errorf("initialize error %q, want the upstream's 403 with its AWS error type and message", msg)
			}
			if signed, refused := up.counts(); len(signed) != 0 || len(refused) != 1 {
				t.Errorf("the upstream accepted %d and refused %d requests for one initialize, want 0 and 1", len(signed), len(refused))
			}
			_, err := mcp.NewClient(&mcp.Implementation{Name: "aws-e2e", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: h.url("/w-" + typ + "/mcp"), MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: remoteLegacy})
			if err == nil {
				t.Fatal("the go-sdk client connected with a wrong secret")
			}
			t.Logf("go-sdk connect: %v", err)
			if el := time.Since(t0); el > 5*time.Second {
				t.Errorf("the errors took %v", el)
			}
			if signed, _ := up.counts(); len(signed) != 0 {
				t.Errorf("the upstream accepted %d requests", len(signed))
			}
		})
	}
	checkNoAWSSecrets(t, h, awsTestSecret)
}

// TestAWSAssumeRole: with assume_role_arn the requests are signed with the
// role's temporary credentials (and session token) from sts:AssumeRole,
// asked of a local STS emulator (AWS_ENDPOINT_URL_STS) once per
// destination however many sessions it serves, with the configured role
// and session name (default "switchboard"), signed with the base
// credentials; the upstream never sees the base key.
func TestAWSAssumeRole(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "us-east-1")
	const role = "arn:aws:iam::123456789012:role/mcp-reader"
	creds := awsTestCreds()
	sts := peertest.NewSTS(t, creds) // adds the role's keys to creds as it issues them
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	verify := peertest.VerifySigV4Scope("billing-mcp", "us-east-1", creds)
	// The sse destination leaves role_session_name out: "switchboard".
	sessionName := map[string]string{"streamable_http": "sb-e2e", "sse": "switchboard"}
	for _, typ := range []string{"streamable_http", "sse"} {
		t.Run(typ, func(t *testing.T) {
			up := startIAMUpstream(t, typ, "up", verify)
			extra := "aws:\n  service: billing-mcp\n  assume_role_arn: " + role
			if typ == "streamable_http" {
				extra += "\n  role_session_name: sb-e2e"
			}
			h := startRemote(t, "", remoteDest{name: "r", typ: typ, url: up.endpoint(typ, ""), extra: extra})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range 2 { // two sessions, one signer
				c := peertest.NewRecordingClient("aws-e2e")
				cs := remoteFronts[0].connect(ctx, t, h, "r", c.Client)
				echoAndProgress(ctx, t, c, cs, "up", fmt.Sprintf("%s-%d", typ, i))
				_ = cs.Close()
			}
			signed, _ := up.counts()
			if len(signed) == 0 {
				t.Fatal("no signed request")
			}
			roleKey := signed[0].keyID
			if _, _, arn := sts.Identity(roleKey); arn != "arn:aws:sts::123456789012:assumed-role/mcp-reader/"+sessionName[typ] {
				t.Errorf("the upstream saw key %q (identity %s), want the role's temporary key", roleKey, arn)
			}
			checkSigned(t, up, sigScope{keyID: roleKey, region: "us-east-1", service: "billing-mcp", token: true})
			checkNoAWSSecrets(t, h, awsTestSecret)
		})
	}
	// One AssumeRole per destination: its signer is kept across sessions.
	if n := sts.Count("AssumeRole"); n != 2 {
		t.Errorf("%d AssumeRole calls, want 2 (one per destination)", n)
	}
	for _, c := range sts.Calls() {
		if c.Action != "AssumeRole" || c.Status != http.StatusOK || c.RoleARN != role || c.AccessKeyID != awsTestKeyID ||
			c.RoleSessionName != "sb-e2e" && c.RoleSessionName != "switchboard" {
			t.Errorf("STS call %+v, want AssumeRole of %s as sb-e2e or switchboard, signed with %s", c, role, awsTestKeyID)
		}
	}
}

// TestAWSReload: a reload that adds the aws block to a destination
// restarts it, and new sessions are signed; one that only changes the
// region signs with the new region.
func TestAWSReload(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "us-east-1")
	up := startIAMUpstream(t, "streamable_http", "up", peertest.VerifySigV4(awsTestCreds()))
	dest := func(extra string) string {
		return "destinations:\n" + remoteDest{name: "r", typ: "streamable_http", url: up.endpoint("streamable_http", ""), extra: extra}.yaml()
	}
	parse := func(yml string) *config.Config {
		cfg, err := config.Parse([]byte(yml), filepath.Join(t.TempDir(), "switchboard.yaml"))
		if err != nil {
			t.Fatalf("config:\n%s\n%v", yml, err)
		}
		return cfg
	}
	h, g := serveConfig(t, newTag(t), parse(dest("")), gateway.Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func() (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "aws-e2e", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: h.url("/r/mcp"), MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: remoteLegacy})
	}
	if r := h.do("POST", "/r/mcp", rpc(1, "initialize", initParams(""))); len(r.msgs) != 1 || r.msgs[0].Error == nil || !strings.Contains(r.msgs[0].Error.Message, "403") {
		t.Fatalf("initialize before the reload: %s, want an error naming the upstream's 403", r)
	}
	for i, region := range []string{"eu-central-1", "ap-south-1"} {
		g.Reload(parse(dest("aws: {service: billing-mcp, region: " + region + "}")))
		h.logs.waitCount(t, slog.LevelInfo, "config reloaded", i+1)
		cs, err := connect()
		if err != nil {
			t.Fatalf("connect after the reload to %s: %v", region, err)
		}
		if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": region}}); got != "up echo: "+region {
			t.Errorf("echo = %q", got)
		}
		_ = cs.Close()
		signed, _ := up.counts()
		n := 0
		for _, s := range signed {
			if s.region == region && s.keyID == awsTestKeyID && s.service == "billing-mcp" {
				n++
			}
		}
		if n < 3 {
			t.Errorf("after the reload to %s, %d requests were signed for it, want at least 3 (all: %+v)", region, n, signed)
		}
	}
}

// TestAWSSignerRetried: a signer that cannot be made (no region anywhere)
// fails the session's initialize at once with the reason (no restarts),
// and the next session tries again: once AWS_REGION is set, it is signed for that region.
func TestAWSSignerRetried(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "")
	up := startIAMUpstream(t, "streamable_http", "up", peertest.VerifySigV4Scope("billing-mcp", "ca-central-1", awsTestCreds()))
	h := startRemote(t, "", remoteDest{name: "r", typ: "streamable_http", url: up.endpoint("streamable_http", ""), extra: "aws: {service: billing-mcp}"})
	t0 := time.Now()
	r := h.do("POST", "/r/mcp", rpc(1, "initialize", initParams("")))
	if r.status < 400 || len(r.msgs) != 1 || r.msgs[0].Error == nil || !strings.Contains(r.msgs[0].Error.Message, "no AWS region") {
		t.Fatalf("initialize without a region: %s, want an error saying there is no AWS region", r)
	}
	// Not after the restart delays (500ms, 1s, 2s: 3.5s in all): trying
	// again cannot find a region either.
	if el := time.Since(t0); el > 3*time.Second {
		t.Errorf("the error took %v", el)
	}
	if signed, refused := up.counts(); len(signed)+len(refused) != 0 {
		t.Errorf("the upstream was asked %d times before the signer existed", len(signed)+len(refused))
	}
	t.Setenv("AWS_REGION", "ca-central-1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := peertest.NewRecordingClient("aws-e2e")
	cs := remoteFronts[0].connect(ctx, t, h, "r", c.Client)
	echoAndProgress(ctx, t, c, cs, "up", "retried")
	checkSigned(t, up, sigScope{keyID: awsTestKeyID, region: "ca-central-1", service: "billing-mcp"})
}

// TestAWSProfile: aws.profile picks a profile of the shared files, which
// wins over the keys in the environment: its key signs, in the region its
// config section names.
func TestAWSProfile(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "")
	const keyID, secret = "AKIDPROFILEBILLING01", "cHJvZmlsZS1iaWxsaW5nLXNlY3JldC0wMDAwMDAwMQ"
	if err := os.WriteFile(os.Getenv("AWS_SHARED_CREDENTIALS_FILE"),
		[]byte("[billing]\naws_access_key_id = "+keyID+"\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte("[profile billing]\nregion = sa-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := startIAMUpstream(t, "sse", "up", peertest.VerifySigV4Scope("billing-mcp", "sa-east-1",
		map[string]peertest.Credentials{keyID: {Secret: secret}}))
	h := startRemote(t, "", remoteDest{name: "r", typ: "sse", url: up.endpoint("sse", ""), extra: "aws: {service: billing-mcp, profile: billing}"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := peertest.NewRecordingClient("aws-e2e")
	cs := remoteFronts[1].connect(ctx, t, h, "r", c.Client)
	echoAndProgress(ctx, t, c, cs, "up", "profile")
	checkSigned(t, up, sigScope{keyID: keyID, region: "sa-east-1", service: "billing-mcp"})
}

// TestAWSExpiredToken: an ExpiredTokenException answer makes the signer
// drop the assumed role's credentials, assume the role again (once) and
// resend the same request with the new key: the client's call succeeds
// without noticing, for each destination type.
func TestAWSExpiredToken(t *testing.T) {
	skipRemoteShort(t)
	awsEnv(t, awsTestKeyID, awsTestSecret, "us-east-1")
	const role = "arn:aws:iam::123456789012:role/mcp-reader"
	creds := awsTestCreds()
	sts := peertest.NewSTS(t, creds)
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	for i, typ := range []string{"streamable_http", "sse"} {
		t.Run(typ, func(t *testing.T) {
			up := startIAMUpstream(t, typ, "up", peertest.VerifySigV4Scope("billing-mcp", "us-east-1", creds))
			h := startRemote(t, "", remoteDest{name: "r", typ: typ, url: up.endpoint(typ, ""),
				extra: "aws: {service: billing-mcp, assume_role_arn: \"" + role + "\"}"})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs := remoteFronts[0].connect(ctx, t, h, "r", peertest.NewRecordingClient("aws-e2e").Client)
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "before"}}); got != "up echo: before" {
				t.Errorf("echo = %q", got)
			}
			before, _ := up.counts()
			up.expireNext(1)
			if got := peertest.CallText(ctx, t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "after"}}); got != "up echo: after" {
				t.Errorf("echo after the expiry = %q", got)
			}
			expired := up.expiredAnswers()
			if len(expired) != 1 {
				t.Fatalf("%d requests answered ExpiredTokenException, want 1", len(expired))
			}
			if n := sts.Count("AssumeRole"); n != 2*(i+1) {
				t.Errorf("%d AssumeRole calls in all, want %d: one at the start and one refresh per destination", n, 2*(i+1))
			}
			signed, refused := up.counts()
			if len(refused) != 0 {
				t.Errorf("refused: %q", refused)
			}
			// The retry is the last request that is not the standalone
			// GET stream (opened on its own, it may arrive last, signed
			// with either key).
			oldKey, newKey := before[0].keyID, ""
			for _, s := range slices.Backward(signed) {
				if s.method != "GET" {
					newKey = s.keyID
					break
				}
			}
			if expired[0].keyID != oldKey || newKey == oldKey {
				t.Errorf("the expired request was signed with %s, the retry with %s; want the first role key %s, then a new one", expired[0].keyID, newKey, oldKey)
			}
			for _, s := range signed[len(before):] {
				// The standalone GET stream is opened on its own, after
				// the session starts: it may be signed before the refresh
				// and arrive after the first call. The calls may not.
				if s.method != "GET" && s.keyID != newKey {
					t.Errorf("a %s after the refresh was signed with %s, want %s", s.method, s.keyID, newKey)
				}
			}
		})
	}
}
