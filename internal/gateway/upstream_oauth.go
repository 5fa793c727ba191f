package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
)

// oauthTarget is the OAuth side of a streamable_http or sse destination
// with an oauth block: one oauth.Client, and the HTTP client that sets
// its tokens, shared by every session of the destination (so a token is
// refreshed once for all of them). The tokens live in the token file; the
// gateway never starts a login: a destination without a usable token is
// needs_login until `switchboard auth login NAME` writes the file, which
// the Client reads again when it changes.
type oauthTarget struct {
	name   string        // the destination's
	oc     *oauth.Client // nil when err is set
	client *http.Client
	err    error // the Client could not be made (no state directory)
}

// newOAuthTarget returns the OAuth side of cfg, or nil when cfg has no
// oauth block.
func newOAuthTarget(cfg *config.Destination, log *slog.Logger) *oauthTarget {
	if cfg.OAuth == nil {
		return nil
	}
	oc, err := NewOAuthClient(cfg, log)
	if err != nil {
		return &oauthTarget{name: cfg.Name, err: err}
	}
	c := upstream.NewHTTPClient()
	c.Transport = oc.Transport(c.Transport)
	return &oauthTarget{name: cfg.Name, oc: oc, client: c}
}

// NewOAuthClient returns the OAuth client of a destination with an oauth
// block, its tokens in TokenDir/NAME.json, or under NAME in the OS keyring
// with token_store keyring (`switchboard auth` uses it too). A keyring that
// cannot be reached is an error (the destination is needs_login with it):
// the tokens never go to a file instead.
func NewOAuthClient(cfg *config.Destination, log *slog.Logger) (*oauth.Client, error) {
	o := cfg.OAuth
	var store oauth.Store
	if o.TokenStore == config.TokenStoreKeyring {
		ks := oauth.KeyringStore{}
		if err := ks.Available(); err != nil {
			return nil, fmt.Errorf("oauth.token_store keyring: %v (tokens are never kept in a file instead)", err)
		}
		store = ks
	} else {
		dir := o.TokenDir
		if dir == "" {
			var err error
			if dir, err = oauth.DefaultDir(); err != nil {
				return nil, err
			}
		}
		store = oauth.FileStore{Dir: dir}
	}
	var key []byte
	if o.ClientKeyFile != "" {
		var err error
		if key, err = os.ReadFile(o.ClientKeyFile); err != nil {
			return nil, fmt.Errorf("oauth.client_key_file: %v", err)
		}
	}
	return oauth.New(oauth.Options{URL: cfg.URL, Grant: o.Grant, ClientID: o.ClientID, ClientSecret: o.ClientSecret, ClientKey: key,
		ClientMetadataURL: o.ClientMetadataURL, RedirectURL: o.RedirectURL,
		Store: store, Key: cfg.Name, SSE: cfg.Type == config.TypeSSE,
		LoginHint: "switchboard auth login " + cfg.Name, Logger: log})
}

// get returns the HTTP client of the destination's requests.
func (t *oauthTarget) get() (*http.Client, error) {
	if t.err != nil {
		return nil, upstream.Permanent(t.err)
	}
	return t.client, nil
}

// permanent marks a dial that failed for want of a login as permanent:
// dialling again at once cannot help.
func (t *oauthTarget) permanent(err error) error {
	if t != nil && errors.Is(err, oauth.ErrNeedsLogin) && !upstream.IsPermanent(err) {
		return upstream.Permanent(err)
	}
	return err
}

// state reports needs_login (and why), or "" when the tokens are usable
// or not yet known.
func (t *oauthTarget) state(context.Context) (string, string) {
	if t == nil {
		return "", ""
	}
	if t.err != nil {
		return oauth.StateNeedsLogin, t.err.Error()
	}
	if st := t.oc.Status(); st.State == oauth.StateNeedsLogin {
		return oauth.StateNeedsLogin, st.Reason + "; run: switchboard auth login " + t.name
	}
	return "", ""
}

func (t *oauthTarget) close() {
	if t != nil && t.oc != nil {
		t.oc.Close()
	}
}
