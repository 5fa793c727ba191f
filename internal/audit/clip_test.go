package audit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// A secret that straddles the clip boundary is redacted whole before the
// cut: no prefix of it reaches the log, through a text or JSON handler,
// at the top level or in a group.
func TestClippedRedactsBeforeCutting(t *testing.T) {
	const secret = "sk-live-STRADDLE-0123456789"
	r := NewRedactor([]string{secret})
	line := strings.Repeat("x", 500) + secret + strings.Repeat("y", 100) // the secret spans byte 512
	for _, kind := range []string{"text", "json"} {
		var buf bytes.Buffer
		var h slog.Handler = slog.NewTextHandler(&buf, nil)
		if kind == "json" {
			h = slog.NewJSONHandler(&buf, nil)
		}
		log := slog.New(RedactingHandler(h, r))
		log.Warn("stderr", "line", Clip([]byte(line), 512), slog.Group("g", "line", Clip([]byte(line), 512)))
		out := buf.String()
		if strings.Contains(out, secret[:4]) {
			t.Errorf("%s: a prefix of the secret leaked:\n%s", kind, out)
		}
		if strings.Count(out, Redacted) != 2 {
			t.Errorf("%s: want the secret redacted in both values:\n%s", kind, out)
		}
	}
	// Without redaction the value is still clipped.
	if c := Clip([]byte(line), 512); len(c.String()) > 512+len("…") || !strings.HasSuffix(c.String(), "…") {
		t.Errorf("Clip.String() is %d bytes, want 512 and the mark", len(c.String()))
	}
	// A value that is itself the head of a longer text loses a trailing
	// prefix of a secret, even where redaction before it shortens the text.
	head := Clipped{S: secret + strings.Repeat("z", 40) + secret[:10], N: 60, Head: true}
	var buf bytes.Buffer
	slog.New(RedactingHandler(slog.NewTextHandler(&buf, nil), r)).Warn("stderr", "line", head)
	if out := buf.String(); strings.Contains(out, secret[:4]) {
		t.Errorf("head: a prefix of the secret leaked:\n%s", out)
	}
}

// An audit body cut at MaxBodyBytes leaks no prefix of a secret that the
// cut goes through, even when secrets before it were redacted (shorter).
func TestBodyCutLeavesNoSecretPrefix(t *testing.T) {
	secret := "tok-" + strings.Repeat("S", 60)
	r := NewRedactor([]string{secret})
	// Redacted secrets first (each 64 bytes become 10), then filler so
	// that the last secret straddles the end of the window redacted: its
	// head would shift below the cut.
	lead := strings.Repeat(secret, 10)
	start := MaxBodyBytes + r.maxSecretLen() - 30
	b := []byte(lead + strings.Repeat("f", start-len(lead)) + secret + "tail")
	got, cut := body(r, b)
	if !cut {
		t.Fatal("body not marked truncated")
	}
	if strings.Contains(got, "tok-") {
		t.Fatalf("the cut body shows a prefix of the secret: …%q", got[len(got)-80:])
	}
	if !strings.HasPrefix(got, Redacted) {
		t.Fatalf("the first secret is not redacted: %q…", got[:40])
	}
}

// Secrets as JSON encoders other than Go's write them: Python's json.dumps
// (ensure_ascii: every non-ASCII character \u-escaped, surrogate pairs
// beyond U+FFFF), every character \u-escaped, in either hex case.
func TestRedactorUEscapedForms(t *testing.T) {
	secrets := []string{"pässwörd-✓-𝄞-key", "sk-ascii-only-1234"}
	r := NewRedactor(secrets)
	for _, in := range []string{
		// json.dumps("pässwörd-✓-𝄞-key") (Python 3)
		`{"token": "p\u00e4ssw\u00f6rd-\u2713-\ud834\udd1e-key"}`,
		`{"token": "p\u00E4ssw\u00F6rd-\u2713-\uD834\uDD1E-key"}`,
		// Every character escaped.
		`{"token": "\u0073\u006b\u002d\u0061\u0073\u0063\u0069\u0069\u002d\u006f\u006e\u006c\u0079\u002d\u0031\u0032\u0033\u0034"}`,
		`{"token": "\u0073\u006B\u002D\u0061\u0073\u0063\u0069\u0069\u002D\u006F\u006E\u006C\u0079\u002D\u0031\u0032\u0033\u0034"}`,
		// Go's own forms, as before.
		`{"token": "pässwörd-✓-𝄞-key"}`,
	} {
		got := r.String(in)
		if got != `{"token": "[REDACTED]"}` {
			t.Errorf("String(%s) = %s", in, got)
		}
		if string(r.Bytes([]byte(in))) != got {
			t.Errorf("Bytes and String differ on %s", in)
		}
	}
	// The escaped form decodes to the secret: the test strings are right.
	var v struct{ Token string }
	if err := json.Unmarshal([]byte(`{"token": "p\u00e4ssw\u00f6rd-\u2713-\ud834\udd1e-key"}`), &v); err != nil || v.Token != secrets[0] {
		t.Fatalf("the Python form decodes to %q, %v", v.Token, err)
	}
}

func TestWordCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"hello world", 8, "hello "},
		{"hello world", 6, "hello "},
		{"hello world", 5, "hello"},
		{`{"token":"abcdef"}`, 14, `{"token":"`},
		{"averylongword", 5, ""},
		{"ab ćććć", 6, "ab "},
		{"ab ćććć", 3, "ab "},
	} {
		if got := tc.s[:WordCut(tc.s, tc.n)]; got != tc.want {
			t.Errorf("WordCut(%q, %d) keeps %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if got := string([]byte(tc.s)[:WordCut([]byte(tc.s), tc.n)]); got != tc.want {
			t.Errorf("WordCut([]byte(%q), %d) keeps %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
