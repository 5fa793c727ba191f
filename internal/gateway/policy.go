package gateway

import (
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/config"
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
	return policy.Wrap(d, g.rulesFor)
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
