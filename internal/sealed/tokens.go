package sealed

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// payloadVersion is the first byte of every plaintext; a token of another
// version does not open.
const payloadVersion = 1

// Session is what a session id carries: enough for any replica to find
// the session's owner and, when the owner is gone, to adopt the session
// by replaying the client's handshake to its own upstream.
type Session struct {
	// ID names the session inside the cluster (Redis keys, logs): 16
	// base64url characters, random. SealSession fills it when empty.
	ID string
	// Owner is the id of the replica that holds the session's upstream.
	Owner string
	// Protocol is the negotiated protocol version ("2025-11-25").
	Protocol string
	// ClientName and ClientVersion are the initialize request's clientInfo.
	ClientName, ClientVersion string
	// Capabilities is the client's capabilities object as compact JSON
	// (nil: none sent).
	Capabilities []byte
	// Expires is when the id stops opening, to the second; zero: never.
	Expires time.Time
}

// RequestState is what an MRTR requestState carries: the replica that
// parked the call, the parked call's handle there, and what the retry must
// repeat. Single use is the owner's to enforce (it drops the parked call
// when the retry takes it).
type RequestState struct {
	Owner  string // the replica holding the parked call
	Handle string // the parked call's key at the owner
	Method string // the request's method ("tools/call")
	Name   string // the tool's or prompt's name, or the resource's URI
	// Expires is when the state stops opening, to the second; zero: never.
	Expires time.Time
}

// NewID returns a random session id for Session.ID.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return encodeID(b[:])
}

// SealSession seals sess for b, giving it an ID first if it has none, and
// returns the token and the session as sealed.
func (s *Sealer) SealSession(b Binding, sess Session) (string, Session, error) {
	if sess.ID == "" {
		sess.ID = NewID()
	}
	tok := s.sealFields(KindSession, b, sess.Expires, sess.ID, sess.Owner, sess.Protocol, sess.ClientName, sess.ClientVersion, string(sess.Capabilities))
	if len(tok) > MaxTokenLen {
		return "", Session{}, fmt.Errorf("sealed: session token would be %d characters, more than %d (capabilities of %d bytes)", len(tok), MaxTokenLen, len(sess.Capabilities))
	}
	return tok, sess, nil
}

// OpenSession opens a session token sealed for b; any failure, expiry
// included, is ErrInvalid.
func (s *Sealer) OpenSession(b Binding, token string) (Session, error) {
	var sess Session
	var caps string
	if err := s.openFields(KindSession, b, token, &sess.Expires, &sess.ID, &sess.Owner, &sess.Protocol, &sess.ClientName, &sess.ClientVersion, &caps); err != nil {
		return Session{}, err
	}
	if caps != "" {
		sess.Capabilities = []byte(caps)
	}
	return sess, nil
}

// SealRequestState seals st for b.
func (s *Sealer) SealRequestState(b Binding, st RequestState) (string, error) {
	tok := s.sealFields(KindRequestState, b, st.Expires, st.Owner, st.Handle, st.Method, st.Name)
	if len(tok) > MaxTokenLen {
		return "", fmt.Errorf("sealed: requestState would be %d characters, more than %d", len(tok), MaxTokenLen)
	}
	return tok, nil
}

// OpenRequestState opens a requestState sealed for b; any failure, expiry
// included, is ErrInvalid.
func (s *Sealer) OpenRequestState(b Binding, token string) (RequestState, error) {
	var st RequestState
	if err := s.openFields(KindRequestState, b, token, &st.Expires, &st.Owner, &st.Handle, &st.Method, &st.Name); err != nil {
		return RequestState{}, err
	}
	return st, nil
}

// sealFields seals a plaintext of fields and expires as a token of kind k
// for b.
func (s *Sealer) sealFields(k Kind, b Binding, expires time.Time, fields ...string) string {
	pt := []byte{payloadVersion}
	for _, f := range fields {
		pt = appendString(pt, f)
	}
	return s.seal(k, b, appendTime(pt, expires))
}

// openFields opens token, sealed by sealFields as kind k for b, into
// fields and expires; any failure, expiry included, is ErrInvalid.
func (s *Sealer) openFields(k Kind, b Binding, token string, expires *time.Time, fields ...*string) error {
	pt, err := s.open(k, b, token)
	if err != nil {
		return err
	}
	r := reader{b: pt}
	if r.byte() != payloadVersion {
		return ErrInvalid
	}
	for _, f := range fields {
		*f = r.string()
	}
	*expires = r.time()
	if r.err != nil || len(r.b) != 0 || s.expired(*expires) {
		return ErrInvalid
	}
	return nil
}

func (s *Sealer) expired(t time.Time) bool { return !t.IsZero() && !s.now().Before(t) }

// The plaintext codec: a string is its uvarint length and its bytes, a
// time its Unix seconds as a uvarint (0: zero time).

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() || t.Unix() <= 0 {
		return binary.AppendUvarint(b, 0)
	}
	// Rounded up to the second: a token never expires before its time.
	secs := t.Unix()
	if t.Nanosecond() > 0 {
		secs++
	}
	return binary.AppendUvarint(b, uint64(secs))
}

var errShort = errors.New("short")

// reader decodes a plaintext; its first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errShort
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) time() time.Time {
	v := r.uvarint()
	if r.err != nil || v == 0 {
		return time.Time{}
	}
	if v > 1<<40 {
		r.err = errShort
		return time.Time{}
	}
	return time.Unix(int64(v), 0)
}

func encodeID(b []byte) string { return base64URL.EncodeToString(b) }
