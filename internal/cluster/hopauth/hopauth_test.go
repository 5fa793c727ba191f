package hopauth

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func secret(c byte) []byte { return bytes.Repeat([]byte{c}, 32) }

func request(body string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://r2:7946/github/mcp?x=1", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer abc")
	r.Header.Set("Mcp-Session-Id", "sealed-token")
	r.Header.Set("Content-Type", "application/json")
	return r
}

func TestSignVerify(t *testing.T) {
	k, err := New([][]byte{secret('a')})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	r := request(string(body))
	k.Sign(r, body)
	if err := k.Verify(r, body); err != nil {
		t.Fatalf("genuine request: %v", err)
	}
	if strings.Contains(r.Header.Get(Header), "abc") {
		t.Error("the signature header shows the bearer token")
	}

	// Every part of the envelope is covered.
	for name, change := range map[string]func(r *http.Request) ([]byte, *http.Request){
		"body":          func(r *http.Request) ([]byte, *http.Request) { return []byte(`{"id":2}`), r },
		"method":        func(r *http.Request) ([]byte, *http.Request) { r.Method = http.MethodGet; return body, r },
		"path":          func(r *http.Request) ([]byte, *http.Request) { r.URL.Path = "/gitlab/mcp"; return body, r },
		"query":         func(r *http.Request) ([]byte, *http.Request) { r.URL.RawQuery = "x=2"; return body, r },
		"session id":    func(r *http.Request) ([]byte, *http.Request) { r.Header.Set("Mcp-Session-Id", "other"); return body, r },
		"authorization": func(r *http.Request) ([]byte, *http.Request) { r.Header.Del("Authorization"); return body, r },
		"added header":  func(r *http.Request) ([]byte, *http.Request) { r.Header.Set("Last-Event-ID", "1"); return body, r },
		"two values": func(r *http.Request) ([]byte, *http.Request) {
			r.Header.Add("Mcp-Session-Id", "sealed-token")
			return body, r
		},
		"no signature": func(r *http.Request) ([]byte, *http.Request) { r.Header.Del(Header); return body, r },
		"mangled": func(r *http.Request) ([]byte, *http.Request) {
			r.Header.Set(Header, strings.Replace(r.Header.Get(Header), "v1,", "v2,", 1))
			return body, r
		},
	} {
		r := request(string(body))
		k.Sign(r, body)
		b, r := change(r)
		if err := k.Verify(r, b); !errors.Is(err, ErrRefused) {
			t.Errorf("%s changed: %v, want ErrRefused", name, err)
		}
	}
}

func TestRotationAndSkew(t *testing.T) {
	old, _ := New([][]byte{secret('o')})
	rotated, _ := New([][]byte{secret('n'), secret('o')})
	fresh, _ := New([][]byte{secret('n')})
	r := request("")
	old.Sign(r, nil)
	if err := rotated.Verify(r, nil); err != nil {
		t.Errorf("the old key's signature after rotation: %v", err)
	}
	if err := fresh.Verify(r, nil); !errors.Is(err, ErrRefused) {
		t.Errorf("a rotated-out key's signature: %v", err)
	}
	now := time.Unix(1_900_000_000, 0)
	rotated.now = func() time.Time { return now }
	r = request("")
	rotated.Sign(r, nil)
	now = now.Add(MaxSkew + time.Second)
	if err := rotated.Verify(r, nil); !errors.Is(err, ErrRefused) {
		t.Errorf("a signature older than MaxSkew: %v", err)
	}
	if _, err := New([][]byte{[]byte("short")}); err == nil {
		t.Error("a short secret accepted")
	}
	if _, err := New(nil); err == nil {
		t.Error("no secret accepted")
	}
}
