package sigv4

// Differential test against npm aws4, an independent SigV4 signer: the
// same generated requests (POSTs with JSON bodies, percent-encoded ARN
// paths, queries, session tokens, AgentCore headers) signed by the Signer
// at a fixed time and by aws4 under Node must carry the same Authorization,
// which the verifier of package peertest (a third implementation) accepts.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// aws4Script signs each request of a JSON array read from stdin with aws4
// and prints the Authorization headers as a JSON array.
const aws4Script = `
const aws4 = require(process.argv[1]);
let input = '';
process.stdin.on('data', d => input += d);
process.stdin.on('end', () => {
  const out = JSON.parse(input).map(r => {
    const opts = {host: r.host, path: r.path, method: r.method, headers: r.headers, service: r.service, region: r.region};
    if (r.body !== '') opts.body = r.body;
    const creds = {accessKeyId: r.keyID, secretAccessKey: r.secret};
    if (r.token) creds.sessionToken = r.token;
    return aws4.sign(opts, creds).headers.Authorization;
  });
  process.stdout.write(JSON.stringify(out));
});
`

type aws4Request struct {
	Host    string            `json:"host"`
	Path    string            `json:"path"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Service string            `json:"service"`
	Region  string            `json:"region"`
	KeyID   string            `json:"keyID"`
	Secret  string            `json:"secret"`
	Token   string            `json:"token,omitempty"`
}

// genRequest makes the i-th request of the differential test.
func genRequest(rng *rand.Rand, i int) (method, rawURL, body, service, region string, hdr http.Header, creds aws.Credentials) {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	word := func() string {
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"
		n := 1 + rng.IntN(10)
		b := make([]byte, n)
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	// A piece of a path or query: unreserved text, percent-encoded
	// reserved and non-ASCII bytes, sub-delimiters left as they are.
	piece := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			switch rng.IntN(5) {
			case 0:
				b.WriteString(url.PathEscape(pick("a b", "ሴ", "é/ü", "x:y", "100%", "?#[]")))
			case 1:
				b.WriteString(pick(":", "@", "$", "!", "*", "'", "(", ")", ",", ";", "="))
			default:
				b.WriteString(word())
			}
		}
		return b.String()
	}
	region = pick("us-east-1", "us-west-2", "eu-central-1", "ap-southeast-2")
	account := fmt.Sprintf("%012d", rng.Int64N(1e12))
	arn := "arn:aws:bedrock-agentcore:" + region + ":" + account + ":runtime/" + word()
	var path string
	switch rng.IntN(3) {
	case 0:
		path = "/runtimes/" + strings.NewReplacer(":", "%3A", "/", "%2F").Replace(arn) + "/invocations"
	case 1:
		path = "/" + piece() + "/" + piece()
	default:
		path = pick("/mcp", "/", "/v1/mcp/")
	}
	var q []string
	for range rng.IntN(4) {
		q = append(q, url.QueryEscape(pick("qualifier", "a", "B", word()))+"="+url.QueryEscape(pick("", "DEFAULT", "x y", "ሴ", "a+b", "=", word())))
	}
	if strings.HasPrefix(path, "/runtimes/") && rng.IntN(2) == 0 {
		q = append(q, "qualifier="+pick("DEFAULT", "prod"))
	}
	rawURL = "https://" + pick("bedrock-agentcore."+region+".amazonaws.com", "billing-mcp."+region+".api.aws", "mcp.example.com:8443") + path
	if len(q) > 0 {
		rawURL += "?" + strings.Join(q, "&")
	}
	method = pick("POST", "POST", "POST", "GET", "DELETE", "PUT")
	if method == "POST" || method == "PUT" {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": pick("tools/call", "initialize", "ping"),
			"params": map[string]any{"text": pick("héllo wörld", "ሴ", "", "  spaced  ", strings.Repeat("x", rng.IntN(300))), "n": rng.IntN(1000)}})
		body = string(b)
	}
	hdr = http.Header{}
	if body != "" {
		hdr.Set("Content-Type", pick("application/json", "application/json; charset=utf-8"))
	}
	hdr.Set("Accept", "application/json, text/event-stream")
	if rng.IntN(2) == 0 {
		hdr.Set("Mcp-Session-Id", word())
		hdr.Set("Mcp-Protocol-Version", pick("2025-11-25", "2026-07-28"))
	}
	if strings.HasPrefix(path, "/runtimes/") {
		hdr.Set("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id", "session-"+strings.Repeat(word(), 4))
	}
	if rng.IntN(3) == 0 {
		hdr.Set("X-Custom", "  a   b  c ")
	}
	service = pick("bedrock-agentcore", "billing-mcp", "execute-api")
	creds = aws.Credentials{AccessKeyID: "AKID" + strings.ToUpper(word()), SecretAccessKey: word() + "/" + word() + "+" + word()}
	if rng.IntN(2) == 0 {
		creds.AccessKeyID = "ASIA" + strings.ToUpper(word())
		creds.SessionToken = "IQoJb3JpZ2luX2Vj" + word() + "/" + word() + "=="
	}
	return
}

func TestDifferentialAWS4(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs Node")
	}
	node := peertest.Node(t)
	aws4js := peertest.AWS4(t)
	const n = 60
	rng := rand.New(rand.NewPCG(7, 2026))
	at := time.Now().UTC().Truncate(time.Second) // one instant for both signers, recent enough for the verifier
	var ours []string
	var reqs []aws4Request
	for i := range n {
		method, rawURL, body, service, region, hdr, creds := genRequest(rng, i)
		req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if body == "" {
			req.Body, req.ContentLength = nil, 0
		}
		req.Header = hdr.Clone()
		var canon, sts string
		s := testSigner(service, region, creds, at, &canon, &sts)
		var c captured
		resp, err := s.Transport(&c).RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		ours = append(ours, c.req.Header.Get("Authorization"))
		// aws4 gets the request as it would go out: the path as sent,
		// the query as the caller wrote it, the headers the Signer set
		// (X-Amz-Date, X-Amz-Security-Token), never its Authorization.
		u, _ := url.Parse(rawURL)
		h := map[string]string{"Host": u.Host}
		for k, v := range c.req.Header {
			if k != "Authorization" {
				h[k] = strings.Join(v, ",")
			}
		}
		if len(body) > 0 {
			h["Content-Length"] = fmt.Sprint(len(body))
		}
		p := u.EscapedPath()
		if u.RawQuery != "" {
			p += "?" + u.RawQuery
		}
		reqs = append(reqs, aws4Request{Host: u.Host, Path: p, Method: method, Headers: h, Body: body, Service: service, Region: region,
			KeyID: creds.AccessKeyID, Secret: creds.SecretAccessKey, Token: creds.SessionToken})
		// The request as a server receives it passes the peers verifier.
		srv := httptest.NewRequest(method, c.req.URL.RequestURI(), strings.NewReader(body))
		srv.Host, srv.Header = u.Host, c.req.Header.Clone()
		if err := peertest.VerifySigV4Scope(service, region, map[string]peertest.Credentials{creds.AccessKeyID: {Secret: creds.SecretAccessKey, SessionToken: creds.SessionToken}})(srv, []byte(body)); err != nil {
			t.Errorf("request %d (%s %s): the peers verifier refuses the Signer's signature: %v", i, method, rawURL, err)
		}
		if strings.HasPrefix(u.Path, "/runtimes/") && !strings.Contains(canon, "/runtimes/arn%253Aaws%253Abedrock-agentcore%253A") {
			t.Errorf("request %d: canonical URI not double-escaped:\n%s", i, canon)
		}
	}
	in, _ := json.Marshal(reqs)
	cmd := exec.Command(node, "-e", aws4Script, aws4js)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node aws4: %v\n%s", err, stderr.String())
	}
	var theirs []string
	if err := json.Unmarshal(out, &theirs); err != nil || len(theirs) != n {
		t.Fatalf("aws4 answered %d signatures (%v): %s", len(theirs), err, out)
	}
	same := 0
	for i := range n {
		if ours[i] == theirs[i] {
			same++
			continue
		}
		t.Errorf("request %d (%s %s): Signer %q, aws4 %q", i, reqs[i].Method, reqs[i].Path, ours[i], theirs[i])
	}
	t.Logf("%d of %d requests signed identically by the Signer and aws4", same, n)
}

// TestCanonicalARNPath: an InvokeAgentRuntime path, whose ARN is
// percent-encoded in one segment, goes out as encoded and is escaped once
// more in the canonical request, as non-S3 services require.
func TestCanonicalARNPath(t *testing.T) {
	const path = "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fdocs_server-AbCdEf1234/invocations"
	for _, build := range []func() *http.Request{
		func() *http.Request { // parsed from a string: RawPath set by url.Parse
			r, _ := http.NewRequest("POST", "https://bedrock-agentcore.us-east-1.amazonaws.com"+path+"?qualifier=DEFAULT", strings.NewReader("{}"))
			return r
		},
		func() *http.Request { // built by hand: Path decoded, RawPath encoded
			r, _ := http.NewRequest("POST", "https://bedrock-agentcore.us-east-1.amazonaws.com/", strings.NewReader("{}"))
			r.URL.Path, _ = url.PathUnescape(path)
			r.URL.RawPath = path
			r.URL.RawQuery = "qualifier=DEFAULT"
			return r
		},
	} {
		var canon, sts string
		s := testSigner("bedrock-agentcore", "us-east-1", aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "s"}, time.Now(), &canon, &sts)
		var c captured
		resp, err := s.Transport(&c).RoundTrip(build())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := "POST\n/runtimes/arn%253Aaws%253Abedrock-agentcore%253Aus-east-1%253A123456789012%253Aruntime%252Fdocs_server-AbCdEf1234/invocations\nqualifier=DEFAULT\n"
		if !strings.HasPrefix(canon, want) {
			t.Errorf("canonical request:\n%s\nwant it to start:\n%s", canon, want)
		}
		if got := c.req.URL.RequestURI(); got != path+"?qualifier=DEFAULT" {
			t.Errorf("sent %s, want %s", got, path+"?qualifier=DEFAULT")
		}
		if c.req.Header.Get("X-Amz-Content-Sha256") != "" {
			t.Error("X-Amz-Content-Sha256 sent to a non-S3 service")
		}
		if !strings.HasSuffix(canon, "\n44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a") {
			t.Errorf("canonical request does not end with the SHA-256 of the body {}:\n%s", canon)
		}
	}
}
