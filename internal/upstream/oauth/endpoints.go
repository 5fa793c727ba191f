package oauth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"syscall"
	"time"
)

// The discovery, registration and token requests go to URLs that the
// remote server names (the WWW-Authenticate resource_metadata, the
// authorization_servers of its metadata, the endpoints of the
// authorization server's): a hostile server could point them at what only
// the gateway can reach (server-side request forgery). The default HTTP
// client of a Client refuses, on the address actually connected to (after
// DNS, so a name that resolves there is refused too):
//   - link-local, unspecified and multicast addresses, and the cloud
//     instance-metadata addresses (169.254.169.254, fd00:ec2::254,
//     100.100.100.200), always;
//   - loopback and private addresses (RFC 1918, unique-local, shared
//     100.64/10), unless the MCP server's own URL resolves to such an
//     address too: a server on this machine or network may name an
//     authorization server beside it.
// With a proxy set in the environment (HTTPS_PROXY, HTTP_PROXY) the
// proxy is connected to, so the URL's host is resolved and checked before
// each request instead.

// endpointClass is how far an address is from the public internet.
type endpointClass int

const (
	classPublic   endpointClass = iota
	classInternal               // loopback or private
	classRefused                // never: link-local, metadata, multicast, unspecified
)

var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

func classify(a netip.Addr) endpointClass {
	a = a.Unmap()
	switch {
	case slices.Contains(metadataAddrs, a), !a.IsValid(), a.IsUnspecified(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(),
		a.IsInterfaceLocalMulticast(), a.IsMulticast():
		return classRefused
	case a.IsLoopback(), a.IsPrivate(), sharedSpace.Contains(a):
		return classInternal
	}
	return classPublic
}

// endpointGuard decides for the requests of one Client.
type endpointGuard struct {
	serverHost string // the MCP server URL's host
	resolver   *net.Resolver
}

// serverInternal reports whether the MCP server itself is on an internal
// address (any of its host's addresses).
func (g *endpointGuard) serverInternal(ctx context.Context) bool {
	if g.serverHost == "localhost" {
		return true
	}
	if a, err := netip.ParseAddr(g.serverHost); err == nil {
		return classify(a) != classPublic
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", g.serverHost)
	return err == nil && slices.ContainsFunc(addrs, func(a netip.Addr) bool { return classify(a) != classPublic })
}

// check returns an error when a request may not go to a.
func (g *endpointGuard) check(ctx context.Context, host string, a netip.Addr) error {
	switch classify(a) {
	case classRefused:
		return fmt.Errorf("oauth: refusing to send a discovery or token request to %s (%s): a link-local, metadata or multicast address", host, a)
	case classInternal:
		if !g.serverInternal(ctx) {
			return fmt.Errorf("oauth: refusing to send a discovery or token request to %s (%s): an internal address, named by a server that is not on one", host, a)
		}
	}
	return nil
}

// newGuardedHTTPClient is a Client's default HTTP client.
func newGuardedHTTPClient(serverURL string) *http.Client {
	u, _ := url.Parse(serverURL)
	g := &endpointGuard{resolver: net.DefaultResolver}
	if u != nil {
		g.serverHost = u.Hostname()
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if proxied() {
		return &http.Client{Timeout: 30 * time.Second, Transport: &hostCheck{g: g, base: tr}}
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := *d
		d.ControlContext = func(ctx context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return g.check(ctx, addr, ap.Addr())
		}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

func proxied() bool {
	return slices.ContainsFunc([]string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"},
		func(k string) bool { return os.Getenv(k) != "" })
}

// hostCheck resolves and checks a request's host before it goes to a
// proxy.
type hostCheck struct {
	g    *endpointGuard
	base http.RoundTripper
}

func (h *hostCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Hostname()
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else if host == "localhost" {
		addrs = append(addrs, netip.IPv6Loopback())
	} else {
		var err error
		if addrs, err = h.g.resolver.LookupNetIP(req.Context(), "ip", host); err != nil {
			return nil, err
		}
	}
	for _, a := range addrs {
		if err := h.g.check(req.Context(), host, a); err != nil {
			return nil, err
		}
	}
	return h.base.RoundTrip(req)
}
