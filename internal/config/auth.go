package config

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Auth configures inbound authentication (`auth`). With no auth block and
// no clients, every endpoint is open.
type Auth struct {
	// Required makes every endpoint but /health and the protected-resource
	// metadata demand credentials (`required`): a static token of a client,
	// an OAuth access token, or a client certificate. Without credentials,
	// or with wrong ones, the answer is 401 with WWW-Authenticate; a client
	// outside its scope gets 403. Default false with no clients and no
	// oauth (everything open); true when either is configured.
	// Written false, requests without credentials are served unrestricted
	// while those with credentials get their client's scope.
	Required bool `yaml:"required"`

	// Resource is this gateway's canonical URL (`resource`), such as
	// https://mcp.example.com: the "resource" of the RFC 9728 metadata and
	// the audience OAuth tokens must carry (RFC 8707), with the requested
	// path appended for /{d}/mcp and /mcp/{ns} when Audiences is empty.
	// Required with `oauth`.
	Resource string `yaml:"resource"`

	// Realm is the realm of the WWW-Authenticate challenge (`realm`).
	// Default "switchboard".
	Realm string `yaml:"realm"`

	// IdentityHeader names a header sent upstream (HTTP destinations) with
	// the authenticated client's name (`identity_header`), replacing any
	// the client sent. The client's own Authorization is never forwarded
	// by it. Default "": none.
	IdentityHeader string `yaml:"identity_header"`

	// IdentityMeta names a params._meta key set, in every request sent
	// upstream (any destination type, both protocol eras), to the
	// authenticated client's name (`identity_meta`), such as
	// dev.switchboard/client; a value the client sent is replaced, and
	// removed for an anonymous caller. Default "": none.
	IdentityMeta string `yaml:"identity_meta"`

	// OAuth validates JWT access tokens (`oauth`); nil when absent.
	OAuth *OAuth `yaml:"oauth"`
}

// OAuth makes the gateway an OAuth 2.1 resource server: bearer tokens that
// are JWTs are validated against the issuer's JSON Web Key Set.
type OAuth struct {
	// Issuer is the authorization server (`issuer`); tokens' "iss" must
	// equal it. Required.
	Issuer string `yaml:"issuer"`

	// JWKSURL is where the issuer's keys are fetched (`jwks_url`).
	// Required; https unless the host is loopback.
	JWKSURL string `yaml:"jwks_url"`

	// Audiences are the accepted "aud" values (`audiences`). Default:
	// Resource and Resource plus the request's endpoint path.
	Audiences []string `yaml:"audiences"`

	// Algorithms are the accepted signature algorithms (`algorithms`).
	// Only asymmetric ones are valid ("none" and HS* never are). Default
	// RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA.
	Algorithms []string `yaml:"algorithms"`

	// RequiredScopes must all be in a token's "scope" (or "scp") claim
	// (`required_scopes`); a token lacking one gets 403 insufficient_scope.
	RequiredScopes []string `yaml:"required_scopes"`

	// ScopesSupported is advertised in the metadata (`scopes_supported`).
	// Default RequiredScopes.
	ScopesSupported []string `yaml:"scopes_supported"`

	// GroupsClaim names the claim holding the caller's groups
	// (`groups_claim`). Default "groups".
	GroupsClaim string `yaml:"groups_claim"`

	// Leeway is the clock skew allowed on exp, nbf and iat (`leeway`).
	// Default 30s.
	Leeway time.Duration `yaml:"leeway" min:"0"`

	// JWKSCacheTTL is how long fetched keys are used before they are
	// fetched again (`jwks_cache_ttl`). Default 1h.
	JWKSCacheTTL time.Duration `yaml:"jwks_cache_ttl" min:"0"`

	// JWKSMinRefresh is the least time between two fetches caused by a
	// token with an unknown key id (`jwks_min_refresh`): a flood of made-up
	// kids costs the issuer one request per interval. Default 10s.
	JWKSMinRefresh time.Duration `yaml:"jwks_min_refresh" min:"0"`
}

// Client is one caller of the gateway (`clients.NAME`): how it proves who
// it is, and what it may use.
type Client struct {
	// Name is the key in `clients`; it is what the audit log records.
	Name string

	// Tokens are the client's static bearer tokens (`tokens`), each
	// written as "sha256:" and 64 hex digits (the SHA-256 of the token), or
	// as a ${VAR} reference holding the token itself: from the secrets
	// file's entry named like the client, else the environment.
	// After loading every entry is "sha256:<hex>". Compared in constant
	// time. A token is sent as "Authorization: Bearer <token>" or
	// "X-API-Key: <token>".
	Tokens []string `yaml:"tokens" decode:"tokens"`

	// Subjects are path.Match globs of OAuth "sub" claims that are this
	// client (`subjects`).
	Subjects []string `yaml:"subjects"`

	// Groups are groups ("groups" claim) whose members are this client
	// (`groups`).
	Groups []string `yaml:"groups"`

	// Scopes are OAuth scopes whose holders are this client (`scopes`).
	// A token is the first client (in file order) one of whose subjects,
	// groups or scopes it matches.
	Scopes []string `yaml:"scopes"`

	// CertNames are TLS client-certificate names (subject CN, DNS or email
	// SANs) that are this client (`cert_names`).
	CertNames []string `yaml:"cert_names"`

	// Destinations are the servers the client reaches (`destinations`),
	// on every endpoint: /{d}/mcp and /{d}/sse, and their items inside
	// any view it may open; "*" means all. Default none, which inside
	// views means every member (package policy states the rule).
	Destinations []string `yaml:"destinations"`

	// Namespaces are the namespaces and groups the client may open at
	// /mcp/{ns} and /sse/{ns} (`namespaces`); "mcp" stands for the default
	// view at /mcp and /sse, "*" for all. They add endpoints only: a view
	// shows the client the members in its Destinations. Default none.
	Namespaces []string `yaml:"namespaces"`

	// Status lets the client read /ui, /metrics and /healthz (`status`).
	// Default false.
	Status bool `yaml:"status"`

	// Admin lets the client approve tool pins on /ui (`admin`; guards
	// pinning) and read what Status reads. Default false.
	Admin bool `yaml:"admin"`

	// Tools, Prompts and Resources filter what the client sees and may
	// call (`tools`, `prompts`, `resources`), by exposed name (resources by
	// URI), with path.Match globs: allowed when Allow is empty or matches,
	// and Deny does not.
	Tools     ToolFilter `yaml:"tools"`
	Prompts   ToolFilter `yaml:"prompts"`
	Resources ToolFilter `yaml:"resources"`

	// ReadOnly shows and allows only tools annotated readOnlyHint: true
	// (`read_only`). Default false.
	ReadOnly bool `yaml:"read_only"`

	// RateLimit bounds the client's requests (`rate_limit`); nil: none.
	RateLimit *RateLimit `yaml:"rate_limit"`
}

// RateLimit is a token bucket: Rate requests a second on average, bursts
// of up to Burst.
type RateLimit struct {
	Rate  float64 `yaml:"rate"`  // `rate`, requests per second; > 0
	Burst int     `yaml:"burst"` // `burst`; default max(1, ceil(rate))
}

// Limits bounds the traffic to each destination (`limits`).
type Limits struct {
	// Destinations holds the limits by destination name
	// (`limits.destinations`).
	Destinations map[string]*DestinationLimits `yaml:"destinations"`
}

// DestinationLimits bound one destination, all clients together.
type DestinationLimits struct {
	// RateLimit bounds its requests (`rate_limit`); nil: none.
	RateLimit *RateLimit `yaml:"rate_limit"`
	// MaxConcurrent caps its requests in flight (`max_concurrent`); more
	// wait for a slot until their deadline. Default 0: no cap.
	MaxConcurrent int `yaml:"max_concurrent" min:"0"`
	// Tools bound tools/call per tool name (`tools`), as the destination
	// names it.
	Tools map[string]*RateLimit `yaml:"tools"`
}

// TLS serves HTTPS (`tls`). The files are read again when they change.
type TLS struct {
	Cert string `yaml:"cert"` // `cert`: PEM certificate chain; required
	Key  string `yaml:"key"`  // `key`: PEM private key; required
	// ClientCA is a PEM bundle of CAs whose client certificates are
	// verified and mapped to clients by CertNames (`client_ca`). A
	// connection without a certificate may still use a token.
	ClientCA string `yaml:"client_ca"`
}

// metaKeyRE is an MCP _meta key: an optional prefix of dot-separated
// labels and a slash, then a name.
var metaKeyRE = regexp.MustCompile(`^([a-zA-Z]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*/)?[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$`)

// Default OAuth algorithms: every asymmetric JWS algorithm.
var defaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// AuthConfigured reports whether c turns authentication on.
func (c *Config) AuthConfigured() bool {
	return c.Auth.Required || len(c.Clients) > 0 || c.Auth.OAuth != nil
}

// setTokens decodes a client's tokens: "sha256:<hex>" as written, or a
// ${VAR} reference whose value (the token itself) is hashed here and
// recorded as a secret, so that it is redacted from every log. VAR is
// looked up in the secrets file's entry of the client's name first, then
// in the environment.
func (d *decoder) setTokens(p *[]string, n *yaml.Node, path string, secrets Secrets) {
	if n = resolve(n); isNull(n) {
		return
	}
	out := []string{}
	d.items(n, path, func(_ int, v *yaml.Node, ipath string) {
		v = resolve(v)
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			d.typeErr(v, ipath, "a string")
			return
		}
		if strings.Contains(v.Value, "${") {
			tok := d.interp(v, ipath, v.Value, scope{secrets: secrets, record: true})
			if d.failed[ipath] {
				return
			}
			if tok == "" {
				d.errorf(v, ipath, "the token is empty")
				return
			}
			sum := sha256.Sum256([]byte(tok))
			out = append(out, "sha256:"+hex.EncodeToString(sum[:]))
			return
		}
		h, ok := strings.CutPrefix(v.Value, "sha256:")
		if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != sha256.Size {
			d.errorf(v, ipath, `want "sha256:" and the 64 hex digits of the token's SHA-256 (printf %%s "$TOKEN" | sha256sum), or a ${VAR} holding the token; a token is never written in the file`)
			return
		}
		out = append(out, "sha256:"+strings.ToLower(h))
	})
	*p = out
}

func (o *OAuth) setDefaults() {
	*o = OAuth{GroupsClaim: "groups", Leeway: 30 * time.Second, JWKSCacheTTL: time.Hour, JWKSMinRefresh: 10 * time.Second}
}

// finishAuth fills the defaults of the auth blocks and resolves the TLS
// files against dir.
func (d *decoder) finishAuth(c *Config, dir string) {
	if o := c.Auth.OAuth; o != nil && o.Algorithms == nil {
		o.Algorithms = slices.Clone(defaultAlgorithms)
	}
	if o := c.Auth.OAuth; o != nil && o.ScopesSupported == nil {
		o.ScopesSupported = o.RequiredScopes
	}
	if !d.has("auth.required") && (c.Auth.OAuth != nil || len(c.Clients) > 0) {
		// Configuring callers means wanting them checked.
		c.Auth.Required = true
	}
	for _, cl := range c.Clients {
		defaultBurst(cl.RateLimit)
	}
	for _, dl := range c.Limits.Destinations {
		defaultBurst(dl.RateLimit)
		for _, rl := range dl.Tools {
			defaultBurst(rl)
		}
	}
	if c.TLS != nil {
		absPaths(dir, &c.TLS.Cert, &c.TLS.Key, &c.TLS.ClientCA)
	}
}

func defaultBurst(rl *RateLimit) {
	if rl != nil && rl.Burst == 0 && rl.Rate > 0 {
		rl.Burst = max(1, int(rl.Rate+0.999999))
	}
}

// validateAuth checks the auth, clients, limits and tls blocks.
func (d *decoder) validateAuth(c *Config) {
	a := c.Auth
	if a.Resource != "" {
		if u, err := url.Parse(a.Resource); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" || u.RawQuery != "" {
			d.errorAt("auth.resource", "%q is not an http(s) URL without query or fragment", a.Resource)
		}
	}
	if h := a.IdentityHeader; h != "" && !isToken(h) {
		d.errorAt("auth.identity_header", "invalid header name %q", h)
	} else if strings.EqualFold(h, "Authorization") || strings.EqualFold(h, "Cookie") {
		d.errorAt("auth.identity_header", "%q would pass credentials upstream; name a header of its own such as X-Switchboard-Client", h)
	}
	if c.AuthConfigured() {
		for _, name := range d.order["destinations"] {
			for i, h := range c.Destinations[name].ForwardHeaders {
				if strings.EqualFold(h, "Authorization") || strings.EqualFold(h, "X-Api-Key") {
					d.errorAt(index(d.paths["destinations."+name]+".forward_headers", i), "%s is the caller's credential for the gateway when auth is configured, and is never passed upstream; give the destination its own in headers", h)
				}
			}
		}
	}
	if !c.AuthConfigured() {
		for _, f := range []struct{ key, v string }{{"identity_header", a.IdentityHeader}, {"identity_meta", a.IdentityMeta}} {
			if f.v != "" {
				d.errorAt("auth."+f.key, "needs clients or auth.oauth: without authentication there is no identity to send")
			}
		}
	}
	if k := a.IdentityMeta; k != "" {
		if !metaKeyRE.MatchString(k) || strings.Contains(k, "modelcontextprotocol") || strings.HasPrefix(k, "mcp/") || strings.Contains(k, ".mcp/") {
			d.errorAt("auth.identity_meta", "invalid _meta key %q: want [prefix/]name, e.g. dev.switchboard/client (prefixes of modelcontextprotocol and mcp are reserved)", k)
		}
	}
	if a.Required && len(c.Clients) == 0 && a.OAuth == nil {
		d.errorIn("auth.required", "auth", "required with no clients and no oauth: nobody could get in")
	}
	if o := a.OAuth; o != nil {
		p := "auth.oauth"
		if a.Resource == "" {
			d.errorIn("auth", "auth.resource", "required with oauth: the canonical URL of this gateway (the tokens' audience)")
		}
		for _, f := range []struct{ key, v string }{{"issuer", o.Issuer}, {"jwks_url", o.JWKSURL}} {
			if f.v == "" {
				d.errorIn(p, p+"."+f.key, "required")
			} else if u, err := url.Parse(f.v); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopbackURLHost(u))) {
				d.errorAt(p+"."+f.key, "%q is not an https URL (http only on loopback)", f.v)
			}
		}
		if len(o.Algorithms) == 0 {
			d.errorAt(p+".algorithms", "must not be empty")
		}
		for i, alg := range o.Algorithms {
			if !slices.Contains(defaultAlgorithms, alg) {
				d.errorAt(index(p+".algorithms", i), "%q is not an accepted algorithm: want one of %s (none and HMAC are never accepted)", alg, strings.Join(defaultAlgorithms, ", "))
			}
		}
		if o.GroupsClaim == "" {
			d.errorAt(p+".groups_claim", "must not be empty")
		}
	}
	certNames := map[string]string{}
	for _, name := range d.order["clients"] {
		cl, p := c.Clients[name], d.paths["clients."+name]
		if !nameRE.MatchString(name) {
			d.errorAt(p, "invalid name: want 1 to 64 letters, digits, '_' or '-'")
		}
		if len(cl.Tokens) == 0 && len(cl.Subjects) == 0 && len(cl.Groups) == 0 && len(cl.Scopes) == 0 && len(cl.CertNames) == 0 {
			d.errorAt(p, "no credentials: give it tokens, subjects, groups, scopes or cert_names")
		}
		if (len(cl.Subjects) > 0 || len(cl.Groups) > 0 || len(cl.Scopes) > 0) && a.OAuth == nil {
			d.errorAt(p, "subjects, groups and scopes need auth.oauth")
		}
		if len(cl.CertNames) > 0 && (c.TLS == nil || c.TLS.ClientCA == "") {
			d.errorAt(p+".cert_names", "needs tls.client_ca")
		}
		for i, n := range cl.CertNames {
			if other, ok := certNames[n]; ok {
				d.errorAt(index(p+".cert_names", i), "%q is already a name of client %q", n, other)
			}
			certNames[n] = name
		}
		for i, dst := range cl.Destinations {
			if _, ok := c.Destinations[dst]; !ok && dst != "*" {
				d.errorAt(index(p+".destinations", i), "unknown destination %q", dst)
			}
		}
		for i, ns := range cl.Namespaces {
			if c.Namespaces[ns] == nil && c.Groups[ns] == nil && ns != "*" && ns != "mcp" {
				d.errorAt(index(p+".namespaces", i), "unknown namespace or group %q (\"mcp\" is the default view, \"*\" all)", ns)
			}
		}
		for _, f := range []struct {
			key string
			f   ToolFilter
		}{{"tools", cl.Tools}, {"prompts", cl.Prompts}, {"resources", cl.Resources}} {
			d.validGlobs(p+"."+f.key+".allow", f.f.Allow)
			d.validGlobs(p+"."+f.key+".deny", f.f.Deny)
		}
		d.validGlobs(p+".subjects", cl.Subjects)
		d.validRate(p+".rate_limit", cl.RateLimit)
	}
	for _, name := range d.order["limits.destinations"] {
		dl, p := c.Limits.Destinations[name], "limits.destinations."+name
		if _, ok := c.Destinations[name]; !ok {
			d.errorAt(p, "unknown destination %q", name)
		}
		d.validRate(p+".rate_limit", dl.RateLimit)
		for tool, rl := range dl.Tools {
			d.validRate(p+".tools."+tool, rl)
		}
	}
	if t := c.TLS; t != nil {
		if t.Cert == "" {
			d.errorIn("tls", "tls.cert", "required")
		}
		if t.Key == "" {
			d.errorIn("tls", "tls.key", "required")
		}
	}
}

func (d *decoder) validGlobs(p string, globs []string) {
	for i, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			d.errorAt(index(p, i), "invalid glob %q: %v", g, err)
		}
	}
}

func (d *decoder) validRate(p string, rl *RateLimit) {
	if rl == nil {
		return
	}
	if rl.Rate <= 0 {
		d.errorIn(p, p+".rate", "must be positive (requests per second)")
	}
	if rl.Burst < 0 {
		d.errorIn(p, p+".burst", "must not be negative")
	}
}

func loopbackURLHost(u *url.URL) bool {
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}
