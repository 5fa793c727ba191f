package destination

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
)

// oauthTarget is the OAuth side of a streamable_http or sse destination
// with an oauth block: one oauth.Client, and the HTTP client that sets
// its tokens, shared by every session of the destination (so a token is
// refreshed once for all of them). The tokens live in the token file; a
// destination without a usable token is needs_login until `switchboard
// auth login NAME` writes the file, which the Client reads again when it
// changes, or (oauth.callback_url) until a client's person completes the
// login the gateway started, whose redirect callback serves.
type oauthTarget struct {
	name   string        // the destination's
	oc     *oauth.Client // nil when err is set
	client *http.Client
	err    error // the Client could not be made (no state directory)
}

// newOAuthTarget returns the OAuth side of h, or nil when h has no OAuth.
func newOAuthTarget(name string, h *HTTP, log *slog.Logger) *oauthTarget {
	if h.OAuth == nil {
		return nil
	}
	oc, err := h.OAuth(log)
	if err != nil {
		return &oauthTarget{name: name, err: err}
	}
	c := upstream.NewHTTPClient()
	c.Transport = oc.Transport(c.Transport)
	return &oauthTarget{name: name, oc: oc, client: c}
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

// callback is the handler of the login redirects, or nil when the
// gateway starts no logins for the destination.
func (t *oauthTarget) callback() http.Handler {
	if t == nil || t.oc == nil || !t.oc.StartsLogins() {
		return nil
	}
	return http.HandlerFunc(t.oc.Callback)
}

func (t *oauthTarget) close() {
	if t != nil && t.oc != nil {
		t.oc.Close()
	}
}
