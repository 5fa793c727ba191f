package gateway

import (
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/policy"
)

// Per-client policy (internal/policy): every front's destination or router
// is wrapped, when authentication is configured, so that lists and calls
// obey the caller's access and a session serves only the caller that
// opened it. The decisions themselves are policy.Access's (one per
// client and config generation, in the edge.Table's Authority): the HTTP
// edge asks it whether the caller may open an endpoint and takes its rate
// limit per request; the wrapper and the routers below ask it, through
// the edge (edge.AccessOf), about every tool call, a script's included.

// guarded returns d, serving endpoint e, behind the callers' access; d
// itself when authentication is off (no cost on that path).
func (g *Gateway) guarded(cfg *config.Config, d policy.Destination, e policy.Endpoint) policy.Destination {
	if !cfg.AuthConfigured() {
		return d
	}
	return policy.Wrap(d, policy.Options{Access: g.edge.AccessOf, Endpoint: e, Owners: &g.owners, IdentityMeta: cfg.Auth.IdentityMeta})
}
