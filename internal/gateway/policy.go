package gateway

import (
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
// obey the caller's rules and a session serves only the caller that opened
// it.

// guarded returns d behind the callers' rules; d itself when
// authentication is off (no cost on that path).
func (g *Gateway) guarded(cfg *config.Config, d policy.Destination) policy.Destination {
	if !cfg.AuthConfigured() {
		return d
	}
	return policy.Wrap(d, policy.Options{Rules: g.rulesFor, Owners: &g.owners, IdentityMeta: cfg.Auth.IdentityMeta})
}

// rulesFor returns the current rules of a caller.
func (g *Gateway) rulesFor(id *auth.Identity) *policy.Rules {
	if id == nil || id.Client == nil {
		return nil
	}
	return g.state().rules[id.Client.Name]
}

// rulesOf compiles the rules of cfg's clients.
func rulesOf(cfg *config.Config) map[string]*policy.Rules {
	if len(cfg.Clients) == 0 {
		return nil
	}
	out := make(map[string]*policy.Rules, len(cfg.Clients))
	for name, c := range cfg.Clients {
		out[name] = policy.RulesOf(c)
	}
	return out
}

// clientRates are the clients' rate limits by name.
func clientRates(cfg *config.Config) map[string]*config.RateLimit {
	out := map[string]*config.RateLimit{}
	for name, c := range cfg.Clients {
		if c.RateLimit != nil {
			out[name] = c.RateLimit
		}
	}
	return out
}

// overRate answers 429 with Retry-After when the caller's client is over
// its rate limit, and reports whether it did.
func (g *Gateway) overRate(w http.ResponseWriter, r *http.Request, id *auth.Identity) bool {
	if id == nil || id.Client == nil || id.Client.Config.RateLimit == nil {
		return false
	}
	ok, wait := g.clientLimits.Allow(id.Client.Name, time.Now())
	if ok {
		return false
	}
	secs := policy.RetryAfterSeconds(wait)
	audit.FromContext(r.Context()).Error = "rate limit of client " + id.Client.Name + " exceeded"
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"rate limit of client %s exceeded; retry after %ds","data":{"retryAfter":%d}}}`+"\n",
		jsonrpc.RequestRefused, id.Client.Name, secs, secs)
	return true
}
