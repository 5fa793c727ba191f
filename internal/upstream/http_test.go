package upstream

import (
	"net/url"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"http://h/sse", "http://h:80/message?x=1", true},
		{"https://H:443/a", "https://h/b", true},
		{"http://h/a", "https://h/a", false},
		{"http://h:8080/a", "http://h:8081/a", false},
		{"http://h/a", "http://evil/a", false},
	} {
		a, _ := url.Parse(tt.a)
		b, _ := url.Parse(tt.b)
		if got := SameOrigin(a, b); got != tt.want {
			t.Errorf("SameOrigin(%s, %s) = %v", tt.a, tt.b, got)
		}
	}
}

func TestHTTPOptionsResolve(t *testing.T) {
	for _, tt := range []struct{ url, err string }{
		{"http://h:8080/sse", ""},
		{"ftp://h/sse", "sse: invalid URL ftp://h: want an http or https URL"},
		{"http:///sse", "sse: invalid URL http://: want an http or https URL"},
		{"http://h/%zz", `sse: invalid URL: invalid URL escape "%zz"`},
	} {
		u, o, err := HTTPOptions{URL: tt.url}.Resolve("sse")
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: err %v, want %q", tt.url, err, tt.err)
			}
			continue
		}
		if err != nil || u.Host != "h:8080" {
			t.Fatalf("%s: %v, %v", tt.url, u, err)
		}
		if o.HTTPClient == nil || o.Logger == nil || o.MaxMessage != 16<<20 {
			t.Errorf("defaults not filled: %+v", o)
		}
	}
}
