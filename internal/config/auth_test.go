package config

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"
	"time"
)

// The auth keys of full.good.yaml, as TestFullConfig expects them.
var (
	fullAuth = Auth{Required: true, Resource: "https://gw.example.com", Realm: "switchboard-test", IdentityHeader: "X-Switchboard-Client", IdentityMeta: "dev.switchboard/client",
		OAuth: &OAuth{Issuer: "https://issuer.example.com", JWKSURL: "https://issuer.example.com/.well-known/jwks.json",
			Audiences: []string{"https://gw.example.com/mcp"}, Algorithms: []string{"RS256", "ES256"},
			RequiredScopes: []string{"mcp"}, ScopesSupported: []string{"mcp", "mcp:admin"}, GroupsClaim: "roles",
			Leeway: time.Minute, JWKSCacheTTL: 30 * time.Minute, JWKSMinRefresh: 30 * time.Second}}
	fullClients = map[string]*Client{
		"ci": {Name: "ci",
			Tokens:       []string{"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "sha256:" + sha256Hex("api-token-value")},
			Destinations: []string{"github", "context7"}, Namespaces: []string{"dev", "mcp"}, Status: true,
			Tools: ToolFilter{Allow: []string{"*"}, Deny: []string{"*delete*"}}, Prompts: ToolFilter{Deny: []string{"secret*"}},
			Resources: ToolFilter{Allow: []string{"file:///srv/*"}}, ReadOnly: true, RateLimit: &RateLimit{Rate: 5, Burst: 10}},
		"people": {Name: "people", Subjects: []string{"user-*"}, Groups: []string{"mcp-users"}, Scopes: []string{"mcp:admin"},
			CertNames: []string{"alice.example.com"}, Namespaces: []string{"*"}},
	}
	fullLimits = Limits{Destinations: map[string]*DestinationLimits{
		"github": {RateLimit: &RateLimit{Rate: 20, Burst: 20}, MaxConcurrent: 4, Tools: map[string]*RateLimit{"create_issue": {Rate: 0.5, Burst: 1}}},
	}}
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func init() {
	expectedErrors = append(expectedErrors, []struct{ filename, errMsg string }{
		{"auth_token_plain.bad.yaml", `:4: clients.ci.tokens[0]: want "sha256:" and the 64 hex digits of the token's SHA-256`},
		{"auth_token_short_hash.bad.yaml", `:4: clients.ci.tokens[0]: want "sha256:"`},
		{"auth_token_empty.bad.yaml", `clients.ci.tokens[0]: the token is empty`},
		{"auth_client_no_credentials.bad.yaml", `:2: clients.ci: no credentials: give it tokens, subjects, groups, scopes or cert_names`},
		{"auth_client_unknown_dest.bad.yaml", `clients.ci.destinations[0]: unknown destination "nope"`},
		{"auth_client_unknown_ns.bad.yaml", `clients.ci.namespaces[0]: unknown namespace or group "nope"`},
		{"auth_client_unknown_key.bad.yaml", `clients.ci: unknown key "token"`},
		{"auth_client_name.bad.yaml", `clients.a b: invalid name`},
		{"auth_client_glob.bad.yaml", `clients.ci.tools.deny[0]: invalid glob "[x"`},
		{"auth_client_subjects_no_oauth.bad.yaml", `clients.ci: subjects, groups and scopes need auth.oauth`},
		{"auth_client_cert_no_ca.bad.yaml", `clients.ci.cert_names: needs tls.client_ca`},
		{"auth_cert_name_dup.bad.yaml", `clients.b.cert_names[0]: "x.example.com" is already a name of client "a"`},
		{"auth_required_nobody.bad.yaml", `auth: required with no clients and no oauth: nobody could get in`},
		{"auth_resource.bad.yaml", `auth.resource: "gw.example.com" is not an http(s) URL`},
		{"auth_identity_header.bad.yaml", `auth.identity_header: "Authorization" would pass credentials upstream`},
		{"auth_identity_header_name.bad.yaml", `auth.identity_header: invalid header name "X Client"`},
		{"auth_identity_meta.bad.yaml", `auth.identity_meta: invalid _meta key "io.modelcontextprotocol/client"`},
		{"auth_identity_meta_syntax.bad.yaml", `auth.identity_meta: invalid _meta key "a b"`},
		{"auth_identity_no_auth.bad.yaml", `auth.identity_header: needs clients or auth.oauth`},
		{"auth_unknown_key.bad.yaml", `auth: unknown key "requried"`},
		{"auth_forward_authorization.bad.yaml", `destinations.gh.forward_headers[0]: Authorization is the caller's credential for the gateway`},
		{"oauth_no_resource.bad.yaml", `auth.resource: required with oauth`},
		{"oauth_no_issuer.bad.yaml", `auth.oauth.issuer: required`},
		{"oauth_issuer_http.bad.yaml", `auth.oauth.issuer: "http://issuer.example.com" is not an https URL (http only on loopback)`},
		{"oauth_no_jwks.bad.yaml", `auth.oauth.jwks_url: required`},
		{"oauth_jwks_url.bad.yaml", `auth.oauth.jwks_url: "ftp://issuer.example.com/jwks" is not an https URL`},
		{"oauth_jwks_url_127_name.bad.yaml", `auth.oauth.jwks_url: "http://127.evil.example/jwks" is not an https URL (http only on loopback)`},
		{"oauth_alg_none.bad.yaml", `auth.oauth.algorithms[0]: "none" is not an accepted algorithm`},
		{"oauth_alg_hmac.bad.yaml", `auth.oauth.algorithms[1]: "HS256" is not an accepted algorithm`},
		{"oauth_algs_empty.bad.yaml", `auth.oauth.algorithms: must not be empty`},
		{"oauth_negative_leeway.bad.yaml", `auth.oauth.leeway: must not be negative`},
		{"oauth_groups_claim.bad.yaml", `auth.oauth.groups_claim: must not be empty`},
		{"oauth_unknown_key.bad.yaml", `auth.oauth: unknown key "jwks"`},
		{"rate_limit_zero.bad.yaml", `clients.ci.rate_limit.rate: must be positive (requests per second)`},
		{"rate_limit_burst.bad.yaml", `clients.ci.rate_limit.burst: must not be negative`},
		{"rate_limit_unknown_key.bad.yaml", `clients.ci.rate_limit: unknown key "per_second"`},
		{"limits_unknown_dest.bad.yaml", `limits.destinations.nope: unknown destination "nope"`},
		{"limits_concurrency.bad.yaml", `limits.destinations.fs.max_concurrent: must not be negative`},
		{"limits_tool_rate.bad.yaml", `limits.destinations.fs.tools.write.rate: must be positive`},
		{"limits_unknown_key.bad.yaml", `limits: unknown key "clients"`},
		{"tls_no_key.bad.yaml", `tls.key: required`},
		{"tls_unknown_key.bad.yaml", `tls: unknown key "ca"`},
	}...)
}

// TestClientTokenFromSecrets: a client's ${VAR} comes from the secrets
// file's entry of its name, is stored hashed, and is redacted.
func TestClientTokenFromSecrets(t *testing.T) {
	c, err := testLoader(nil).load("testdata/clientsecrets/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Clients["alice"].Tokens, []string{"sha256:" + sha256Hex("alice-token-from-the-secrets-file")}; !slices.Equal(got, want) {
		t.Errorf("tokens = %v, want %v", got, want)
	}
	if !slices.Contains(c.SecretValues(), "alice-token-from-the-secrets-file") {
		t.Errorf("the token is not among the values redacted from logs")
	}
}
