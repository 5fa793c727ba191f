package gateway

import (
	"maps"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/auth"
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

// authOf is the authenticator of cfg's auth block and clients; nil when
// authentication is not configured.
func authOf(cfg *config.Config) *auth.Authenticator {
	if !cfg.AuthConfigured() {
		return nil
	}
	opts := auth.Options{Required: cfg.Auth.Required, Realm: cfg.Auth.Realm, Resource: cfg.Auth.Resource}
	names := slices.Sorted(maps.Keys(cfg.Clients))
	// File order decides which client an OAuth token maps to; the decoder
	// keeps it in ClientOrder.
	if len(cfg.ClientOrder) == len(names) {
		names = cfg.ClientOrder
	}
	for _, n := range names {
		opts.Clients = append(opts.Clients, clientSpec(n, cfg.Clients[n]))
	}
	if o := cfg.Auth.OAuth; o != nil {
		opts.OAuth = &auth.OAuth{Issuer: o.Issuer, JWKSURL: o.JWKSURL, Audiences: o.Audiences, Algorithms: o.Algorithms,
			RequiredScopes: o.RequiredScopes, ScopesSupported: o.ScopesSupported, GroupsClaim: o.GroupsClaim,
			Leeway: o.Leeway, JWKSCacheTTL: o.JWKSCacheTTL, JWKSMinRefresh: o.JWKSMinRefresh}
	}
	return auth.New(opts)
}

// clientSpec is what package auth knows of client name.
func clientSpec(name string, c *config.Client) auth.ClientSpec {
	return auth.ClientSpec{Name: name, Tokens: c.Tokens, CertNames: c.CertNames, Subjects: c.Subjects,
		Groups: c.Groups, Scopes: c.Scopes, Status: c.Status, Admin: c.Admin}
}

// PolicySetup is what package policy knows of cfg's clients and
// destinations (for policy.Warnings and policy.Explain).
func PolicySetup(cfg *config.Config) *policy.Setup {
	s := &policy.Setup{Names: cfg.Names, ClientOrder: cfg.ClientOrder, Clients: map[string]*policy.Client{},
		OAuth: cfg.Auth.OAuth != nil, Required: cfg.Auth.Required}
	for name, c := range cfg.Clients {
		s.Clients[name] = &policy.Client{ClientSpec: clientSpec(name, c), Destinations: c.Destinations, Namespaces: c.Namespaces,
			Tools: filterOf(c.Tools), Prompts: filterOf(c.Prompts), Resources: filterOf(c.Resources), ReadOnly: c.ReadOnly,
			RateLimit: rateOf(c.RateLimit)}
	}
	return s
}

func filterOf(f config.ToolFilter) policy.Filter { return policy.Filter{Allow: f.Allow, Deny: f.Deny} }

// rateOf is a rate_limit block; nil for none.
func rateOf(r *config.RateLimit) *policy.Rate {
	if r == nil {
		return nil
	}
	return &policy.Rate{Rate: r.Rate, Burst: r.Burst}
}

// destinationLimitsOf is a destination's limits block; nil for none.
func destinationLimitsOf(l *config.DestinationLimits) *policy.DestinationLimits {
	if l == nil {
		return nil
	}
	out := &policy.DestinationLimits{RateLimit: rateOf(l.RateLimit), MaxConcurrent: l.MaxConcurrent}
	if l.Tools != nil {
		out.Tools = map[string]*policy.Rate{}
		for tool, r := range l.Tools {
			out.Tools[tool] = rateOf(r)
		}
	}
	return out
}
