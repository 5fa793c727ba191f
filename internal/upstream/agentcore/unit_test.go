package agentcore

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseARN(t *testing.T) {
	for _, c := range []struct {
		arn, region string
	}{
		{"arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/my_agent-AbC123", "us-west-2"},
		{"arn:aws-us-gov:bedrock-agentcore:us-gov-west-1:123456789012:runtime/x", "us-gov-west-1"},
		{"arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/", ""},
		{"arn:aws:bedrock:us-west-2:123456789012:runtime/x", ""},
		{"arn:aws:bedrock-agentcore:us-west-2:1234:runtime/x", ""},
		{"arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/x/y", ""},
		{"arn:aws:bedrock-agentcore:us-west-2:123456789012:gateway/x", ""},
		{"", ""},
	} {
		region, err := ParseARN(c.arn)
		if region != c.region || (err == nil) != (c.region != "") {
			t.Errorf("ParseARN(%q) = %q, %v; want %q", c.arn, region, err, c.region)
		}
	}
}

func FuzzParseARN(f *testing.F) {
	f.Add("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/my_agent-AbC123")
	f.Add("arn:aws-cn:bedrock-agentcore:cn-north-1:123456789012:runtime/a")
	f.Add("arn:aws:bedrock-agentcore:::runtime/")
	f.Fuzz(func(t *testing.T, arn string) {
		region, err := ParseARN(arn)
		if err != nil {
			return
		}
		if region == "" || !strings.Contains(arn, ":"+region+":") {
			t.Fatalf("ParseARN(%q) = %q", arn, region)
		}
		// An accepted ARN always escapes to one path segment.
		if e := escapeARN(arn); strings.ContainsAny(e, ":/") || !utf8.ValidString(e) {
			t.Fatalf("escapeARN(%q) = %q", arn, e)
		}
	})
}

func TestIdentitySessionID(t *testing.T) {
	// Computed with the seed's formula in Python:
	// "identity-" + str(uuid.UUID(bytes=sha256(json.dumps([a, u, arn],
	// separators=(",", ":")).encode()).digest()[:16])).
	got := IdentitySessionID("123456789012", "AIDAEXAMPLE", "arn:aws:iam::123456789012:user/alice")
	if want := "identity-50e672bc-adba-ba0c-520d-bb8b4b05c785"; got != want {
		t.Errorf("IdentitySessionID = %s, want %s", got, want)
	}
}

func TestEndpointAndURL(t *testing.T) {
	const arn = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/a_b-C"
	const enc = "arn%3Aaws%3Abedrock-agentcore%3Aeu-west-1%3A123456789012%3Aruntime%2Fa_b-C"
	for _, c := range []struct {
		specific, generic, option, want string
	}{
		{"", "", "", "https://bedrock-agentcore.eu-west-1.amazonaws.com"},
		{"", "http://127.0.0.1:1", "", "http://127.0.0.1:1"},
		{"http://127.0.0.1:2/", "http://127.0.0.1:1", "", "http://127.0.0.1:2"},
		{"http://127.0.0.1:2", "", "https://private.example", "https://private.example"},
	} {
		t.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", c.specific)
		t.Setenv("AWS_ENDPOINT_URL", c.generic)
		rt, err := New(context.Background(), Options{ARN: arn, Endpoint: c.option, Qualifier: "a b"})
		if err != nil {
			t.Fatal(err)
		}
		if want := c.want + "/runtimes/" + enc + "/invocations?qualifier=a+b"; rt.URL() != want {
			t.Errorf("URL = %s, want %s", rt.URL(), want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	const arn = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/a"
	t.Setenv("AGENTCORE_READ_TIMEOUT", "")
	for _, c := range []struct {
		name string
		opts Options
		env  string
		want string
	}{
		{"bad arn", Options{ARN: "arn:aws:s3:::bucket"}, "", "not a runtime ARN"},
		{"bad mode", Options{ARN: arn, SessionMode: "sticky"}, "", "session, identity or request"},
		{"identity without credentials", Options{ARN: arn, SessionMode: ModeIdentity}, "", "needs the caller's identity"},
		{"bad endpoint", Options{ARN: arn, Endpoint: "ftp://x"}, "", "not an http(s) URL"},
		{"bad timeout", Options{ARN: arn}, "soon", "AGENTCORE_READ_TIMEOUT must be a positive number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AGENTCORE_READ_TIMEOUT", c.env)
			_, err := New(context.Background(), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestInvokerAnswersGET: AgentCore has no listen stream or session
// deletion; the transport answers them itself and sends nothing.
func TestInvokerAnswersGET(t *testing.T) {
	sent := 0
	inv := &invoker{session: "session-x", next: roundTrip(func(*http.Request) (*http.Response, error) {
		sent++
		return nil, nil
	})}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, "http://127.0.0.1:9/runtimes/x/invocations", nil)
		resp, err := inv.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %v %v", m, resp, err)
		}
	}
	if sent != 0 {
		t.Errorf("%d requests sent", sent)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
