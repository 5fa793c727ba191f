package http1

import (
	"bytes"
	"net/http"
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
	// Find the head's end, checking that every line ends in CRLF.
	end, lines := -1, 0
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			if len(b)-i > 0 && !plausiblePrefix(b) {
				return h, headLeave
			}
			return h, headMore
		}
		j += i
		if j == 0 || b[j-1] != '\r' {
			return h, headLeave
		}
		if j == i+1 { // an empty line: the end of the head
			if i == 0 {
				return h, headLeave // a leading empty line (net/http skips it; we do not bother)
			}
			end = j + 1
			break
		}
		lines++
		if lines > maxHeaders+1 {
			return h, headLeave
		}
		i = j + 1
	}
	// One string holds the whole head; every field is a slice of it.
	s := string(b[:end])
	h.n = end

	// Request line.
	eol := indexCRLF(s)
	line := s[:eol]
	sp := indexSP(line)
	if sp < 0 {
		return h, headLeave
	}
	switch line[:sp] {
	case "GET":
		h.method = http.MethodGet
	case "POST":
		h.method = http.MethodPost
	case "DELETE":
		h.method = http.MethodDelete
	default:
		return h, headLeave
	}
	rest := line[sp+1:]
	sp = indexSP(rest)
	if sp < 1 || rest[sp+1:] != "HTTP/1.1" {
		return h, headLeave
	}
	h.target = rest[:sp]
	if h.target[0] != '/' || !allIn(h.target, &pathChars) {
		return h, headLeave
	}

	// Header lines.
	h.header = make(http.Header, lines-2) // Host is not kept
	vals := make([]string, lines-1)       // one backing array for the values
	nv := 0
	haveHost, haveCL := false, false
	for p := eol + 2; p < end-2; {
		e := p + indexCRLF(s[p:])
		ln := s[p:e]
		p = e + 2
		c := indexColon(ln)
		if c <= 0 || !allIn(ln[:c], &tokenChars) {
			return h, headLeave
		}
		v := trimOWS(ln[c+1:])
		if !allIn(v, &valueChars) {
			return h, headLeave
		}
		key := canonicalKey(ln[:c])
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

func indexCRLF(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '\r' && s[i+1] == '\n' {
			return i
		}
	}
	return len(s)
}

func indexSP(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return i
		}
	}
	return -1
}

func indexColon(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return i
		}
	}
	return -1
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

// knownKeys are the canonical names of the headers MCP clients send, so
// that the common ones cost no allocation and no canonicalisation.
var knownKeys = [...]string{
	"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
	"Connection", "Content-Length", "Content-Type", "Cookie", "Host", "Last-Event-Id",
	"Mcp-Method", "Mcp-Name", "Mcp-Protocol-Version", "Mcp-Session-Id", "Origin", "Pragma",
	"Referer", "Sec-Fetch-Mode", "Traceparent", "Tracestate", "User-Agent", "X-Forwarded-For",
	"Te", "Transfer-Encoding", "Expect", "Upgrade", "Trailer", "Baggage",
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey for a name of token
// characters: a known name as its static string, another canonical one as
// itself, else a new string.
func canonicalKey(k string) string {
	for _, kk := range knownKeys {
		if len(kk) == len(k) && equalFoldToken(k, kk) {
			return kk
		}
	}
	canonical := true
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
			break
		}
		upper = c == '-'
	}
	if canonical {
		return k
	}
	b := []byte(k)
	upper = true
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

// equalFoldToken compares token characters case-insensitively.
func equalFoldToken(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
