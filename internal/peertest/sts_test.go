package peertest

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestSTSRefusesUnsigned: the STS emulator checks signatures: an unsigned
// or badly signed AssumeRole issues nothing and is not counted.
func TestSTSRefusesUnsigned(t *testing.T) {
	creds := map[string]Credentials{"AKIDX": {Secret: "s"}}
	s := NewSTS(t, creds)
	form := url.Values{"Action": {"AssumeRole"}, "Version": {"2011-06-15"}, "RoleArn": {"arn:aws:iam::123456789012:role/r"}, "RoleSessionName": {"x"}}
	for _, auth := range []string{"", "AWS4-HMAC-SHA256 Credential=AKIDX/20260101/us-east-1/sts/aws4_request, SignedHeaders=host;x-amz-date, Signature=00"} {
		req, _ := http.NewRequest("POST", s.URL, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth != "" {
			req.Header.Set("Authorization", auth)
			req.Header.Set("X-Amz-Date", "20260101T000000Z")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "<Code>SignatureDoesNotMatch</Code>") {
			t.Errorf("auth %q: %d %s, want 403 SignatureDoesNotMatch", auth, resp.StatusCode, body)
		}
	}
	if n := s.Count("AssumeRole"); n != 0 {
		t.Errorf("%d AssumeRole calls counted, want 0", n)
	}
	credsMu.RLock()
	defer credsMu.RUnlock()
	if len(creds) != 1 {
		t.Errorf("credentials issued to unsigned callers: %v", creds)
	}
	if calls := s.Calls(); len(calls) != 2 || calls[0].Status != http.StatusForbidden {
		t.Errorf("calls %+v, want two refused", calls)
	}
}
