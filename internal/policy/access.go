package policy

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/auth"
)

// How destination and namespace grants combine (the README's Inbound auth
// section states the same rule):
//
//   - `destinations` is the set of servers a client reaches, on every
//     endpoint: /{d}/mcp for each of them, and their tools, prompts and
//     resources inside any view. "*" is every destination.
//   - `namespaces` adds endpoints only: the views (/mcp/{ns}, /sse/{ns},
//     "mcp" for /mcp and /sse) the client may open. Inside a view the
//     client sees the members whose destinations it is granted.
//   - A client that lists no destinations at all sees every member of the
//     views it may open (and no /{d}/mcp endpoint).
//
// So a view never widens a destination grant, and what a client reaches
// can be read off its own entry (`switchboard check --explain-access`
// prints it).

// Endpoint is what a request came in on.
type Endpoint struct {
	// View is true for a merged view (/mcp, /mcp/{ns}, /sse…, X-Namespace,
	// the stdio front), false for a destination's own endpoints.
	View bool
	// Name is the destination, or the view ("" the default view).
	Name string
}

// ViewEndpoint is the endpoint of view name ("" the default view).
func ViewEndpoint(name string) Endpoint { return Endpoint{View: true, Name: name} }

// DestinationEndpoint is the endpoint of destination name.
func DestinationEndpoint(name string) Endpoint { return Endpoint{Name: name} }

func (e Endpoint) String() string {
	switch {
	case !e.View:
		return "destination " + e.Name
	case e.Name == "":
		return "the default view (/mcp)"
	}
	return "namespace " + e.Name
}

// Authority holds the access of every client of one config generation.
// It is immutable; the rate-limit buckets it points to outlive it.
type Authority struct {
	clients map[string]*Access
	nobody  *Access // an authenticated caller that is no client
}

// NewAuthority compiles the clients, by name. limits holds their
// rate-limit buckets across generations: it is updated to the clients'
// rate limits (nil: no rate limits).
func NewAuthority(clients map[string]*Client, limits *Limiter) *Authority {
	a := &Authority{clients: make(map[string]*Access, len(clients)), nobody: &Access{}}
	if limits != nil {
		rates := map[string]*Rate{}
		for name, c := range clients {
			rates[name] = c.RateLimit
		}
		limits.Update(rates)
	}
	for name, c := range clients {
		acc := &Access{client: name, cfg: c, rules: RulesOf(c)}
		if c.RateLimit != nil && limits != nil {
			acc.limits = limits
		}
		a.clients[name] = acc
	}
	return a
}

// Of returns the access of id: nil (everything, no limit) for no identity
// (authentication off, an anonymous caller where credentials are optional,
// or the stdio front run without --client); nothing for an authenticated
// caller that is no configured client.
func (a *Authority) Of(id *auth.Identity) *Access {
	if id == nil || a == nil {
		return nil
	}
	if id.Client != nil {
		if acc := a.clients[id.Client.Name]; acc != nil {
			return acc
		}
	}
	n := *a.nobody
	n.client = id.Name()
	return &n
}

// Client returns the compiled access of the client called name, or nil.
func (a *Authority) Client(name string) *Access {
	if a == nil {
		return nil
	}
	return a.clients[name]
}

// Access is what one caller may reach. A nil *Access may reach everything
// without limit. Its methods are safe for concurrent use.
type Access struct {
	client string   // the caller's name, as audit records name it
	cfg    *Client  // nil: nothing granted
	rules  *Rules   // nil: no filters
	limits *Limiter // nil: no rate limit
}

// Client is the caller's name for the audit log ("" for a nil Access).
func (a *Access) Client() string {
	if a == nil {
		return ""
	}
	return a.client
}

// Rules are the caller's filters (nil: none).
func (a *Access) Rules() *Rules {
	if a == nil {
		return nil
	}
	return a.rules
}

// ReadOnly reports whether only tools annotated readOnlyHint: true are
// allowed: a caller of Decide must then know the tool's annotation.
func (a *Access) ReadOnly() bool { return a != nil && a.rules != nil && a.rules.ReadOnly }

// MayOpen reports whether the caller may use endpoint e at all.
func (a *Access) MayOpen(e Endpoint) bool {
	if a == nil {
		return true
	}
	if a.cfg == nil {
		return false
	}
	if !e.View {
		return granted(a.cfg.Destinations, e.Name)
	}
	name := e.Name
	if name == "" {
		name = "mcp"
	}
	return granted(a.cfg.Namespaces, name)
}

// MayReach reports whether the caller may reach server (a destination's
// name) through endpoint e; "" is the endpoint itself (a view's
// meta-tools). See the rule at the top of this file.
func (a *Access) MayReach(e Endpoint, server string) bool {
	if !a.MayOpen(e) {
		return false
	}
	if a == nil || server == "" {
		return true
	}
	if !e.View {
		return server == e.Name
	}
	return len(a.cfg.Destinations) == 0 || granted(a.cfg.Destinations, server)
}

func granted(list []string, name string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, name)
}

// Admits reports whether the caller's tool rules let it see and call the
// tool exposed as name (readOnly: its readOnlyHint annotation).
func (a *Access) Admits(name string, readOnly bool) bool {
	r := a.Rules()
	if r == nil {
		return true
	}
	return admits(r.Tools, name) && (!r.ReadOnly || readOnly)
}

// AdmitsPrompt reports whether the caller's prompt rules admit the
// prompt exposed as name.
func (a *Access) AdmitsPrompt(name string) bool {
	r := a.Rules()
	return r == nil || admits(r.Prompts, name)
}

// AdmitsResource reports whether the caller's resource rules admit uri (a
// resource's URI or a template's).
func (a *Access) AdmitsResource(uri string) bool {
	r := a.Rules()
	return r == nil || admits(r.Resources, uri)
}

// Take takes one token of the caller's rate limit at now; when there is
// none it returns false and how long until there will be.
func (a *Access) Take(now time.Time) (bool, time.Duration) {
	if a == nil || a.limits == nil {
		return true, 0
	}
	return a.limits.Allow(a.client, now)
}

// ToolCall is one tool call to decide.
type ToolCall struct {
	Endpoint Endpoint
	// Server is the destination that serves the tool; "" for a view's own
	// meta-tools.
	Server string
	// Tool is the tool's name as the caller sees it (exposed name).
	Tool string
	// ReadOnly is the tool's readOnlyHint annotation. It matters only
	// when Access.ReadOnly.
	ReadOnly bool
	// Charge takes a token of the caller's rate limit: a call that no
	// request of its own carried (a script's). A request's calls were
	// counted when the request came in.
	Charge bool
}

// Denial is why a call was refused.
type Denial struct {
	// RetryAfter is set when the caller is over its rate limit.
	RetryAfter time.Duration
	Reason     string
}

func (d *Denial) Error() string { return d.Reason }

// Decide is the one authorization decision for a tool call: the caller
// may open the endpoint and reach the server (grants), its tool rules
// admit the tool, and (Charge) its rate limit has a token. Nil means
// allowed. A refused call takes no token.
func (a *Access) Decide(c ToolCall) *Denial {
	if a == nil {
		return nil
	}
	if !a.MayReach(c.Endpoint, c.Server) {
		if !a.MayOpen(c.Endpoint) {
			return &Denial{Reason: fmt.Sprintf("client %s may not use %s", a.client, c.Endpoint)}
		}
		return &Denial{Reason: fmt.Sprintf("client %s may not use destination %s", a.client, c.Server)}
	}
	if !a.Admits(c.Tool, c.ReadOnly) {
		return &Denial{Reason: fmt.Sprintf("client %s may not call tool %s", a.client, c.Tool)}
	}
	if c.Charge {
		if ok, wait := a.Take(time.Now()); !ok {
			return &Denial{RetryAfter: wait, Reason: fmt.Sprintf("rate limit of client %s exceeded; retry after %ds", a.client, RetryAfterSeconds(wait))}
		}
	}
	return nil
}

type accessKey struct{}

// NewContext returns ctx carrying acc: what the layers below a front (the
// router, a script's calls) decide with.
func NewContext(ctx context.Context, acc *Access) context.Context {
	return context.WithValue(ctx, accessKey{}, acc)
}

// FromContext returns the access ctx carries; nil (everything) when none.
func FromContext(ctx context.Context) *Access {
	acc, _ := ctx.Value(accessKey{}).(*Access)
	return acc
}
