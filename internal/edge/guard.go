package edge

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
)

// guard rejects requests that could come from a DNS-rebinding page: a Host
// that is not allowed (when listening on loopback or when allowed_hosts is
// set) or an Origin that is neither loopback nor allowed. Both get 403.
func (e *Edge) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.table().Guard.check(w, r, next)
	})
}

// Guard is the Host and Origin allowlist of one config generation. The
// zero Guard checks no Host and admits loopback Origins only.
type Guard struct {
	checkHost bool
	hosts     map[string]bool
	origins   map[string]bool
	anyOrigin bool
}

// NewGuard returns the allowlist of a server listening on listen: the
// hosts and origins allowed besides loopback ones ("*": any). Hosts are
// checked when listening on loopback or when allowedHosts is not empty.
func NewGuard(listen string, allowedHosts, allowedOrigins []string) Guard {
	listenHost, _, _ := net.SplitHostPort(listen)
	loopbackListen := isLoopbackHost(listenHost)
	hosts := map[string]bool{}
	anyHost := false
	for _, h := range allowedHosts {
		if h == "*" {
			anyHost = true
		}
		hosts[strings.ToLower(h)] = true
	}
	if listenHost != "" {
		hosts[strings.ToLower(listenHost)] = true
	}
	origins := map[string]bool{}
	anyOrigin := false
	for _, o := range allowedOrigins {
		if o == "*" {
			anyOrigin = true
		}
		origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return Guard{checkHost: !anyHost && (loopbackListen || len(allowedHosts) > 0),
		hosts: hosts, origins: origins, anyOrigin: anyOrigin}
}

// check serves r with next, or answers 403.
func (p *Guard) check(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if p.checkHost {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(strings.ToLower(host), "[]")
		if !isLoopbackHost(host) && !p.hosts[host] {
			forbid(w, "Host "+r.Host+" is not allowed (allowed_hosts)")
			return
		}
	}
	if o := canonicalHeader(r.Header, "Origin"); o != "" && !p.anyOrigin && !p.origins[strings.ToLower(o)] && !loopbackOrigin(o) {
		forbid(w, "Origin "+o+" is not allowed (allowed_origins)")
		return
	}
	next.ServeHTTP(w, r)
}

func forbid(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": msg}})
}

func isLoopbackHost(h string) bool {
	h = strings.Trim(strings.ToLower(h), "[]")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func loopbackOrigin(o string) bool {
	o = strings.ToLower(o)
	rest, ok := strings.CutPrefix(o, "http://")
	if !ok {
		rest, ok = strings.CutPrefix(o, "https://")
	}
	if !ok {
		return false
	}
	host := rest
	if h, _, err := net.SplitHostPort(rest); err == nil {
		host = h
	}
	return isLoopbackHost(host)
}

// canonicalHeader is h.Get(key) for a key already in canonical form: the
// map is read directly, without canonicalising the key per request (net/http
// stores the keys it parses canonical).
func canonicalHeader(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
