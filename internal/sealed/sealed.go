// Package sealed makes the opaque tokens a cluster of replicas hands to
// clients: Mcp-Session-Id values and MRTR requestState. A token is
// AES-256-GCM sealed (stdlib, random 12-byte nonce) under a key derived
// once with HKDF-SHA256 from a configured secret, so any replica holding
// the secrets can open what another sealed, and no client can read or
// forge one.
//
// Wire form: base64url (no padding) of keyID ‖ nonce ‖ ciphertext ‖ tag.
// The clear one-byte key id picks the opening key without trial
// decryption. The associated data binds the token's kind, its destination
// and the principal (issuer, subject) it was sealed for, so a session id
// cannot be replayed as a requestState, at another destination or by
// another caller. Keys rotate: the first configured secret seals, every
// configured secret opens. Every failure to open is ErrInvalid and says
// nothing more (a front answers it 404, as for an unknown session).
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// MinSecretLen is the shortest secret accepted, in bytes: a sealing
// secret must be random (for example `openssl rand -base64 48`), not a
// password.
const MinSecretLen = 32

// MaxTokenLen bounds the length of a token Open considers; longer input
// is ErrInvalid without being decoded.
const MaxTokenLen = 4096

// ErrInvalid is the one error of Open: the token is malformed, sealed
// under a key not configured (rotated out), altered, of another kind, or
// bound to another destination or principal, or has expired. Which of
// these is deliberately not told.
var ErrInvalid = errors.New("sealed: invalid token")

// Kind separates the uses of tokens: it is part of the associated data,
// so a token of one kind never opens as another.
type Kind byte

const (
	KindSession      Kind = 1 // an Mcp-Session-Id
	KindRequestState Kind = 2 // an MRTR requestState
)

// Binding is what a token is sealed for, given again to open it; it is
// authenticated, not stored in the token. The zero Binding is valid: a
// token sealed with it opens only with the zero Binding (no destination,
// no authentication).
type Binding struct {
	Destination string // the destination or view the token belongs to
	Issuer      string // the authenticated principal's issuer ("" without auth)
	Subject     string // its subject ("" without auth)
}

// Sealer seals with its first key and opens with any of its keys. It is
// safe for concurrent use and immutable once made.
type Sealer struct {
	sealID byte
	keys   [256]cipher.AEAD // by key id; nil: no such key
	now    func() time.Time
}

// New derives a Sealer's keys from secrets, the first of which seals
// (rotation: add the new secret first, keep the old ones after it until
// the tokens they sealed have expired, then drop them). Each secret must
// be at least MinSecretLen bytes, and two secrets must not share a key id
// (a 1-in-256 chance for two random secrets: replace one).
func New(secrets [][]byte) (*Sealer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("sealed: no secret")
	}
	s := &Sealer{now: time.Now}
	for i, secret := range secrets {
		if len(secret) < MinSecretLen {
			return nil, fmt.Errorf("sealed: secret %d is %d bytes, want at least %d random bytes", i+1, len(secret), MinSecretLen)
		}
		key, kerr := hkdf.Key(sha256.New, secret, nil, "switchboard sealed v1 aes-256-gcm", 32)
		idb, ierr := hkdf.Key(sha256.New, secret, nil, "switchboard sealed v1 key id", 1)
		if err := errors.Join(kerr, ierr); err != nil {
			return nil, fmt.Errorf("sealed: secret %d: %w", i+1, err)
		}
		id := idb[0]
		if s.keys[id] != nil {
			return nil, fmt.Errorf("sealed: secret %d has the key id of an earlier one (or repeats it); replace it with another random secret", i+1)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, err
		}
		s.keys[id] = aead
		if i == 0 {
			s.sealID = id
		}
	}
	return s, nil
}

// KeyID returns the id of the sealing key (shown in tokens' first byte;
// not secret).
func (s *Sealer) KeyID() byte { return s.sealID }

// aad is the associated data of a token of kind k under key id sealed
// for b: a label, the kind, the key id and the binding's fields, each
// length-prefixed so that no two bindings give the same bytes.
func aad(k Kind, id byte, b Binding) []byte {
	out := make([]byte, 0, 32+len(b.Destination)+len(b.Issuer)+len(b.Subject))
	out = append(out, "switchboard sealed v1"...)
	out = append(out, byte(k), id)
	for _, f := range []string{b.Destination, b.Issuer, b.Subject} {
		out = appendString(out, f)
	}
	return out
}

// seal seals plaintext as a token of kind k for b.
func (s *Sealer) seal(k Kind, b Binding, plaintext []byte) string {
	aead := s.keys[s.sealID]
	raw := make([]byte, 1, 1+aead.NonceSize()+len(plaintext)+aead.Overhead())
	raw[0] = s.sealID
	raw = aead.Seal(raw, nil, plaintext, aad(k, s.sealID, b))
	return base64URL.EncodeToString(raw)
}

// open returns the plaintext of token, sealed as kind k for b.
func (s *Sealer) open(k Kind, b Binding, token string) ([]byte, error) {
	if len(token) < 2 || len(token) > MaxTokenLen {
		return nil, ErrInvalid
	}
	for i := 0; i < len(token); i++ { // the decoder would skip CR and LF
		if c := token[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, ErrInvalid
		}
	}
	raw, err := base64URL.DecodeString(token)
	if err != nil || len(raw) == 0 {
		return nil, ErrInvalid
	}
	aead := s.keys[raw[0]]
	if aead == nil || len(raw) < 1+aead.NonceSize()+aead.Overhead() {
		return nil, ErrInvalid
	}
	pt, err := aead.Open(nil, nil, raw[1:], aad(k, raw[0], b))
	if err != nil {
		return nil, ErrInvalid
	}
	return pt, nil
}

// base64URL is the tokens' alphabet: visible ASCII, safe in headers and
// URLs, strict (no padding, no stray bits) so that, with open's check
// for characters outside the alphabet, a token has one spelling.
var base64URL = base64.RawURLEncoding.Strict()
