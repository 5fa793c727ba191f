package auth

import (
	"net/http"
	"strings"
	"testing"
)

func TestParseAuthorization(t *testing.T) {
	for _, c := range []struct {
		in, tok string
		ok      bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer  abc.def-_~+/==", "abc.def-_~+/==", true},
		{"BEARER x", "x", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearer a b", "", false},
		{"Bearer =abc", "", false},
		{"Bearer ab=c", "", false},
		{"Bearer a\x00", "", false},
		{"Bearer " + strings.Repeat("a", maxTokenLen+1), "", false},
		{"Bearerabc", "", false},
	} {
		tok, problem := ParseAuthorization(c.in)
		if tok != c.tok || (problem == "") != c.ok {
			t.Errorf("ParseAuthorization(%.40q) = %q, %q; want %q, ok %v", c.in, tok, problem, c.tok, c.ok)
		}
	}
}

func TestCredentialHeaders(t *testing.T) {
	for _, c := range []struct {
		hdr       http.Header
		tok       string
		malformed bool
	}{
		{http.Header{}, "", false},
		{http.Header{"Authorization": {"Bearer t1"}}, "t1", false},
		{http.Header{"X-Api-Key": {" k1 "}}, "k1", false},
		{http.Header{"Authorization": {"Bearer t1"}, "X-Api-Key": {"k1"}}, "", true},
		{http.Header{"Authorization": {"Bearer t1", "Bearer t2"}}, "", true},
		{http.Header{"X-Api-Key": {""}}, "", true},
		{http.Header{"X-Api-Key": {"a b"}}, "", true},
	} {
		got := credential(&http.Request{Header: c.hdr})
		if got.Token != c.tok || (got.Malformed != "") != c.malformed {
			t.Errorf("credential(%v) = %+v; want token %q, malformed %v", c.hdr, got, c.tok, c.malformed)
		}
	}
}

// FuzzAuthorization: any header value parses without panicking; a token
// comes back only when it is a valid b64token with no problem reported,
// and it is a suffix of the input. The challenge built from any
// description stays one header line.
func FuzzAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Basic x", "Bearer ", "Bearer a==", "Bearer =", "Bearer a\r\nX: y",
		"Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "\x00", "Bearer  \t x"} {
		f.Add(s)
	}
	a := &Authenticator{realm: "r"}
	f.Fuzz(func(t *testing.T, h string) {
		tok, problem := ParseAuthorization(h)
		if (tok == "") == (problem == "") {
			t.Fatalf("ParseAuthorization(%q) = %q, %q: want exactly one", h, tok, problem)
		}
		if tok != "" && (!isB64Token(tok) || !strings.HasSuffix(h, tok) || len(tok) > maxTokenLen) {
			t.Fatalf("ParseAuthorization(%q) = %q: not a b64token suffix", h, tok)
		}
		_ = looksLikeJWT(h)
		ch := a.challenge(&Failure{Code: "invalid_token", Description: h}, h)
		if strings.ContainsAny(ch, "\r\n\x00") {
			t.Fatalf("challenge %q has a control character", ch)
		}
		r := &http.Request{Header: http.Header{"Authorization": {h}}}
		if c := credential(r); c.Token != tok {
			t.Fatalf("credential token %q, ParseAuthorization %q", c.Token, tok)
		}
	})
}
