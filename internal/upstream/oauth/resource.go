package oauth

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
)

// resourceParam sends the refresh-token grant with the RFC 8707 resource
// parameter, which golang.org/x/oauth2 has no way to add to a refresh: a
// form-encoded POST to TokenURL whose grant_type is refresh_token and that
// names no resource gets resource = Resource. Every other request goes
// through base (nil: http.DefaultTransport) untouched.
type resourceParam struct {
	base               http.RoundTripper
	tokenURL, resource string
}

// maxTokenForm bounds the token request body read to add the parameter;
// a refresh grant is a few hundred bytes.
const maxTokenForm = 64 << 10

func (t *resourceParam) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Method != http.MethodPost || req.Body == nil || req.URL.String() != t.tokenURL ||
		req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		return base.RoundTrip(req)
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxTokenForm+1))
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, perr := url.ParseQuery(string(b))
	if perr == nil && len(b) <= maxTokenForm && form.Get("grant_type") == "refresh_token" && !form.Has("resource") {
		form.Set("resource", t.resource)
		b = []byte(form.Encode())
	}
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r2.ContentLength = int64(len(b))
	return base.RoundTrip(r2)
}
