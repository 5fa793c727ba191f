// Package auth is Switchboard's inbound authentication and authorization:
// who a request comes from (a configured client presenting a static token,
// an OAuth 2.1 access token, or a TLS client certificate). What a caller
// may reach is decided by package policy (policy.Access), from the
// client's config.
//
// Contracts:
//   - An Authenticator is built from one config generation and is
//     immutable; Authenticate never logs and never returns or stores a
//     token: identities carry names only, errors descriptions only.
//   - Static tokens are held as SHA-256 digests and compared in constant
//     time against every digest (no early exit on a match).
//   - OAuth tokens are JWTs verified with go-jose against the issuer's JWKS
//     (fetched, cached, refetched on an unknown key id at most once per
//     interval): an allowlisted asymmetric algorithm, iss, aud (this
//     resource, RFC 8707), exp (required), nbf. "none" and HMAC are never
//     accepted. A token verified before skips the signature check while
//     its key is still in the current key set (at most 4096 remembered, by
//     SHA-256); its claims are checked on every request.
//   - With no clients and no oauth configured, Enabled is false and the
//     gateway serves everyone.
package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Identity is an authenticated caller.
type Identity struct {
	// Client is the configured client the caller is; nil for an OAuth
	// caller that no client's subjects, groups or scopes match (it is
	// authenticated, and may use nothing).
	Client *Client
	// Method is how it authenticated: "token", "oauth" or "cert".
	Method string
	// Subject is the OAuth "sub" claim or the certificate's name.
	Subject string
	Scopes  []string
	Groups  []string
}

// Name is what the logs record: the client's name, or "sub:" and the
// subject of an OAuth caller that is no client.
func (id *Identity) Name() string {
	if id == nil {
		return ""
	}
	if id.Client != nil {
		return id.Client.Name
	}
	return "sub:" + id.Subject
}

type ctxKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity of the request, or nil when
// authentication is off (or the route needs none).
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}

// ClientSpec is a configured client: its credentials and what maps an
// OAuth caller to it. Nil lists are empty.
type ClientSpec struct {
	// Name is the client's name, as policy and the audit log know it.
	Name string
	// Tokens are the SHA-256 hashes of its static tokens ("sha256:" and
	// 64 hex digits); other entries match nothing.
	Tokens []string
	// CertNames are the TLS client-certificate names that are this client.
	CertNames []string
	// Subjects, Groups and Scopes are patterns ("*" matches any run) of an
	// OAuth token's sub, groups and scopes: a token matching any of them is
	// this client's.
	Subjects, Groups, Scopes []string
	// Status lets the client read /ui, /metrics and /healthz.
	Status bool
	// Admin lets the client approve tool pins on /ui; it implies Status.
	Admin bool
}

// Client is a configured client, compiled.
type Client struct {
	Name string
	// Spec is what the client was made from.
	Spec   ClientSpec
	hashes [][sha256.Size]byte
}

// MayReadStatus reports whether the client may read /ui, /metrics and
// /healthz.
func (c *Client) MayReadStatus() bool { return c != nil && (c.Spec.Status || c.Spec.Admin) }

// MayApprove reports whether the client may approve tool pins on /ui.
func (c *Client) MayApprove() bool { return c != nil && c.Spec.Admin }

// Failure is a request that cannot be served as it came: a 401 (no or bad
// credentials), 403 (insufficient scope) or 503 (the issuer's keys cannot
// be fetched). Description is safe to show and log.
type Failure struct {
	Status      int
	Code        string // RFC 6750 error code: "", invalid_request, invalid_token, insufficient_scope
	Description string
	Scope       string // the scopes needed, for insufficient_scope
}

// Authenticator checks the credentials of requests for one config
// generation.
type Authenticator struct {
	required bool
	realm    string
	resource string // canonical URL, no trailing slash
	clients  []*Client
	byCert   map[string]*Client
	jwt      *jwtValidator
	oauth    *OAuth
}

// OAuth is how OAuth 2.1 access tokens (JWTs) are verified.
type OAuth struct {
	// Issuer is the authorization server: the tokens' iss, and the server
	// the RFC 9728 metadata names. Required.
	Issuer string
	// JWKSURL is where the issuer's key set is fetched. Required.
	JWKSURL string
	// Audiences are the aud values accepted besides the resource's own;
	// nil accepts only those.
	Audiences []string
	// Algorithms are the JWS algorithms accepted; nil means none.
	Algorithms []string
	// RequiredScopes must all be in a token (403 insufficient_scope
	// otherwise); nil requires none.
	RequiredScopes []string
	// ScopesSupported are announced in the metadata and challenges; nil
	// announces none.
	ScopesSupported []string
	// GroupsClaim is the claim holding the caller's groups; "" means none.
	GroupsClaim string
	// Leeway is the clock skew allowed on exp, nbf and iat; zero allows
	// none.
	Leeway time.Duration
	// JWKSCacheTTL is how long a fetched key set is used, and
	// JWKSMinRefresh the least time between two fetches (an unknown kid
	// fetches again); zero values are the key set's defaults.
	JWKSCacheTTL, JWKSMinRefresh time.Duration
}

// Options configure an Authenticator.
type Options struct {
	// Required refuses a request without credentials (401); false serves
	// it anonymously.
	Required bool
	// Realm is the realm of the challenges; "" names none.
	Realm string
	// Resource is the gateway's canonical URL, the audience of its tokens
	// and the resource of its RFC 9728 metadata.
	Resource string
	// Clients are the configured clients, in the order that decides which
	// one an OAuth token maps to (the config file's); nil means none.
	Clients []ClientSpec
	// OAuth verifies OAuth access tokens; nil accepts none.
	OAuth *OAuth

	// HTTPClient fetches the issuer's key set; nil means one with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock tokens are checked against; nil means time.Now.
	Now func() time.Time
}

// New compiles the options' clients and OAuth settings.
func New(opts Options) *Authenticator {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	hc := cmp.Or(opts.HTTPClient, &http.Client{Timeout: 10 * time.Second})
	a := &Authenticator{required: opts.Required, realm: opts.Realm,
		resource: strings.TrimSuffix(opts.Resource, "/"), byCert: map[string]*Client{}, oauth: opts.OAuth}
	for _, cc := range opts.Clients {
		c := &Client{Name: cc.Name, Spec: cc}
		for _, t := range cc.Tokens {
			var h [sha256.Size]byte
			if b, err := hex.DecodeString(strings.TrimPrefix(t, "sha256:")); err == nil && len(b) == sha256.Size {
				copy(h[:], b)
				c.hashes = append(c.hashes, h)
			}
		}
		for _, cn := range cc.CertNames {
			a.byCert[cn] = c
		}
		a.clients = append(a.clients, c)
	}
	if o := opts.OAuth; o != nil {
		algs := make([]jose.SignatureAlgorithm, 0, len(o.Algorithms))
		for _, alg := range o.Algorithms {
			algs = append(algs, jose.SignatureAlgorithm(alg))
		}
		a.jwt = &jwtValidator{issuer: o.Issuer, audiences: o.Audiences, algs: algs, leeway: o.Leeway,
			groupsClaim: o.GroupsClaim, now: now,
			keys: &keySet{url: o.JWKSURL, client: hc, ttl: o.JWKSCacheTTL, minRefresh: o.JWKSMinRefresh, now: now}}
	}
	return a
}

// OAuth reports whether OAuth tokens are accepted (and the RFC 9728
// metadata is served).
func (a *Authenticator) OAuth() bool { return a != nil && a.jwt != nil }

// Authenticate returns the caller of r. A nil identity with a nil failure
// means an anonymous request where credentials are optional. endpoint is
// the path of the MCP endpoint the request is for ("/fs/mcp", "/mcp/dev";
// "" for other routes): a token whose audience is the gateway's resource
// plus that path is accepted as well as one for the resource itself.
func (a *Authenticator) Authenticate(r *http.Request, endpoint string) (*Identity, *Failure) {
	cred := credential(r)
	if cred.Malformed != "" {
		return nil, &Failure{Status: http.StatusUnauthorized, Code: "invalid_request", Description: cred.Malformed}
	}
	if cred.Token == "" {
		if id := a.certIdentity(r); id != nil {
			return id, nil
		}
		if !a.required {
			return nil, nil
		}
		return nil, &Failure{Status: http.StatusUnauthorized, Description: "credentials required"}
	}
	if c := a.staticClient(cred.Token); c != nil {
		return &Identity{Client: c, Method: "token"}, nil
	}
	if a.jwt == nil || !looksLikeJWT(cred.Token) {
		return nil, &Failure{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "unknown token"}
	}
	resources := []string{a.resource}
	if endpoint != "" {
		resources = append(resources, a.resource+endpoint)
	}
	sub, scopes, groups, err := a.jwt.validate(r.Context(), cred.Token, resources)
	if err != nil {
		var fe *fetchError
		if errors.As(err, &fe) {
			return nil, &Failure{Status: http.StatusServiceUnavailable, Description: "the authorization server's keys are unavailable"}
		}
		return nil, &Failure{Status: http.StatusUnauthorized, Code: "invalid_token", Description: err.Error()}
	}
	var missing []string
	for _, s := range a.oauth.RequiredScopes {
		if !slices.Contains(scopes, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return nil, &Failure{Status: http.StatusForbidden, Code: "insufficient_scope",
			Description: "the token lacks scope " + strings.Join(missing, ", "), Scope: strings.Join(a.oauth.RequiredScopes, " ")}
	}
	return &Identity{Client: a.oauthClient(sub, scopes, groups), Method: "oauth", Subject: sub, Scopes: scopes, Groups: groups}, nil
}

// staticClient returns the client one of whose tokens tok is. Every digest
// is compared, in constant time.
func (a *Authenticator) staticClient(tok string) *Client {
	sum := sha256.Sum256([]byte(tok))
	var found *Client
	for _, c := range a.clients {
		for i := range c.hashes {
			if subtle.ConstantTimeCompare(sum[:], c.hashes[i][:]) == 1 && found == nil {
				found = c
			}
		}
	}
	return found
}

// oauthClient maps a token's claims to the first client (file order) one
// of whose subjects, groups or scopes it matches.
func (a *Authenticator) oauthClient(sub string, scopes, groups []string) *Client {
	matchesSub := func(pattern string) bool {
		ok, _ := path.Match(pattern, sub)
		return ok
	}
	for _, c := range a.clients {
		if slices.ContainsFunc(c.Spec.Subjects, matchesSub) ||
			slices.ContainsFunc(c.Spec.Groups, func(g string) bool { return slices.Contains(groups, g) }) ||
			slices.ContainsFunc(c.Spec.Scopes, func(s string) bool { return slices.Contains(scopes, s) }) {
			return c
		}
	}
	return nil
}

// certIdentity maps a verified TLS client certificate to a client by its
// subject CN, DNS or email SANs.
func (a *Authenticator) certIdentity(r *http.Request) *Identity {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(a.byCert) == 0 {
		return nil
	}
	leaf := r.TLS.VerifiedChains[0][0]
	for _, n := range certNames(leaf) {
		if c := a.byCert[n]; c != nil {
			return &Identity{Client: c, Method: "cert", Subject: n}
		}
	}
	return nil
}

func certNames(c *x509.Certificate) []string {
	names := append([]string{}, c.DNSNames...)
	names = append(names, c.EmailAddresses...)
	if c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	return names
}

// MetadataPath is the RFC 9728 well-known path; the protected resource's
// own path follows it.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Challenge writes the answer to a failure: its status, a JSON-RPC error
// body and, for 401 and 403, a Bearer challenge naming the realm, the
// error and (with OAuth) the resource metadata for endpoint.
func (a *Authenticator) Challenge(w http.ResponseWriter, f *Failure, endpoint string) {
	if f.Status == http.StatusUnauthorized || f.Code == "insufficient_scope" {
		w.Header().Set("WWW-Authenticate", a.challenge(f, endpoint))
	}
	writeError(w, f.Status, f.Description)
}

func (a *Authenticator) challenge(f *Failure, endpoint string) string {
	var b strings.Builder
	b.WriteString(`Bearer realm=`)
	b.WriteString(quote(a.realm))
	if a.jwt != nil {
		b.WriteString(`, resource_metadata=`)
		b.WriteString(quote(a.resource + MetadataPath + endpoint))
	}
	if f.Code != "" {
		fmt.Fprintf(&b, `, error=%s, error_description=%s`, quote(f.Code), quote(f.Description))
	}
	if f.Scope != "" {
		fmt.Fprintf(&b, `, scope=%s`, quote(f.Scope))
	} else if a.jwt != nil && len(a.oauth.ScopesSupported) > 0 && f.Code == "" {
		fmt.Fprintf(&b, `, scope=%s`, quote(strings.Join(a.oauth.ScopesSupported, " ")))
	}
	return b.String()
}

// quote makes a quoted-string: '"' and '\' escaped, control characters
// dropped.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Forbid writes a 403 for an authenticated caller outside its scope.
func Forbid(w http.ResponseWriter, who *Identity, what string) {
	writeError(w, http.StatusForbidden, fmt.Sprintf("client %s may not use %s", who.Name(), what))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":%s}}`+"\n", jsonString(msg))
}
