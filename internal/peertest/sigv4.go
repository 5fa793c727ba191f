package peertest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Credentials are an AWS secret key and, for temporary credentials, the
// session token requests must carry.
type Credentials struct {
	Secret       string
	SessionToken string // "" for long-term keys
}

// credsMu guards every credential map handed to VerifySigV4 and NewSTS:
// the STS emulator adds keys while verifiers read.
var credsMu sync.RWMutex

// sigv4Now is the verifier's clock; tests of old vectors move it.
var sigv4Now = time.Now

// SigV4Skew is how far a request's X-Amz-Date may be from the verifier's
// clock.
const SigV4Skew = 5 * time.Minute

// VerifySigV4 returns a verifier of AWS Signature Version 4 (header form)
// for requests signed with the keys in creds (by access key id). It is an
// implementation of its own, on the standard library alone, independent of
// the signer Switchboard uses: it parses Authorization, rebuilds the
// canonical request from the request as received (the path escaped once
// more, as non-S3 services do; the query re-encoded and sorted; the signed
// headers trimmed and joined; the SHA-256 of body), and checks the scope
// (date, aws4_request), X-Amz-Date against SigV4Skew, the session token and
// the signature. After creds is passed here, change it only through an
// STS emulator.
func VerifySigV4(creds map[string]Credentials) func(r *http.Request, body []byte) error {
	return VerifySigV4Scope("", "", creds)
}

// VerifySigV4Scope is VerifySigV4 that also requires the credential scope's
// service and region ("" accepts any).
func VerifySigV4Scope(service, region string, creds map[string]Credentials) func(r *http.Request, body []byte) error {
	return func(r *http.Request, body []byte) error {
		return verifySigV4(service, region, creds, r, body)
	}
}

func verifySigV4(service, region string, creds map[string]Credentials, r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algo) {
		return errors.New("sigv4: missing or non-SigV4 Authorization header")
	}
	fields := map[string]string{}
	for _, part := range strings.Split(auth[len(algo):], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("sigv4: malformed Authorization part %q", part)
		}
		fields[k] = v
	}
	credential, signedHeaders, signature := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if credential == "" || signedHeaders == "" || signature == "" {
		return errors.New("sigv4: Authorization lacks Credential, SignedHeaders or Signature")
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return fmt.Errorf("sigv4: malformed credential scope %q", credential)
	}
	keyID, day, gotRegion, gotService := scope[0], scope[1], scope[2], scope[3]
	if service != "" && gotService != service {
		return fmt.Errorf("sigv4: signed for service %q, want %q", gotService, service)
	}
	if region != "" && gotRegion != region {
		return fmt.Errorf("sigv4: signed for region %q, want %q", gotRegion, region)
	}
	credsMu.RLock()
	c, ok := creds[keyID]
	credsMu.RUnlock()
	if !ok {
		return fmt.Errorf("sigv4: unknown access key id %q", keyID)
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return fmt.Errorf("sigv4: bad X-Amz-Date %q", amzDate)
	}
	if d := sigv4Now().Sub(t); d > SigV4Skew || d < -SigV4Skew {
		return fmt.Errorf("sigv4: X-Amz-Date %s is %v from now", amzDate, d.Round(time.Second))
	}
	if day != amzDate[:8] {
		return fmt.Errorf("sigv4: scope date %s is not the day of X-Amz-Date %s", day, amzDate)
	}
	names := strings.Split(signedHeaders, ";")
	if !sort.StringsAreSorted(names) {
		return fmt.Errorf("sigv4: SignedHeaders %q not sorted", signedHeaders)
	}
	has := func(n string) bool {
		return sort.SearchStrings(names, n) < len(names) && names[sort.SearchStrings(names, n)] == n
	}
	if !has("host") || !has("x-amz-date") {
		return fmt.Errorf("sigv4: SignedHeaders %q must include host and x-amz-date", signedHeaders)
	}
	token := r.Header.Get("X-Amz-Security-Token")
	switch {
	case c.SessionToken == "" && token != "":
		return errors.New("sigv4: a session token on long-term credentials")
	case c.SessionToken != "" && token != c.SessionToken:
		return errors.New("sigv4: missing or wrong session token for temporary credentials")
	case token != "" && !has("x-amz-security-token"):
		return errors.New("sigv4: the session token is not signed")
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payload {
		return errors.New("sigv4: X-Amz-Content-Sha256 does not match the body")
	}

	var canon strings.Builder
	canon.WriteString(r.Method + "\n")
	rawPath, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	if rawPath == "" || r.RequestURI == "" {
		rawPath, rawQuery = r.URL.EscapedPath(), r.URL.RawQuery
	}
	canon.WriteString(uriEncode(rawPath, false) + "\n")
	q, err := canonicalQuery(rawQuery)
	if err != nil {
		return err
	}
	canon.WriteString(q + "\n")
	var shown strings.Builder // the canonical headers for an error message, without the token
	for _, n := range names {
		var vals []string
		switch n {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = []string{strconv.FormatInt(r.ContentLength, 10)}
		default:
			vals = r.Header.Values(n)
		}
		if len(vals) == 0 {
			return fmt.Errorf("sigv4: signed header %q not in the request", n)
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		canon.WriteString(n + ":" + strings.Join(vals, ",") + "\n")
		if n == "x-amz-security-token" {
			shown.WriteString(n + ":(redacted)\n")
		} else {
			shown.WriteString(n + ":" + strings.Join(vals, ",") + "\n")
		}
	}
	canon.WriteString("\n" + signedHeaders + "\n" + payload)

	crSum := sha256.Sum256([]byte(canon.String()))
	stringToSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + strings.Join(scope[1:], "/") + "\n" + hex.EncodeToString(crSum[:])
	key := []byte("AWS4" + c.Secret)
	for _, s := range scope[1:] {
		key = hmacSum(key, s)
	}
	want := hex.EncodeToString(hmacSum(key, stringToSign))
	if !hmac.Equal([]byte(want), []byte(signature)) {
		return fmt.Errorf("sigv4: signature mismatch; the canonical request's headers were:\n%s", shown.String())
	}
	return nil
}

func hmacSum(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

// uriEncode percent-encodes every byte but the unreserved ones (and "/"
// unless slash), upper-case hex, as SigV4 specifies.
func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || c == '/' && !slash {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// canonicalQuery decodes the raw query's pairs, encodes each name and value
// and sorts the pairs by encoded name, then value.
func canonicalQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	type pair struct{ k, v string }
	var pairs []pair
	for _, p := range strings.Split(raw, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return "", fmt.Errorf("sigv4: bad query name %q", k)
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			return "", fmt.Errorf("sigv4: bad query value %q", v)
		}
		pairs = append(pairs, pair{uriEncode(dk, true), uriEncode(dv, true)})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p.k + "=" + p.v
	}
	return strings.Join(out, "&"), nil
}
