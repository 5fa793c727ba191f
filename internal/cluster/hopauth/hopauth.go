// Package hopauth authenticates the requests one replica forwards to
// another over the cluster listener: an HMAC-SHA256 over the whole
// envelope (method, target, the MCP headers, the caller's Authorization,
// a timestamp and the body's digest), keyed from the cluster's sealing
// secrets with HKDF under a label of its own, so the hop key is never the
// sealing key. The first secret signs, all verify (rotation). A request
// whose MAC is missing, wrong, signed with an unknown key or older than
// the allowed skew is refused; which of these is not told.
//
// The signature travels in one header, Switchboard-Hop:
// v1,<unix seconds>,<key id hex>,<base64url MAC>.
package hopauth

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header carries the signature.
const Header = "Switchboard-Hop"

// signed are the headers the MAC covers, besides method, target, time
// and body: those that change what the owner does or for whom.
var signed = []string{"Authorization", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id", "Content-Type", "Accept"}

// ErrRefused is Verify's one error.
var ErrRefused = errors.New("hopauth: forwarded request refused")

// MaxSkew is how far a signature's time may be from the verifier's clock
// (the replicas' clocks are NTP-synchronised; a captured request replays
// only within this window, on the private cluster network).
const MaxSkew = 30 * time.Second

// Keys sign and verify forwarded requests; immutable, safe for
// concurrent use.
type Keys struct {
	signID byte
	keys   map[byte][]byte
	now    func() time.Time
}

// New derives the hop keys from the cluster's sealing secrets (the same
// list as internal/sealed: first signs, all verify; at least 32 bytes
// each).
func New(secrets [][]byte) (*Keys, error) {
	if len(secrets) == 0 {
		return nil, errors.New("hopauth: no secret")
	}
	k := &Keys{keys: map[byte][]byte{}, now: time.Now}
	for i, s := range secrets {
		if len(s) < 32 {
			return nil, fmt.Errorf("hopauth: secret %d is %d bytes, want at least 32", i+1, len(s))
		}
		key, kerr := hkdf.Key(sha256.New, s, nil, "switchboard cluster hop v1 hmac-sha256", 32)
		idb, ierr := hkdf.Key(sha256.New, s, nil, "switchboard cluster hop v1 key id", 1)
		if err := errors.Join(kerr, ierr); err != nil {
			return nil, err
		}
		if _, dup := k.keys[idb[0]]; dup {
			return nil, fmt.Errorf("hopauth: secret %d has the key id of an earlier one (or repeats it)", i+1)
		}
		k.keys[idb[0]] = key
		if i == 0 {
			k.signID = idb[0]
		}
	}
	return k, nil
}

// mac is the MAC of r's envelope with body at unix time ts under key.
func mac(key []byte, r *http.Request, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	field := func(s string) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	field("switchboard hop v1")
	field(r.Method)
	field(r.URL.RequestURI())
	for _, name := range signed {
		vs := r.Header.Values(name)
		field(strconv.Itoa(len(vs)))
		for _, v := range vs {
			field(v)
		}
	}
	field(strconv.FormatInt(ts, 10))
	sum := sha256.Sum256(body)
	field(string(sum[:]))
	return h.Sum(nil)
}

// Sign sets r's Switchboard-Hop header for its current headers and body
// (the whole body the request will carry; nil for none). Headers changed
// afterwards break the signature.
func (k *Keys) Sign(r *http.Request, body []byte) {
	ts := k.now().Unix()
	m := mac(k.keys[k.signID], r, ts, body)
	r.Header.Set(Header, fmt.Sprintf("v1,%d,%02x,%s", ts, k.signID, base64.RawURLEncoding.EncodeToString(m)))
}

// Verify checks r's signature over its headers and body; any failure is
// ErrRefused.
func (k *Keys) Verify(r *http.Request, body []byte) error {
	vs := r.Header.Values(Header)
	if len(vs) != 1 {
		return ErrRefused
	}
	parts := strings.Split(vs[0], ",")
	if len(parts) != 4 || parts[0] != "v1" || len(parts[2]) != 2 {
		return ErrRefused
	}
	ts, terr := strconv.ParseInt(parts[1], 10, 64)
	id, ierr := strconv.ParseUint(parts[2], 16, 8)
	got, gerr := base64.RawURLEncoding.DecodeString(parts[3])
	key := k.keys[byte(id)]
	if terr != nil || ierr != nil || gerr != nil || key == nil {
		return ErrRefused
	}
	if d := k.now().Sub(time.Unix(ts, 0)); d > MaxSkew || d < -MaxSkew || !hmac.Equal(got, mac(key, r, ts, body)) {
		return ErrRefused
	}
	return nil
}
