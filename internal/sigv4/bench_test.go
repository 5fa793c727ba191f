package sigv4

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// BenchmarkTransport: the Signer's cost per request — reading the body,
// cloning the request, hashing, signing — for a tools/call of a 64-byte
// echo to an AgentCore runtime, with nothing sent (the base transport
// answers at once).
func BenchmarkTransport(b *testing.B) {
	var canon, sts string
	s := testSigner("bedrock-agentcore", "us-west-2", aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, time.Now(), &canon, &sts)
	s.signer = newSDKSigner() // without the test's logging
	var c captured
	rt := s.Transport(&c)
	body := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 64) + `"}}}`
	const u = "https://bedrock-agentcore.us-west-2.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-west-2%3A123456789012%3Aruntime%2Fecho_agent-AbC123/invocations?qualifier=DEFAULT"
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("POST", u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", "0123456789abcdef0123456789abcdef")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id", "session-6f1c1c52-1d8e-4a3c-9d4b-2a7f0e5b9c11")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
