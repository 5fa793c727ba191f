package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/policy"
)

// Per-client policy (internal/policy): every front's destination or router
// is wrapped, when authentication is configured, so that lists and calls
// obey the caller's access and a session serves only the caller that
// opened it. The decisions themselves are policy.Access's (one per
// client and config generation, in state.authority): the HTTP routes ask
// it whether the caller may open an endpoint (auth.go) and take its rate
// limit per request; the wrapper and the routers below ask it about every
// tool call, a script's included.

// guarded returns d, serving endpoint e, behind the callers' access; d
// itself when authentication is off (no cost on that path).
func (g *Gateway) guarded(cfg *config.Config, d policy.Destination, e policy.Endpoint) policy.Destination {
	if !cfg.AuthConfigured() {
		return d
	}
	return policy.Wrap(d, policy.Options{Access: g.accessOf, Endpoint: e, Owners: &g.owners, IdentityMeta: cfg.Auth.IdentityMeta})
}

// accessOf returns the access of a request's caller under the current
// config.
func (g *Gateway) accessOf(ctx context.Context) *policy.Access {
	return g.state().authority.Of(auth.FromContext(ctx))
}

// overRate answers 429 with Retry-After when the caller's client is over
// its rate limit, and reports whether it did.
func (g *Gateway) overRate(w http.ResponseWriter, r *http.Request, acc *policy.Access) bool {
	ok, wait := acc.Take(time.Now())
	if ok {
		return false
	}
	secs := policy.RetryAfterSeconds(wait)
	audit.FromContext(r.Context()).Error = "rate limit of client " + acc.Client() + " exceeded"
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"rate limit of client %s exceeded; retry after %ds","data":{"retryAfter":%d}}}`+"\n",
		jsonrpc.RequestRefused, acc.Client(), secs, secs)
	return true
}
