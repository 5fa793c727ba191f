package config

import (
	"net"
	"net/url"
	"strings"
)

// Grants of an upstream oauth block.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Token stores of an upstream oauth block (token_store).
const (
	TokenStoreFile    = "file"
	TokenStoreKeyring = "keyring"
)

// UpstreamOAuth makes Switchboard an OAuth 2.1 client of a streamable_http
// or sse destination (`oauth` in a destination): the gateway holds its own
// tokens for the server (one identity per destination, shared by every
// session), found by discovery from the server's 401. The inbound client's
// token is never passed on. Every field may use ${VAR}, from the
// destination's secrets first.
type UpstreamOAuth struct {
	// Grant is GrantAuthorizationCode (`grant`, the default ""): a person
	// logs in once with `switchboard auth login NAME`; or
	// GrantClientCredentials: machine to machine, with ClientID and
	// ClientSecret, no login.
	Grant string `yaml:"grant"`

	// ClientID is a pre-registered client (`client_id`). Default "": a
	// client-ID metadata document when ClientMetadataURL is set and the
	// server supports them, else dynamic client registration (RFC 7591)
	// at login. Required for GrantClientCredentials.
	ClientID string `yaml:"client_id"`

	// ClientSecret is ClientID's secret (`client_secret`); best given as
	// ${VAR}. Default "": a public client. Required for
	// GrantClientCredentials. Never logged.
	ClientSecret string `yaml:"client_secret"`

	// ClientKeyFile is a PEM private key file (EC, RSA or Ed25519) with
	// which a GrantClientCredentials client authenticates instead of a
	// secret (`client_key_file`): private_key_jwt (RFC 7523), a new signed
	// assertion per token request. Relative paths are resolved against the
	// configuration file's directory. Default "": ClientSecret.
	ClientKeyFile string `yaml:"client_key_file"`

	// ClientMetadataURL is the https URL (with a path) of this client's
	// metadata document (`client_metadata_url`), its client_id where the
	// authorization server supports them. Default "": none.
	ClientMetadataURL string `yaml:"client_metadata_url"`

	// RedirectURL is the login's redirect (`redirect_url`): an http URL
	// on a loopback address, such as http://127.0.0.1:8976/callback (what
	// a pre-registered client was registered with). Default "":
	// http://127.0.0.1:<a free port>/callback.
	RedirectURL string `yaml:"redirect_url"`

	// CallbackURL lets the gateway start a login by itself
	// (`callback_url`, grant authorization_code only): the URL at which a
	// browser reaches this gateway's /oauth/callback/NAME (NAME the
	// destination's), such as https://gw.example.com/oauth/callback/linear
	// or http://127.0.0.1:8080/oauth/callback/linear; it is the redirect
	// URI of those logins (register it with a pre-registered client). When
	// a call finds no usable token, or the server asks for more scope or
	// names a new authorization server, the gateway starts a login and
	// hands its URL to the client (MCP URL elicitation, -32042, or an
	// error naming the URL); the client's person opens it and retries.
	// Default "": the gateway never starts a login; the destination turns
	// needs_login until `switchboard auth login NAME`.
	CallbackURL string `yaml:"callback_url"`

	// TokenDir is the directory of the token files (`token_dir`), one
	// NAME.json of mode 0600 per destination. Default "":
	// $SWITCHBOARD_STATE_DIR/oauth, else $XDG_STATE_HOME/switchboard/oauth,
	// else ~/.local/state/switchboard/oauth. Relative paths are resolved
	// against the configuration file's directory.
	TokenDir string `yaml:"token_dir"`

	// TokenStore is where the tokens are kept (`token_store`):
	// TokenStoreFile (the default ""), a file under TokenDir; or
	// TokenStoreKeyring, the operating system's keyring (the Secret
	// Service on Linux, the Keychain on macOS, the Credential Manager on
	// Windows), nothing on disk. Where the keyring cannot be reached the
	// destination is needs_login; it never falls back to a file.
	TokenStore string `yaml:"token_store"`
}

// CallbackPath is the path at which the gateway serves the login
// redirects of destination name (UpstreamOAuth.CallbackURL).
func CallbackPath(name string) string { return "/oauth/callback/" + name }

// validateUpstreamOAuth checks the oauth block of an HTTP destination.
// Messages never quote a value: any may hold a substituted secret.
func (d *decoder) validateUpstreamOAuth(dst *Destination, p string) {
	o, op := dst.OAuth, p+".oauth"
	switch o.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if o.ClientID == "" || o.ClientSecret == "" && o.ClientKeyFile == "" {
			d.errorIn(op+".grant", p, "oauth: grant client_credentials needs client_id and client_secret (or client_key_file)")
		}
	default:
		d.errorIn(op+".grant", p, "oauth.grant: want authorization_code or client_credentials")
	}
	switch o.TokenStore {
	case "", TokenStoreFile, TokenStoreKeyring:
	default:
		d.errorIn(op+".token_store", p, "oauth.token_store: want file or keyring")
	}
	if o.ClientKeyFile != "" && o.Grant != GrantClientCredentials {
		d.errorIn(op+".client_key_file", p, "oauth.client_key_file is for grant client_credentials")
	} else if o.ClientKeyFile != "" && o.ClientSecret != "" {
		d.errorIn(op+".client_key_file", p, "oauth: give client_secret or client_key_file, not both")
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		d.errorIn(op+".client_secret", p, "oauth.client_secret needs oauth.client_id")
	}
	if o.ClientMetadataURL != "" {
		u, err := url.Parse(o.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			d.errorIn(op+".client_metadata_url", p, "oauth.client_metadata_url: want an https URL with a path, such as https://example.com/switchboard.json")
		}
	}
	if o.RedirectURL != "" {
		u, err := url.Parse(o.RedirectURL)
		if err != nil || u.Scheme != "http" || !loopbackHost(u.Hostname()) {
			d.errorIn(op+".redirect_url", p, "oauth.redirect_url: want http on a loopback address, such as http://127.0.0.1:8976/callback")
		}
	}
	if o.CallbackURL != "" {
		u, err := url.Parse(o.CallbackURL)
		switch {
		case o.Grant == GrantClientCredentials:
			d.errorIn(op+".callback_url", p, "oauth.callback_url is for grant authorization_code (client_credentials needs no login)")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
			!strings.HasSuffix(u.Path, CallbackPath(dst.Name)):
			d.errorIn(op+".callback_url", p, "oauth.callback_url: want this gateway's URL of %s, such as https://gw.example.com%s", CallbackPath(dst.Name), CallbackPath(dst.Name))
		}
	}
	if dst.AWS != nil {
		d.errorIn(op, p, "oauth and aws both authorize with the Authorization header: give one")
	}
	for k := range dst.Headers {
		if strings.EqualFold(k, "Authorization") {
			d.errorIn(op, p, "oauth sets the Authorization header: remove it from headers")
		}
	}
	for _, k := range dst.ForwardHeaders {
		if strings.EqualFold(k, "Authorization") {
			d.errorIn(op, p, "oauth sets the Authorization header: the client's is never passed on with it; remove it from forward_headers")
		}
	}
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
