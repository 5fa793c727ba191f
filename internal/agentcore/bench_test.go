package agentcore_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/agentcore"
	"github.com/switchboard-mcp/switchboard/internal/peers"
)

// costSigner models the work of SigV4 signing per request until package
// sigv4 lands (then agentcore.NewSigner gives the real one): the payload
// hash, the canonical request and string to sign, the four-step key
// derivation and the signature. It is a cost model for the benchmark, not
// a signer anything checks.
type costSigner struct{}

func hmacSHA(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

func (costSigner) Transport(base http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		body, _ := io.ReadAll(req.Body)
		req.Body.Close()
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		now := time.Now().UTC()
		amz := now.Format("20060102T150405Z")
		r.Header.Set("X-Amz-Date", amz)
		sum := sha256.Sum256(body)
		var names []string
		for k := range r.Header {
			names = append(names, strings.ToLower(k))
		}
		names = append(names, "host")
		sort.Strings(names)
		var canon strings.Builder
		canon.WriteString(r.Method + "\n" + r.URL.EscapedPath() + "\n" + r.URL.RawQuery + "\n")
		for _, n := range names {
			canon.WriteString(n + ":" + strings.TrimSpace(r.Header.Get(n)) + "\n")
		}
		canon.WriteString("\n" + strings.Join(names, ";") + "\n" + hex.EncodeToString(sum[:]))
		cr := sha256.Sum256([]byte(canon.String()))
		scope := now.Format("20060102") + "/us-west-2/bedrock-agentcore/aws4_request"
		sts := "AWS4-HMAC-SHA256\n" + amz + "\n" + scope + "\n" + hex.EncodeToString(cr[:])
		k := hmacSHA([]byte("AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), now.Format("20060102"))
		k = hmacSHA(hmacSHA(hmacSHA(k, "us-west-2"), "bedrock-agentcore"), "aws4_request")
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"+scope+", SignedHeaders="+strings.Join(names, ";")+", Signature="+hex.EncodeToString(hmacSHA(k, sts)))
		return base.RoundTrip(r)
	})
}

// BenchmarkRelayAgentCore: calls/s of a 64-byte echo through relay →
// AgentCore emulator → go-sdk server, 16 calls in flight, with signing off
// and on. Compare the two ns/op figures.
func BenchmarkRelayAgentCore(b *testing.B) {
	for _, signed := range []bool{false, true} {
		name := "unsigned"
		if signed {
			name = "signed"
		}
		b.Run(name, func(b *testing.B) {
			emu := peers.NewAgentCore(b, peers.AgentCoreOptions{})
			b.Setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", emu.URL)
			opts := agentcore.Options{ARN: testARN}
			if signed {
				opts.Signer = costSigner{}
			}
			_, cs := startRelayVersion(b, opts, "2025-11-25")
			text := strings.Repeat("x", 64)
			ctx := context.Background()
			sem := make(chan struct{}, 16)
			var wg sync.WaitGroup
			b.ResetTimer()
			for range b.N {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
					if err != nil || peers.Text(res) != "agentcore echo: "+text {
						b.Errorf("echo: %v", err)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
