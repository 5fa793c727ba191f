package guard

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	secretsOnce sync.Once
	secretsDet  *Secrets
)

func defaultSecrets(t testing.TB) *Secrets {
	secretsOnce.Do(func() {
		var err error
		if secretsDet, err = NewSecrets(SecretsConfig{}); err != nil {
			t.Fatal(err)
		}
	})
	if secretsDet == nil {
		t.Fatal("NewSecrets failed")
	}
	return secretsDet
}

// TestSecrets: the built-in gitleaks rules find well-known key shapes
// with their rule id and the secret's span; generic-api-key is off until
// enabled; unknown rule names and bad rule files are errors.
func TestSecrets(t *testing.T) {
	s := defaultSecrets(t)
	if n := len(s.Rules()); n < 200 {
		t.Errorf("%d rules in use, want gitleaks' 200 and more", n)
	}
	for _, c := range []struct{ in, rule, secret string }{
		{"aws_access_key_id = AKIAZ7VQ3XHNRPLK4MTS\n", "aws-access-token", "AKIAZ7VQ3XHNRPLK4MTS"},
		{"token: ghp_R8aZ3kLq9vT1mXw7bN2cY5dF0gH4jK6pQ8sU", "github-pat", "ghp_R8aZ3kLq9vT1mXw7bN2cY5dF0gH4jK6pQ8sU"},
		{`{"key":"sk_live_51Hx7RkLq9vT1mXw7bN2cY5d"}`, "stripe-access-token", "sk_live_51Hx7RkLq9vT1mXw7bN2cY5d"},
	} {
		fs := s.Scan(c.in)
		if len(fs) != 1 || fs[0].Rule != c.rule || c.in[fs[0].Offset:fs[0].Offset+fs[0].Length] != c.secret {
			t.Errorf("Scan(%q) = %+v, want %s on %q", c.in, fs, c.rule, c.secret)
			continue
		}
		if got := Apply(c.in, fs, Placeholder); strings.Contains(got, c.secret) || !strings.Contains(got, "[REDACTED:"+c.rule+"]") {
			t.Errorf("redacted: %q", got)
		}
	}
	// A presigned URL carries the access key id by design.
	for _, u := range []string{
		"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAZ7VQ3XHNRPLK4MTS%2F20261126%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=0f1e",
		"https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIAZ7VQ3XHNRPLK4MTS&Expires=1700000000&Signature=abc",
	} {
		if fs := s.Scan(u); len(fs) != 0 {
			t.Errorf("presigned URL %q: %+v", u, fs)
		}
	}
	generic := `db_password = "Xk9mQ2vL8pR4tZ7wB1n"`
	if fs := s.Scan(generic); len(fs) != 0 {
		t.Errorf("generic-api-key off by default, found %+v", fs)
	}
	g, err := NewSecrets(SecretsConfig{Enable: []string{"generic-api-key"}, Disable: []string{"aws-access-token"}})
	if err != nil {
		t.Fatal(err)
	}
	if fs := g.Scan(generic); len(fs) != 1 || fs[0].Rule != "generic-api-key" {
		t.Errorf("generic-api-key enabled: %+v", fs)
	}
	if fs := g.Scan("AKIAZ7VQ3XHNRPLK4MTS"); len(fs) != 0 {
		t.Errorf("aws-access-token disabled: %+v", fs)
	}
	for _, bad := range []SecretsConfig{{Enable: []string{"no-such-rule"}}, {Rules: []byte("[[rules]]\nid = 'x'\nregex = '(?<=a)b'\n")}, {Rules: []byte("[[rules")}} {
		if _, err := NewSecrets(bad); err == nil {
			t.Errorf("NewSecrets(%+v): no error", bad)
		}
	}
}

// TestPII: e-mail, Luhn-checked cards of an issuer, mod-97 IBANs and a
// configured national id; near misses are not found.
func TestPII(t *testing.T) {
	p, err := NewPII(PIIConfig{NationalIDs: []NationalID{{Name: "us-ssn", Pattern: `\b\d{3}-\d{2}-\d{4}\b`, Check: "us-ssn"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		{"write to jane.doe+mcp@example.co.uk today", "email"},
		{"card 4111 1111 1111 1111 exp 12/29", "card"},
		{"card 4111-1111-1111-1112", ""}, // Luhn fails
		{"order 1234567812345670", ""},   // Luhn passes, no issuer starts with 1
		{"IBAN GB82 WEST 1234 5698 7654 32", "iban"},
		{"IBAN GB82 WEST 1234 5698 7654 33", ""},
		{"DE89370400440532013000", "iban"},
		{"ssn 123-45-6789", "us-ssn"},
		{"ssn 666-45-6789", ""},
		{"git@github.com:org/repo.git", "email"},
		{"no at sign here 12345", ""},
	} {
		if got := rules(p.Scan(c.in)); got != c.want {
			t.Errorf("Scan(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, bad := range []PIIConfig{{Disable: []string{"phone"}}, {NationalIDs: []NationalID{{Name: "x", Pattern: "("}}}, {NationalIDs: []NationalID{{Name: "x", Pattern: "1", Check: "crc"}}}, {NationalIDs: []NationalID{{Pattern: "1"}}}} {
		if _, err := NewPII(bad); err == nil {
			t.Errorf("NewPII(%+v): no error", bad)
		}
	}
}

// TestWalk: every string of a tools/call result is scanned (text, an
// embedded resource's text, structuredContent) but base64 payloads;
// findings carry the JSON Pointer; the cap leaves the rest unscanned;
// Rewrite redacts in place; Mcp-Param-* headers are scanned and rewritten.
func TestWalk(t *testing.T) {
	const key = "AKIAZ7VQ3XHNRPLK4MTS"
	result := `{"content":[{"type":"text","text":"id ` + key + `"},` +
		`{"type":"image","mimeType":"image/png","data":"` + key + `"},` +
		`{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain","text":"k=` + key + `"}},` +
		`{"type":"resource","resource":{"uri":"file:///b","mimeType":"application/octet-stream","blob":"` + key + `"}}],` +
		`"structuredContent":{"creds":{"aws":"` + key + `"},"n":12345678901234567890},"isError":false}`
	s := defaultSecrets(t)
	r, err := Walk(json.RawMessage(result), 0, s, Hidden{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range r.Findings {
		paths = append(paths, f.Path+" "+f.Rule)
	}
	want := "/content/0/text aws-access-token,/content/2/resource/text aws-access-token,/structuredContent/creds/aws aws-access-token"
	if got := strings.Join(paths, ","); got != want {
		t.Errorf("findings:\n%s\nwant:\n%s", got, want)
	}
	out, err := Rewrite(json.RawMessage(result), r.Findings, Placeholder)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), key); n != 2 { // the image's and the blob's, unscanned
		t.Errorf("rewritten result holds the key %d times, want 2: %s", n, out)
	}
	if !strings.Contains(string(out), `"text":"id [REDACTED:aws-access-token]"`) || !strings.Contains(string(out), `12345678901234567890`) {
		t.Errorf("rewritten: %s", out)
	}
	if same, _ := Rewrite(json.RawMessage(result), nil, Placeholder); string(same) != result {
		t.Error("Rewrite without findings changed the document")
	}
	capped, _ := Walk(json.RawMessage(result), 30, s)
	if len(capped.Findings) != 1 || capped.Unscanned == 0 {
		t.Errorf("capped walk: %+v", capped)
	}
	if _, err := Walk(json.RawMessage(`{"a":`), 0, s); err == nil {
		t.Error("malformed JSON: no error")
	}

}

// TestSecretsWindows: scanning only around keywords finds what a scan of
// the whole text finds: each rule's generated secret placed in 4 KiB of
// benign text, and the benign text alone; and the windows do skip text.
func TestSecretsWindows(t *testing.T) {
	s := defaultSecrets(t)
	full := *s
	full.rules = slices.Clone(s.rules)
	for i := range full.rules {
		full.rules[i].maxLen = -1 // every rule over the whole text
		full.rules[i].run = run{}
	}
	rng := rand.New(rand.NewPCG(25, 25))
	pad := benchText(2 << 10)
	check := func(text string) {
		t.Helper()
		got, want := s.Scan(text), full.Scan(text)
		if !slices.Equal(got, want) {
			t.Errorf("windows found %v, the whole text %v", got, want)
		}
	}
	check(pad + pad)
	bounded := 0
	for i, r := range s.rules {
		if r.maxLen >= 0 {
			bounded++
		}
		if raceOn && i%8 != 0 {
			continue // under -race regular expressions run 10-20 times slower
		}
		check(pad + " " + genSecret(rng, r.re) + " " + pad)
	}
	if bounded < len(s.rules)*3/4 {
		t.Errorf("%d of %d rules bounded; want most", bounded, len(s.rules))
	}
	r := &s.rules[slices.IndexFunc(s.rules, func(r secretRule) bool { return r.id == "github-pat" })]
	hits := make([][]int, len(s.keywords))
	hits[r.keywords[0]] = []int{1000}
	if w := windows(nil, r, hits, s.keywords, 1<<20); len(w) != 1 || w[0].end-w[0].start > 200 {
		t.Errorf("github-pat's window around one keyword in 1 MiB: %v", w)
	}
}
