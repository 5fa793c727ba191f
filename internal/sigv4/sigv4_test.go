package sigv4_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/sigv4"
)

const (
	testKey    = "AKIDSWITCHBOARDTEST"
	testSecret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXg="
)

// awsEnv isolates the AWS configuration: static keys in the environment,
// empty config and credentials files, no profile, no IMDS, and STS at sts
// (when not nil). It returns the credential map the verifiers use.
func awsEnv(t *testing.T, sts bool) (map[string]peertest.Credentials, *peertest.STS) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config", "credentials"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_ACCESS_KEY_ID": testKey, "AWS_SECRET_ACCESS_KEY": testSecret, "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_STS": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
	} {
		t.Setenv(k, v)
	}
	creds := map[string]peertest.Credentials{testKey: {Secret: testSecret}}
	var s *peertest.STS
	if sts {
		s = peertest.NewSTS(t, creds)
		t.Setenv("AWS_ENDPOINT_URL_STS", s.URL)
	}
	return creds, s
}

func TestInfer(t *testing.T) {
	for _, tc := range []struct{ host, service, region string }{
		{"bedrock-agentcore.us-east-1.amazonaws.com", "bedrock-agentcore", "us-east-1"},
		{"gw-123.gateway.bedrock-agentcore.eu-central-1.amazonaws.com", "bedrock-agentcore", "eu-central-1"},
		{"BEDROCK-AGENTCORE.ap-southeast-2.amazonaws.com:443", "bedrock-agentcore", "ap-southeast-2"},
		{"billing-mcp.us-east-1.api.aws", "billing-mcp", "us-east-1"},
		{"aws-mcp.us-gov-west-1.api.aws", "aws-mcp", "us-gov-west-1"},
		{"lambda.us-west-2.amazonaws.com", "lambda", ""},
		{"mcp.example.com", "mcp", ""},
		{"127.0.0.1", "127", ""},
		{"localhost:8080", "localhost", ""},
		{"api.aws", "api", ""},
		{"svc.notaregion.api.aws", "svc", ""},
	} {
		if got := sigv4.InferService(tc.host); got != tc.service {
			t.Errorf("InferService(%q) = %q, want %q", tc.host, got, tc.service)
		}
		if got := sigv4.InferRegion(tc.host); got != tc.region {
			t.Errorf("InferRegion(%q) = %q, want %q", tc.host, got, tc.region)
		}
	}
}

func TestNewRegion(t *testing.T) {
	awsEnv(t, false)
	ctx := context.Background()
	s, err := sigv4.New(ctx, "https://billing-mcp.us-east-1.api.aws/mcp", sigv4.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Service() != "billing-mcp" || s.Region() != "us-east-1" {
		t.Errorf("inferred %s/%s, want billing-mcp/us-east-1", s.Service(), s.Region())
	}
	s, err = sigv4.New(ctx, "https://billing-mcp.us-east-1.api.aws/mcp", sigv4.Options{Service: "x", Region: "eu-west-3"})
	if err != nil || s.Service() != "x" || s.Region() != "eu-west-3" {
		t.Errorf("explicit service and region: %v %v", s, err)
	}
	if _, err := sigv4.New(ctx, "https://mcp.example.com/mcp", sigv4.Options{}); err == nil || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("no region anywhere: err = %v, want a no-region error", err)
	}
	t.Setenv("AWS_REGION", "sa-east-1")
	s, err = sigv4.New(ctx, "https://mcp.example.com/mcp", sigv4.Options{})
	if err != nil || s.Region() != "sa-east-1" || s.Service() != "mcp" {
		t.Errorf("AWS_REGION: %v %v", s, err)
	}
	if _, err := sigv4.New(ctx, "https://mcp.example.com/mcp", sigv4.Options{Profile: "nope"}); err == nil {
		t.Error("a missing profile was accepted")
	}
}

// upstream is a SigV4-checking server that records what it received and
// can answer the next requests with an AWS error.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []*http.Request
	bodies []string
	errs   []string // queued error answers: "status|header|content-type|body"
	// expireKey, when set, answers every request signed with that key
	// ExpiredTokenException: the key has expired.
	expireKey string
	verify    func(*http.Request, []byte) error
}

func newUpstream(t *testing.T, verify func(*http.Request, []byte) error) *upstream {
	u := &upstream{verify: verify}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, r)
		u.bodies = append(u.bodies, string(body))
		var e string
		if len(u.errs) > 0 {
			e, u.errs = u.errs[0], u.errs[1:]
		} else if u.expireKey != "" && strings.Contains(r.Header.Get("Authorization"), "Credential="+u.expireKey+"/") {
			e = "403|ExpiredTokenException|application/json|{}"
		}
		u.mu.Unlock()
		if e != "" {
			p := strings.SplitN(e, "|", 4)
			if p[1] != "" {
				w.Header().Set("X-Amzn-Errortype", p[1])
			}
			w.Header().Set("Content-Type", p[2])
			var status int
			fmt.Sscan(p[0], &status)
			w.WriteHeader(status)
			io.WriteString(w, p[3])
			return
		}
		if err := u.verify(r, body); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok:"+string(body))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) queue(e ...string) {
	u.mu.Lock()
	u.errs = append(u.errs, e...)
	u.mu.Unlock()
}

func (u *upstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

const arnPath = "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-west-2%3A123456789012%3Aruntime%2Fecho-AbC/invocations"

func TestTransportSigns(t *testing.T) {
	creds, _ := awsEnv(t, false)
	up := newUpstream(t, peertest.VerifySigV4Scope("bedrock-agentcore", "us-west-2", creds))
	s, err := sigv4.New(context.Background(), up.URL, sigv4.Options{Service: "bedrock-agentcore", Region: "us-west-2"})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: s.Transport(nil)}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", arnPath + "?qualifier=DEFAULT", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"POST", "/mcp?b=2&a=1&a=0&sp=a%20b", "x"},
		{"POST", "/empty", ""},
		{"GET", "/mcp", ""},
		{"DELETE", arnPath, ""},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		req, _ := http.NewRequest(tc.method, up.URL+tc.path, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Session-Id", "abc")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != "ok:"+tc.body {
			t.Errorf("%s %s: %d %q", tc.method, tc.path, resp.StatusCode, got)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	first := up.seen[0]
	if first.RequestURI != arnPath+"?qualifier=DEFAULT" {
		t.Errorf("sent %q, want the ARN path as encoded", first.RequestURI)
	}
	for _, r := range up.seen {
		if r.Header.Get("X-Amz-Content-Sha256") != "" {
			t.Errorf("%s %s carries X-Amz-Content-Sha256 (only S3 wants it)", r.Method, r.URL)
		}
		if r.Header.Get("X-Amz-Security-Token") != "" {
			t.Errorf("a session token on long-term keys")
		}
	}
}

// TestTransportSessionToken: temporary keys from the environment carry
// their token, and the verifier insists on it.
func TestTransportSessionToken(t *testing.T) {
	creds, _ := awsEnv(t, false)
	t.Setenv("AWS_ACCESS_KEY_ID", "ASIATEMP")
	t.Setenv("AWS_SESSION_TOKEN", "tok/en+==")
	creds["ASIATEMP"] = peertest.Credentials{Secret: testSecret, SessionToken: "tok/en+=="}
	up := newUpstream(t, peertest.VerifySigV4(creds))
	s, err := sigv4.New(context.Background(), up.URL, sigv4.Options{Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: s.Transport(nil)}).Post(up.URL+"/x", "text/plain", strings.NewReader("b"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if s.Service() != "127" {
		t.Errorf("service inferred from 127.0.0.1 = %q", s.Service())
	}
}

// TestVerifierRejects: the peer verifier is not a rubber stamp.
func TestVerifierRejects(t *testing.T) {
	creds, _ := awsEnv(t, false)
	up := newUpstream(t, peertest.VerifySigV4Scope("svc", "us-east-1", creds))
	sign := func(opts sigv4.Options, key string) int {
		t.Setenv("AWS_ACCESS_KEY_ID", key)
		s, err := sigv4.New(context.Background(), up.URL, opts)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: s.Transport(nil)}).Post(up.URL+"/p", "text/plain", strings.NewReader("b"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := sign(sigv4.Options{Service: "svc", Region: "us-east-1"}, testKey); got != 200 {
		t.Errorf("good signature: %d", got)
	}
	if got := sign(sigv4.Options{Service: "other", Region: "us-east-1"}, testKey); got != 403 {
		t.Errorf("wrong service: %d, want 403", got)
	}
	if got := sign(sigv4.Options{Service: "svc", Region: "us-east-2"}, testKey); got != 403 {
		t.Errorf("wrong region: %d, want 403", got)
	}
	if got := sign(sigv4.Options{Service: "svc", Region: "us-east-1"}, "AKIDUNKNOWN"); got != 403 {
		t.Errorf("unknown key: %d, want 403", got)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	if got := sign(sigv4.Options{Service: "svc", Region: "us-east-1"}, testKey); got != 403 {
		t.Errorf("wrong secret: %d, want 403", got)
	}
}

// TestRetryOnce: each refresh code, in each place AWS puts it, makes the
// transport re-sign and re-send exactly once with the same body; other
// errors and a second expiry come back as they are.
func TestRetryOnce(t *testing.T) {
	creds, _ := awsEnv(t, false)
	up := newUpstream(t, peertest.VerifySigV4(creds))
	var logs peertest.Buffer
	s, err := sigv4.New(context.Background(), up.URL, sigv4.Options{Region: "us-east-1",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: s.Transport(nil)}
	post := func() (int, string) {
		resp, err := c.Post(up.URL+"/p", "application/json", strings.NewReader(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, e := range []string{
		"403|ExpiredTokenException:http://internal.amazon.com/coral/com.amazon.coral.service/|application/json|{}",
		"403||application/x-amz-json-1.1|{\"__type\":\"com.amazon.coral.service#ExpiredTokenException\",\"message\":\"x\"}",
		"403||application/json|{\"code\":\"UnrecognizedClientException\"}",
		"403||text/xml|<ErrorResponse><Error><Type>Sender</Type><Code>ExpiredToken</Code></Error></ErrorResponse>",
		"403||application/xml|<Error><Code>InvalidClientTokenId</Code></Error>",
		"400|RequestExpired||",
	} {
		up.queue(e)
		before := up.requests()
		status, body := post()
		if status != 200 || body != `ok:{"a":1}` || up.requests()-before != 2 {
			t.Errorf("after %q: %d %q, %d requests; want 200 after exactly one retry", e, status, body, up.requests()-before)
		}
	}
	for _, e := range []string{
		"403|AccessDeniedException|application/json|{\"message\":\"no\"}",
		"403||application/json|{\"__type\":\"AccessDeniedException\"}",
		"500|ExpiredTokenException|application/json|{}",
		"404||text/plain|ExpiredToken",
	} {
		up.queue(e)
		before := up.requests()
		status, body := post()
		if status == 200 || up.requests()-before != 1 {
			t.Errorf("after %q: %d %q, %d requests; want the error, no retry", e, status, body, up.requests()-before)
		}
	}
	// Expired twice: one retry, then the second answer as it is (its
	// body intact).
	exp := "403|ExpiredTokenException|application/json|{\"message\":\"still expired\"}"
	up.queue(exp, exp)
	before := up.requests()
	status, body := post()
	if status != 403 || body != `{"message":"still expired"}` || up.requests()-before != 2 {
		t.Errorf("expired twice: %d %q after %d requests; want the second 403 after 2", status, body, up.requests()-before)
	}
	// The refreshes were logged (debug), without secrets or signatures.
	text := logs.String()
	if n := strings.Count(text, "refreshing"); n != 7 {
		t.Errorf("%d refresh notes logged, want 7:\n%s", n, text)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, r := range up.seen {
		_, sig, _ := strings.Cut(r.Header.Get("Authorization"), "Signature=")
		if sig == "" || strings.Contains(text, sig) {
			t.Errorf("signature %q missing or logged", sig)
		}
	}
	if strings.Contains(text, testSecret) || strings.Contains(text, "Authorization") {
		t.Errorf("the log holds a secret or the Authorization header:\n%s", text)
	}
}

// TestAssumeRoleRefresh: an assumed role's credentials come from STS,
// refresh themselves on an expiry answer (one more AssumeRole, even when
// many requests see the expiry at once), and Identity reports the base
// credentials, not the role.
func TestAssumeRoleRefresh(t *testing.T) {
	creds, sts := awsEnv(t, true)
	up := newUpstream(t, peertest.VerifySigV4Scope("svc", "us-west-2", creds))
	role := "arn:aws:iam::123456789012:role/mcp-reader"
	s, err := sigv4.New(context.Background(), up.URL, sigv4.Options{Service: "svc", Region: "us-west-2", AssumeRoleARN: role, RoleSessionName: "sess"})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: s.Transport(nil)}
	post := func() int {
		resp, err := c.Post(up.URL+"/p", "text/plain", strings.NewReader("b"))
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(); got != 200 {
		t.Fatalf("status %d", got)
	}
	up.mu.Lock()
	auth := up.seen[0].Header.Get("Authorization")
	up.mu.Unlock()
	key, _, _ := strings.Cut(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 Credential="), "/")
	if !strings.HasPrefix(key, "ASIATEST") {
		t.Errorf("signed with %q, want the role's temporary key", auth)
	}
	if n := sts.Count("AssumeRole"); n != 1 {
		t.Errorf("AssumeRole called %d times, want 1", n)
	}
	// The role's key expires: eight requests in flight are all told so,
	// and one refresh serves them all.
	up.mu.Lock()
	up.expireKey = key
	up.mu.Unlock()
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 8 {
		wg.Go(func() {
			if post() == 200 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 8 {
		t.Errorf("%d of 8 succeeded after the expiry", ok.Load())
	}
	if n := sts.Count("AssumeRole"); n != 2 {
		t.Errorf("AssumeRole called %d times, want 2 (one refresh)", n)
	}
	for _, call := range sts.Calls() {
		if call.Action == "AssumeRole" && (call.RoleARN != role || call.RoleSessionName != "sess" || call.AccessKeyID != testKey) {
			t.Errorf("AssumeRole call %+v", call)
		}
	}
	account, userID, arn, err := s.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wa, wu, warn := sts.Identity(testKey)
	if account != wa || userID != wu || arn != warn {
		t.Errorf("Identity = %s %s %s, want the base key's %s %s %s", account, userID, arn, wa, wu, warn)
	}
}

// TestSSOHint: an SSO profile whose token is missing or expired fails with
// the `aws sso login --profile X` hint, both on a request and in Identity.
func TestSSOHint(t *testing.T) {
	awsEnv(t, false)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := "[profile dev-sso]\nsso_start_url = https://example.awsapps.com/start\nsso_region = us-east-1\nsso_account_id = 123456789012\nsso_role_name = Dev\nregion = eu-west-1\n"
	if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, func(*http.Request, []byte) error { return errors.New("must not be reached") })
	s, err := sigv4.New(context.Background(), up.URL, sigv4.Options{Profile: "dev-sso"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Region() != "eu-west-1" {
		t.Errorf("region from the profile = %q", s.Region())
	}
	_, err = (&http.Client{Transport: s.Transport(nil)}).Post(up.URL+"/p", "text/plain", strings.NewReader("b"))
	if err == nil || !strings.Contains(err.Error(), "aws sso login --profile dev-sso") {
		t.Errorf("request: err = %v, want the sso login hint", err)
	}
	if _, _, _, err := s.Identity(context.Background()); err == nil || !strings.Contains(err.Error(), "aws sso login --profile dev-sso") {
		t.Errorf("Identity: err = %v, want the sso login hint", err)
	}
	if up.requests() != 0 {
		t.Errorf("%d requests reached the upstream unsigned", up.requests())
	}
}
