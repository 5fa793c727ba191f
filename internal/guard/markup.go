package guard

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Markup finds markup that makes a client fetch a URL carrying data out
// (EchoLeak): a markdown image or link, a reference definition, or with
// HTML an <img>, whose URL is http(s) to a host not in AllowHosts and has a query
// value of MinQueryValue bytes or more. Rules "image" and "link"; the span
// is the URL, so Strip leaves the markup empty ("![x]()").
type Markup struct {
	// AllowHosts are hosts whose URLs are never findings; "example.com"
	// allows its subdomains too. Zero: none.
	AllowHosts []string
	// MinQueryValue is the length from which a query value (or a query
	// without "=") counts as data. Zero: 16.
	MinQueryValue int
	// HTML: <img src> counts too. Zero: markdown only (HTML mail is full
	// of tracking images).
	HTML bool
}

// markupRes are Markup's expressions, compiled on first use: their
// {0,1000} repeats compile to about 1.5 MB of program, which a gateway
// without guards should not carry (TestLazyCompile).
var markupRes = sync.OnceValue(func() (r struct{ inline, ref, img *regexp.Regexp }) {
	r.inline = regexp.MustCompile(`(!?)\[[^\]\n]{0,1000}\]\(\s*<?([a-zA-Z][a-zA-Z0-9+.-]*://[^\s)>]+)`)
	r.ref = regexp.MustCompile(`(?m)^[ \t]{0,3}\[[^\]\n]{1,1000}\]:[ \t]*<?([a-zA-Z][a-zA-Z0-9+.-]*://[^\s>]+)`)
	r.img = regexp.MustCompile(`(?i)<img\b[^>]{0,1000}?\bsrc\s*=\s*["']?([^"'\s>]+)`)
	return r
})

// Scan implements Detector.
func (m Markup) Scan(s string) []Finding {
	if strings.IndexByte(s, '[') < 0 && strings.IndexByte(s, '<') < 0 { // two vector scans; ContainsAny tests a set a byte
		return nil
	}
	var out []Finding
	check := func(rule string, start, end int) {
		if m.exfiltrates(s[start:end]) {
			out = append(out, Finding{Detector: "markup", Rule: rule, Offset: start, Length: end - start})
		}
	}
	if strings.Contains(s, "](") {
		for _, loc := range markupRes().inline.FindAllStringSubmatchIndex(s, -1) {
			rule := "link"
			if loc[3] > loc[2] {
				rule = "image"
			}
			check(rule, loc[4], loc[5])
		}
	}
	if strings.Contains(s, "]:") {
		for _, loc := range markupRes().ref.FindAllStringSubmatchIndex(s, -1) {
			check("link", loc[2], loc[3])
		}
	}
	if m.HTML && (strings.Contains(s, "<img") || strings.Contains(s, "<IMG")) {
		for _, loc := range markupRes().img.FindAllStringSubmatchIndex(s, -1) {
			check("image", loc[2], loc[3])
		}
	}
	return out
}

func (m Markup) exfiltrates(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range m.AllowHosts {
		h = strings.ToLower(h)
		if host == h || strings.HasSuffix(host, "."+h) {
			return false
		}
	}
	min := m.MinQueryValue
	if min <= 0 {
		min = 16
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		_, v, ok := strings.Cut(kv, "=")
		if !ok {
			v = kv
		}
		if len(v) >= min {
			return true
		}
	}
	return false
}
