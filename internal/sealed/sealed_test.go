package sealed

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func secret(c byte) []byte { return bytes.Repeat([]byte{c}, MinSecretLen) }

func mustNew(t testing.TB, secrets ...[]byte) *Sealer {
	t.Helper()
	s, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// typical is a session as a desktop client opens it.
func typical() Session {
	return Session{
		Owner:         "switchboard-7d9f8c6b5-x2k4q",
		Protocol:      "2025-11-25",
		ClientName:    "claude-code",
		ClientVersion: "2.0.14",
		Capabilities:  []byte(`{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`),
		Expires:       time.Now().Add(24 * time.Hour).Truncate(time.Second),
	}
}

var alice = Binding{Destination: "github", Issuer: "https://idp.example.com", Subject: "alice@example.com"}

func TestSessionRoundTrip(t *testing.T) {
	s := mustNew(t, secret('a'))
	tok, sealedSess, err := s.SealSession(alice, typical())
	if err != nil {
		t.Fatal(err)
	}
	if len(sealedSess.ID) != 16 {
		t.Errorf("ID %q, want 16 characters", sealedSess.ID)
	}
	got, err := s.OpenSession(alice, tok)
	if err != nil {
		t.Fatal(err)
	}
	want := typical()
	want.ID = sealedSess.ID
	if got.ID != want.ID || got.Owner != want.Owner || got.Protocol != want.Protocol || got.ClientName != want.ClientName ||
		got.ClientVersion != want.ClientVersion || !bytes.Equal(got.Capabilities, want.Capabilities) || !got.Expires.Equal(want.Expires) {
		t.Errorf("opened %+v, want %+v", got, want)
	}
	// Visible ASCII only (Mcp-Session-Id: 0x21-0x7E), and short enough for
	// a stick table whose len is 300.
	for _, c := range []byte(tok) {
		if c < 0x21 || c > 0x7e {
			t.Fatalf("token has byte %#x", c)
		}
	}
	if len(tok) > 300 {
		t.Errorf("typical session token is %d characters, want <= 300", len(tok))
	}
	t.Logf("typical session token: %d characters", len(tok))
	// No field shows in the clear.
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for _, f := range []string{want.Owner, want.ClientName, want.Protocol, "listChanged", alice.Subject} {
		if bytes.Contains(raw, []byte(f)) || strings.Contains(tok, f) {
			t.Errorf("token shows %q", f)
		}
	}
	// Two seals of the same session differ (random nonce).
	tok2, _, _ := s.SealSession(alice, got)
	if tok2 == tok {
		t.Error("sealing twice gave the same token")
	}
	// The zero Session round-trips too (apart from its ID).
	tok, z, err := s.SealSession(Binding{}, Session{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.OpenSession(Binding{}, tok); err != nil || got.ID != z.ID || got.Capabilities != nil || !got.Expires.IsZero() {
		t.Errorf("zero session opened as %+v, %v", got, err)
	}
}

func TestRequestStateRoundTrip(t *testing.T) {
	s := mustNew(t, secret('a'))
	st := RequestState{Owner: "r1", Handle: "h-123", Method: "tools/call", Name: "create_issue", Expires: time.Now().Add(time.Minute).Truncate(time.Second)}
	tok, err := s.SealRequestState(alice, st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.OpenRequestState(alice, tok)
	if err != nil || got != st {
		t.Errorf("opened %+v, %v; want %+v", got, err, st)
	}
}

func TestRotation(t *testing.T) {
	old := mustNew(t, secret('o'))
	tokOld, _, err := old.SealSession(alice, typical())
	if err != nil {
		t.Fatal(err)
	}
	rotated := mustNew(t, secret('n'), secret('o'))
	if _, err := rotated.OpenSession(alice, tokOld); err != nil {
		t.Errorf("a token of the old key does not open after rotation: %v", err)
	}
	tokNew, _, _ := rotated.SealSession(alice, typical())
	if tokNew[:2] == tokOld[:2] && rotated.KeyID() == old.KeyID() {
		t.Fatal("the new key seals under the old key's id")
	}
	if _, err := old.OpenSession(alice, tokNew); !errors.Is(err, ErrInvalid) {
		t.Errorf("a replica without the new key opened its token: %v", err)
	}
	// Rotated out: the old key's tokens no longer open.
	after := mustNew(t, secret('n'))
	if _, err := after.OpenSession(alice, tokOld); !errors.Is(err, ErrInvalid) {
		t.Errorf("a rotated-out key's token opened: %v", err)
	}
	if _, err := after.OpenSession(alice, tokNew); err != nil {
		t.Errorf("the current key's token: %v", err)
	}
}

// TestEveryAlteredByteFails alters each byte of a token's binary form in
// turn (and each character of its text): none opens.
func TestEveryAlteredByteFails(t *testing.T) {
	s := mustNew(t, secret('a'), secret('b'))
	tok, _, err := s.SealSession(alice, typical())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for i := range raw {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			alt := bytes.Clone(raw)
			alt[i] ^= flip
			if _, err := s.OpenSession(alice, base64.RawURLEncoding.EncodeToString(alt)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("byte %d ^ %#x: %v, want ErrInvalid", i, flip, err)
			}
		}
	}
	for i := range tok {
		alt := []byte(tok)
		alt[i] = map[bool]byte{true: 'B', false: 'A'}[alt[i] == 'A']
		if _, err := s.OpenSession(alice, string(alt)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("character %d altered: %v, want ErrInvalid", i, err)
		}
	}
	for _, bad := range []string{"", "a", tok[:len(tok)-1], tok + "A", tok + "=", " " + tok, tok[:10] + "\n" + tok[10:], tok[:10] + "\r" + tok[10:], strings.Repeat("A", MaxTokenLen+1)} {
		if _, err := s.OpenSession(alice, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%.20q…: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestBindingAndKind(t *testing.T) {
	s := mustNew(t, secret('a'))
	tok, _, err := s.SealSession(alice, typical())
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]Binding{
		"other destination": {Destination: "gitlab", Issuer: alice.Issuer, Subject: alice.Subject},
		"other subject":     {Destination: alice.Destination, Issuer: alice.Issuer, Subject: "mallory@example.com"},
		"other issuer":      {Destination: alice.Destination, Issuer: "https://evil.example.com", Subject: alice.Subject},
		"no principal":      {Destination: alice.Destination},
		// Length prefixes: moving a character between fields is another binding.
		"shifted": {Destination: alice.Destination + "h", Issuer: "ttps://idp.example.com", Subject: alice.Subject},
	} {
		if _, err := s.OpenSession(b, tok); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.OpenRequestState(alice, tok); !errors.Is(err, ErrInvalid) {
		t.Errorf("a session id opened as a requestState: %v", err)
	}
	st, _ := s.SealRequestState(alice, RequestState{Owner: "r1", Handle: "h"})
	if _, err := s.OpenSession(alice, st); !errors.Is(err, ErrInvalid) {
		t.Errorf("a requestState opened as a session id: %v", err)
	}
	other := mustNew(t, secret('z'))
	if _, err := other.OpenSession(alice, tok); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown key: %v, want ErrInvalid", err)
	}
}

func TestExpiry(t *testing.T) {
	s := mustNew(t, secret('a'))
	now := time.Unix(1_900_000_000, 0)
	s.now = func() time.Time { return now }
	sess := typical()
	sess.Expires = now.Add(time.Minute)
	tok, _, _ := s.SealSession(alice, sess)
	if _, err := s.OpenSession(alice, tok); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := s.OpenSession(alice, tok); !errors.Is(err, ErrInvalid) {
		t.Errorf("at expiry: %v, want ErrInvalid", err)
	}
	st, _ := s.SealRequestState(alice, RequestState{Expires: now.Add(-time.Second)})
	if _, err := s.OpenRequestState(alice, st); !errors.Is(err, ErrInvalid) {
		t.Errorf("expired requestState: %v, want ErrInvalid", err)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Error("no secret accepted")
	}
	if _, err := New([][]byte{[]byte("short")}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short secret: %v", err)
	}
	if _, err := New([][]byte{secret('a'), secret('a')}); err == nil || !strings.Contains(err.Error(), "key id") {
		t.Errorf("repeated secret: %v", err)
	}
	// Secrets whose ids collide are found and refused (brute force: one
	// in 256 pairs collides).
	first := secret('a')
	for c := 0; c < 4096; c++ {
		other := append(secret('b'), byte(c), byte(c>>8))
		if _, err := New([][]byte{first, other}); err != nil {
			if !strings.Contains(err.Error(), "key id") {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
	}
	t.Error("no key id collision in 4096 secrets")
}

func TestOversizedSessionRefused(t *testing.T) {
	s := mustNew(t, secret('a'))
	sess := typical()
	sess.Capabilities = bytes.Repeat([]byte("x"), MaxTokenLen)
	if _, _, err := s.SealSession(alice, sess); err == nil {
		t.Error("a session whose token exceeds MaxTokenLen was sealed")
	}
}

func FuzzOpen(f *testing.F) {
	s := mustNew(f, secret('a'))
	// Each fuzz worker process seals its own seeds (random nonces), so a
	// token that opens is checked by what it holds: only a genuine one,
	// sealed from this session, can.
	genuine := typical()
	genuine.ID = "fuzz-fuzz-fuzz-f"
	tok, _, _ := s.SealSession(alice, genuine)
	st, _ := s.SealRequestState(alice, RequestState{Owner: "r", Handle: "h", Method: "tools/call"})
	f.Add(tok)
	f.Add(st)
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, token string) {
		sess, err := s.OpenSession(alice, token)
		if err == nil && (sess.ID != genuine.ID || sess.Owner != genuine.Owner || !bytes.Equal(sess.Capabilities, genuine.Capabilities)) {
			t.Fatalf("opened a forged token %q as %+v", token, sess)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v is not ErrInvalid", err)
		}
		if _, err := s.OpenRequestState(alice, token); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v is not ErrInvalid", err)
		}
	})
}

func BenchmarkSealSession(b *testing.B) {
	s := mustNew(b, secret('a'))
	sess := typical()
	sess.ID = NewID()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.SealSession(alice, sess); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenSession(b *testing.B) {
	s := mustNew(b, secret('a'), secret('b'), secret('c'))
	tok, _, _ := s.SealSession(alice, typical())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.OpenSession(alice, tok); err != nil {
			b.Fatal(err)
		}
	}
}
