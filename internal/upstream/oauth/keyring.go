package oauth

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zalando/go-keyring"
)

// KeyringService is the keyring service the records are kept under when
// KeyringStore.Service is "".
const KeyringService = "switchboard"

// KeyringStore keeps each record as one JSON secret in the operating
// system's keyring (github.com/zalando/go-keyring: the Secret Service over
// D-Bus on Linux, the Keychain on macOS, the Credential Manager on
// Windows), under Service and the key. Nothing is written to disk by
// Switchboard. Errors name the service and key, never the secret.
type KeyringStore struct {
	// Service is the keyring service. Default "": KeyringService.
	Service string
}

func (s KeyringStore) service() string { return cmp.Or(s.Service, KeyringService) }

// Load implements Store.
func (s KeyringStore) Load(key string) (*Record, error) {
	v, err := keyring.Get(s.service(), key)
	if errors.Is(err, keyring.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.errorf("read", key, err)
	}
	var r Record
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		// The error names a position, never the secret.
		return nil, fmt.Errorf("keyring %s/%s: the stored record is not JSON (%s)", s.service(), key, jsonErrorKind(err))
	}
	return &r, nil
}

// Save implements Store.
func (s KeyringStore) Save(key string, r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := keyring.Set(s.service(), key, string(b)); err != nil {
		return s.errorf("write", key, err)
	}
	return nil
}

// Delete implements Store.
func (s KeyringStore) Delete(key string) error {
	err := keyring.Delete(s.service(), key)
	if err == nil || errors.Is(err, keyring.ErrNotFound) {
		return nil
	}
	return s.errorf("delete", key, err)
}

// Version implements Store: a hash of the stored secret, "" when there is
// none or the keyring cannot be read. Another process's Save changes it.
func (s KeyringStore) Version(key string) string {
	v, err := keyring.Get(s.service(), key)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:16])
}

// Available reports whether the keyring can be used on this machine: nil,
// or why not (no Secret Service on the session bus, no session bus).
func (s KeyringStore) Available() error {
	_, err := keyring.Get(s.service(), ".switchboard-probe")
	if err == nil || errors.Is(err, keyring.ErrNotFound) {
		return nil
	}
	return s.errorf("reach", "", err)
}

// errorf wraps a keyring error. go-keyring's errors come from D-Bus, the
// Keychain or the Credential Manager and carry no secret.
func (s KeyringStore) errorf(op, key string, err error) error {
	where := s.service()
	if key != "" {
		where += "/" + key
	}
	return fmt.Errorf("cannot %s the OS keyring (%s): %w", op, where, err)
}

// jsonErrorKind describes a JSON decoding error by position only: a
// json.SyntaxError's message quotes a character of the input.
func jsonErrorKind(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("wrong type at %s", te.Field)
	}
	return "invalid"
}
