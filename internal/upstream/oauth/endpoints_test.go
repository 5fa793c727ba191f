package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestClassifyEndpoints(t *testing.T) {
	for addr, want := range map[string]endpointClass{
		"169.254.169.254": classRefused, "169.254.170.2": classRefused, "fe80::1": classRefused,
		"fd00:ec2::254": classRefused, "100.100.100.200": classRefused, "0.0.0.0": classRefused,
		"::": classRefused, "224.0.0.1": classRefused, "ff02::1": classRefused,
		"::ffff:169.254.169.254": classRefused,
		"127.0.0.1":              classInternal, "::1": classInternal, "10.1.2.3": classInternal, "172.16.0.1": classInternal,
		"192.168.1.1": classInternal, "fd12::1": classInternal, "100.64.0.1": classInternal,
		"::ffff:10.0.0.1": classInternal,
		"203.0.113.7":     classPublic, "8.8.8.8": classPublic, "2606:4700::1111": classPublic,
	} {
		if got := classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("classify(%s) = %d, want %d", addr, got, want)
		}
	}
}

// A server on a public address cannot make the gateway send its discovery
// or token requests to a loopback one: the connection is refused before a
// byte is sent. A server on a loopback address may (an authorization
// server beside it), but never to a metadata address.
func TestGuardedClientRefusesInternalTargets(t *testing.T) {
	var hits atomic.Int32
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{}`))
	}))
	defer local.Close()

	for _, tc := range []struct {
		server, target string
		refused        string // "": allowed
	}{
		{"http://203.0.113.7/mcp", local.URL + "/.well-known/oauth-authorization-server", "an internal address"},
		{"http://127.0.0.1:1/mcp", local.URL + "/.well-known/oauth-authorization-server", ""},
		{"http://localhost:1/mcp", local.URL + "/token", ""},
		{"http://127.0.0.1:1/mcp", "http://169.254.169.254/latest/meta-data/", "link-local, metadata"},
		{"http://10.0.0.5/mcp", "http://[fd00:ec2::254]/latest/meta-data/", "link-local, metadata"},
	} {
		before := hits.Load()
		resp, err := newGuardedHTTPClient(tc.server).Get(tc.target)
		if resp != nil {
			resp.Body.Close()
		}
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("server %s, request to %s: %v; want it sent", tc.server, tc.target, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("server %s, request to %s: %v; want refused (%s)", tc.server, tc.target, err, tc.refused)
		case tc.refused != "" && hits.Load() != before:
			t.Errorf("server %s, request to %s: refused, but the target saw the request", tc.server, tc.target)
		}
	}

	// Behind a proxy the host is checked before the request is handed on.
	hc := &hostCheck{g: &endpointGuard{serverHost: "203.0.113.7"}, base: http.DefaultTransport}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", local.URL, nil)
	if _, err := hc.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "an internal address") {
		t.Fatalf("proxied request to a loopback target: %v; want refused", err)
	}
}
