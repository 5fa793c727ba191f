package http1

import (
	"net/http"
	"strings"
)

// head is a request's method, target and header, parsed from the bytes of
// one request head by parseHead.
type head struct {
	method        string
	target        string      // origin-form path, no query, no escapes
	host          string      // the Host header, removed from header as net/http does
	header        http.Header // canonical keys
	contentLength int64       // 0 when absent (no Transfer-Encoding is taken)
	close         bool        // Connection: close
	n             int         // bytes of the head, the empty line included
}

// parse results
const (
	headMore  = iota // no complete head yet; what there is could start one we take
	headOK           // a complete head we take, in h
	headLeave        // not ours: hand the connection to net/http
)

// maxHeaders bounds the header lines of a head this server takes; a head
// with more goes to net/http.
const maxHeaders = 48

// parseHead parses the request head at the start of b. It takes only a
// strict subset of HTTP/1.1, the shape MCP clients send: a method of GET,
// POST or DELETE; an origin-form target of [A-Za-z0-9_.~/-] (no query, no
// escapes); HTTP/1.1; lines ending in CRLF; header names of token
// characters; values of printable ASCII, space and tab; exactly one Host of
// host characters; at most one Content-Length of 1 to 18 digits; no
// Transfer-Encoding, Expect or Upgrade; Connection, when present, "close"
// or "keep-alive"; at most maxHeaders lines. Anything else is headLeave,
// so that net/http decides about it (and answers 400 where it should):
// whatever this server takes, net/http would have read the same way
// (FuzzParseHead checks it against http.ReadRequest).
func parseHead(b []byte) (h head, res int) {
	// One pass over the bytes: the request line, then each header line,
	// noted as spans of b; the strings are made once the head is whole.
	i := 0
	switch {
	case hasPrefix(b, "POST "):
		h.method, i = http.MethodPost, len("POST ")
	case hasPrefix(b, "GET "):
		h.method, i = http.MethodGet, len("GET ")
	case hasPrefix(b, "DELETE "):
		h.method, i = http.MethodDelete, len("DELETE ")
	default:
		if plausiblePrefix(b) {
			return h, headMore
		}
		return h, headLeave
	}
	t0 := i
	for i < len(b) && pathChars[b[i]] {
		i++
	}
	if i == len(b) {
		return h, headMore
	}
	if b[i] != ' ' || i == t0 || b[t0] != '/' {
		return h, headLeave
	}
	t1 := i
	i++
	const version = "HTTP/1.1\r\n"
	if n := min(len(b)-i, len(version)); string(b[i:i+n]) != version[:n] {
		return h, headLeave
	} else if n < len(version) {
		return h, headMore
	}
	i += len(version)

	var spans [maxHeaders]struct{ k0, k1, v0, v1 int }
	nh := 0
	for {
		if i == len(b) {
			return h, headMore
		}
		if b[i] == '\r' { // the empty line
			if i+1 == len(b) {
				return h, headMore
			}
			if b[i+1] != '\n' {
				return h, headLeave
			}
			i += 2
			break
		}
		k0 := i
		for i < len(b) && tokenChars[b[i]] {
			i++
		}
		if i == len(b) {
			return h, headMore
		}
		if b[i] != ':' || i == k0 { // a space before the colon, a folded line, a bad byte
			return h, headLeave
		}
		k1 := i
		i++
		for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
			i++
		}
		v0 := i
		for i < len(b) && valueChars[b[i]] {
			i++
		}
		if i+1 >= len(b) {
			return h, headMore
		}
		if b[i] != '\r' || b[i+1] != '\n' { // a bare LF, a control or non-ASCII byte
			return h, headLeave
		}
		v1 := i
		for v1 > v0 && (b[v1-1] == ' ' || b[v1-1] == '\t') {
			v1--
		}
		i += 2
		if nh == maxHeaders {
			return h, headLeave
		}
		spans[nh] = struct{ k0, k1, v0, v1 int }{k0, k1, v0, v1}
		nh++
	}
	s := string(b[:i]) // every field is a slice of this one string
	h.n = i
	h.target = s[t0:t1]
	h.header = make(http.Header, max(nh-1, 0)) // Host is not kept
	vals := make([]string, nh)                 // one backing array for the values
	nv := 0
	haveHost, haveCL := false, false
	for _, sp := range spans[:nh] {
		key, v := canonicalKey(s[sp.k0:sp.k1]), s[sp.v0:sp.v1]
		switch key {
		case "Host":
			if haveHost || v == "" || !allIn(v, &hostChars) {
				return h, headLeave
			}
			haveHost, h.host = true, v
			continue // net/http keeps Host out of the header map
		case "Content-Length":
			if haveCL {
				return h, headLeave
			}
			n, ok := parseLength(v)
			if !ok {
				return h, headLeave
			}
			haveCL, h.contentLength = true, n
		case "Transfer-Encoding", "Expect", "Upgrade", "Trailer", "Te", "Pragma":
			// Framing or behaviour that net/http handles (Pragma: no-cache
			// makes it add Cache-Control).
			return h, headLeave
		case "Connection":
			switch {
			case asciiEqualFold(v, "close"):
				h.close = true
			case asciiEqualFold(v, "keep-alive"):
			default:
				return h, headLeave
			}
		}
		if old, ok := h.header[key]; ok {
			h.header[key] = append(old, v)
			continue
		}
		vals[nv] = v
		h.header[key] = vals[nv : nv+1 : nv+1]
		nv++
	}
	if !haveHost {
		return h, headLeave
	}
	return h, headOK
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

// plausiblePrefix reports whether b, a head without its end yet, could
// still be one this server takes: its first line, as far as it goes, starts
// with a method it takes. It is only a hint (a head that turns out not to
// be ours is left once complete); it keeps a client that speaks something
// else entirely from waiting for a head that will not come.
func plausiblePrefix(b []byte) bool {
	for _, m := range [...]string{"GET ", "POST ", "DELETE "} {
		n := min(len(b), len(m))
		if string(b[:n]) == m[:n] {
			return true
		}
	}
	return false
}

// parseLength parses a Content-Length value: 1 to 18 digits.
func parseLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// charSet is a set of bytes, by table.
type charSet [256]bool

func allIn(s string, set *charSet) bool {
	for i := 0; i < len(s); i++ {
		if !set[s[i]] {
			return false
		}
	}
	return true
}

var pathChars, tokenChars, valueChars, hostChars charSet

func init() {
	for c := 'a'; c <= 'z'; c++ {
		pathChars[c], tokenChars[c], hostChars[c] = true, true, true
		pathChars[c-'a'+'A'], tokenChars[c-'a'+'A'], hostChars[c-'a'+'A'] = true, true, true
	}
	for c := '0'; c <= '9'; c++ {
		pathChars[c], tokenChars[c], hostChars[c] = true, true, true
	}
	for _, c := range "_.~/-" {
		pathChars[c] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		tokenChars[c] = true
	}
	for _, c := range "-.:[]_" {
		hostChars[c] = true
	}
	for c := 0x20; c < 0x7f; c++ {
		valueChars[c] = true
	}
	valueChars['\t'] = true
}

// lowerKeys maps the lower-case names of the headers MCP clients send
// (Node's fetch sends them so) to their canonical form, so that they cost
// no allocation.
var lowerKeys = map[string]string{}

func init() {
	for _, k := range [...]string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Length", "Content-Type", "Cookie", "Host", "Last-Event-Id",
		"Mcp-Method", "Mcp-Name", "Mcp-Protocol-Version", "Mcp-Session-Id", "Origin", "Pragma",
		"Referer", "Sec-Fetch-Mode", "Traceparent", "Tracestate", "User-Agent", "X-Forwarded-For",
		"Te", "Transfer-Encoding", "Expect", "Upgrade", "Trailer", "Baggage", "X-Namespace",
	} {
		lowerKeys[strings.ToLower(k)] = k
	}
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey for a name of token
// characters: a canonical name as itself (a slice of the head), a known
// one in lower case as its static string, else a new string.
func canonicalKey(k string) string {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			if kk, ok := lowerKeys[k]; ok {
				return kk
			}
			return canonicalize(k)
		}
		upper = c == '-'
	}
	return k
}

func canonicalize(k string) string {
	b := []byte(k)
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return string(b)
}
