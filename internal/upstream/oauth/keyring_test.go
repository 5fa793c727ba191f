package oauth

import (
	"errors"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"
	"golang.org/x/oauth2"
)

// TestKeyringStore: a record saved to the keyring loads back whole; Version
// is "" without a record and changes when another writer saves; Delete
// removes it and deleting none is no error; errors never carry the secret.
// go-keyring's mock provider stands in for the OS keyring (the real one is
// TestGatewayOAuthKeyringE2E's).
func TestKeyringStore(t *testing.T) {
	keyring.MockInit()
	s := KeyringStore{}
	if r, err := s.Load("dest"); r != nil || err != nil {
		t.Fatalf("Load of none = %v, %v; want nil, nil", r, err)
	}
	if v := s.Version("dest"); v != "" {
		t.Fatalf("Version of none = %q, want \"\"", v)
	}
	rec := &Record{Resource: "https://mcp.example/mcp", ClientID: "c", TokenURL: "https://as.example/token",
		Token: &oauth2.Token{AccessToken: "at-secret", RefreshToken: "rt-secret"}}
	if err := s.Save("dest", rec); err != nil {
		t.Fatal(err)
	}
	v1 := s.Version("dest")
	if v1 == "" {
		t.Fatal("Version after Save is empty")
	}
	got, err := s.Load("dest")
	if err != nil || got == nil || got.Token.AccessToken != "at-secret" || got.Token.RefreshToken != "rt-secret" || got.Resource != rec.Resource {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	if raw, err := keyring.Get(KeyringService, "dest"); err != nil || !strings.Contains(raw, `"access_token":"at-secret"`) {
		t.Fatalf("the secret under service %q key dest = %q, %v; want the record's JSON", KeyringService, raw, err)
	}
	// Another process (another KeyringStore value) rewrites the tokens.
	other := KeyringStore{Service: KeyringService}
	rec.Token = &oauth2.Token{AccessToken: "at2", RefreshToken: "rt2"}
	if err := other.Save("dest", rec); err != nil {
		t.Fatal(err)
	}
	if v2 := s.Version("dest"); v2 == v1 || v2 == "" {
		t.Fatalf("Version after another writer's Save = %q, was %q: want a new value", v2, v1)
	}
	if s.Version("other") != "" {
		t.Fatal("Version of another key is not empty")
	}
	if err := s.Delete("dest"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("dest"); err != nil {
		t.Fatalf("Delete of none: %v", err)
	}
	if r, _ := s.Load("dest"); r != nil || s.Version("dest") != "" {
		t.Fatalf("after Delete: Load = %v, Version = %q", r, s.Version("dest"))
	}
	if err := s.Available(); err != nil {
		t.Fatalf("Available: %v", err)
	}

	// A record that is not JSON: the error names no content.
	if err := keyring.Set(KeyringService, "bad", "not-json at-secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("bad"); err == nil || strings.Contains(err.Error(), "at-secret") {
		t.Fatalf("Load of a bad record: %v; want an error without the content", err)
	}

	// A keyring that cannot be reached: every call fails with a clear error.
	keyring.MockInitWithError(errors.New("no Secret Service on the session bus"))
	if err := s.Available(); err == nil || !strings.Contains(err.Error(), "Secret Service") {
		t.Fatalf("Available = %v, want the keyring's error", err)
	}
	if err := s.Save("dest", rec); err == nil || strings.Contains(err.Error(), "at2") {
		t.Fatalf("Save = %v, want an error without the secret", err)
	}
	if _, err := s.Load("dest"); err == nil {
		t.Fatal("Load succeeded without a keyring")
	}
	if s.Version("dest") != "" {
		t.Fatal("Version without a keyring is not empty")
	}
}
