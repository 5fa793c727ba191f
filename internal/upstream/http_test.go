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
