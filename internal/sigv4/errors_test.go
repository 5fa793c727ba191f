package sigv4

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestErrorOf: the type and message of AWS error answers in each
// protocol's shape, one line, and the body left for the reader.
func TestErrorOf(t *testing.T) {
	for _, tt := range []struct {
		name, ctype, errType, body, want string
	}{
		{"rest-json header", "application/json", "InvalidSignatureException:http://internal.amazon.com/coral/",
			`{"message":"The request signature we calculated does not match the signature you provided.\n\nThe Canonical String for this request should have been\n'POST /mcp'"}`,
			"InvalidSignatureException: The request signature we calculated does not match the signature you provided."},
		{"json __type", "application/x-amz-json-1.1", "",
			`{"__type":"com.amazon.coral.service#ExpiredTokenException","Message":"The security token included in the request is expired"}`,
			"ExpiredTokenException: The security token included in the request is expired"},
		{"query xml", "text/xml", "",
			`<ErrorResponse><Error><Type>Sender</Type><Code>SignatureDoesNotMatch</Code><Message>bad sig</Message></Error></ErrorResponse>`,
			"SignatureDoesNotMatch: bad sig"},
		{"rest xml", "application/xml", "",
			`<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`,
			"AccessDenied: Access Denied"},
		{"type only", "text/plain", "AccessDeniedException", "forbidden", "AccessDeniedException"},
		{"not aws", "text/plain", "", "forbidden", ""},
		{"json without fields", "application/json", "", `{"error":"x"}`, ""},
		// AgentCore refuses some requests with a message and no type.
		{"message only", "application/json", "", `{"message":"Access denied to runtime agent-1"}`, "Access denied to runtime agent-1"},
		{"message only, unlabelled", "", "", `{"Message":"User is not authorized to perform: bedrock-agentcore:InvokeAgentRuntime"}`,
			"User is not authorized to perform: bedrock-agentcore:InvokeAgentRuntime"},
		{"long message cut at a word", "application/json", "", `{"message":"` + strings.Repeat("word ", 60) + `"}`,
			strings.TrimSpace(strings.Repeat("word ", 40)) + "…"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 403, Status: "403 Forbidden", Header: http.Header{"Content-Type": {tt.ctype}},
				Body: io.NopCloser(strings.NewReader(tt.body))}
			if tt.errType != "" {
				resp.Header.Set("X-Amzn-Errortype", tt.errType)
			}
			if got := ErrorOf(resp); got != tt.want {
				t.Errorf("ErrorOf = %q, want %q", got, tt.want)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != tt.body {
				t.Errorf("body after = %q, want it unchanged", b)
			}
		})
	}
}

// TestErrorStatus: a refused request's status line carries the AWS
// error; other answers pass unchanged.
func TestErrorStatus(t *testing.T) {
	rt := ErrorStatus(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		code := 403
		if r.URL.Path == "/ok" {
			code = 200
		}
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader(`{"message":"no"}`)),
			Header: http.Header{"Content-Type": {"application/json"}, "X-Amzn-Errortype": {"AccessDeniedException"}}}, nil
	}))
	for path, want := range map[string]string{"/ok": "OK", "/denied": "Forbidden (AccessDeniedException: no)"} {
		req, _ := http.NewRequest("GET", "http://h"+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != want {
			t.Errorf("%s: status %q, want %q", path, resp.Status, want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
