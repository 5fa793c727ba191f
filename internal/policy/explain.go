package policy

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Explaining access (`switchboard check --explain-access`) and warning
// about grants that read wider or narrower than they are. Both take the
// views' members by view name ("" the default view), as the router
// resolves them, and use the same rule as Access (MayOpen, MayReach).

// Setup is what Explain and Warnings describe.
type Setup struct {
	// Names are the destinations, in file order.
	Names []string
	// Clients are the configured clients by name, in ClientOrder (file
	// order; sorted by name when its length is not theirs).
	Clients     map[string]*Client
	ClientOrder []string
	// OAuth says OAuth tokens are accepted; Required that every request
	// needs credentials.
	OAuth, Required bool
}

// clientNames are cfg's clients in file order (sorted when the order is
// not known).
func clientNames(cfg *Setup) []string {
	if len(cfg.ClientOrder) == len(cfg.Clients) {
		return cfg.ClientOrder
	}
	return slices.Sorted(maps.Keys(cfg.Clients))
}

// viewNames are the views' names, sorted: the default view ("") first.
func viewNames(views map[string][]string) []string { return slices.Sorted(maps.Keys(views)) }

func viewPath(name string) string {
	if name == "" {
		return "/mcp"
	}
	return "/mcp/" + name
}

// split divides a view's members into those acc reaches and the rest.
func split(acc *Access, view string, members []string) (shown, hidden []string) {
	e := ViewEndpoint(view)
	for _, m := range members {
		if acc.MayReach(e, m) {
			shown = append(shown, m)
		} else {
			hidden = append(hidden, m)
		}
	}
	return shown, hidden
}

func list(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

func filterText(f Filter) string {
	var parts []string
	if len(f.Allow) > 0 {
		parts = append(parts, "allow "+strings.Join(f.Allow, ", "))
	}
	if len(f.Deny) > 0 {
		parts = append(parts, "deny "+strings.Join(f.Deny, ", "))
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, "; ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Explain writes, per client (file order), what it can reach under cfg:
// how it authenticates, its destinations, the views it may open with the
// members each shows it, its tool, prompt and resource rules, read-only,
// rate limit and status pages. views are the views' members.
func Explain(w io.Writer, cfg *Setup, views map[string][]string) {
	auth := NewAuthority(cfg.Clients, nil)
	if len(cfg.Clients) == 0 {
		fmt.Fprintln(w, "no clients: authentication is off and every caller reaches everything")
		return
	}
	for i, name := range clientNames(cfg) {
		c, acc := cfg.Clients[name], auth.Client(name)
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "client %s\n", name)
		var creds []string
		if n := len(c.Tokens); n > 0 {
			creds = append(creds, strconv.Itoa(n)+" token"+map[bool]string{true: "s"}[n > 1])
		}
		for _, f := range []struct {
			what string
			v    []string
		}{{"subjects", c.Subjects}, {"groups", c.Groups}, {"scopes", c.Scopes}, {"cert names", c.CertNames}} {
			if len(f.v) > 0 {
				creds = append(creds, f.what+" "+strings.Join(f.v, ", "))
			}
		}
		fmt.Fprintf(w, "  credentials: %s\n", list(creds))
		var dests []string
		for _, d := range cfg.Names {
			if acc.MayOpen(DestinationEndpoint(d)) {
				dests = append(dests, d)
			}
		}
		fmt.Fprintf(w, "  destinations (/{d}/mcp, /{d}/sse): %s\n", list(dests))
		fmt.Fprintf(w, "  views:")
		opened := 0
		for _, v := range viewNames(views) {
			if !acc.MayOpen(ViewEndpoint(v)) {
				continue
			}
			if opened == 0 {
				fmt.Fprintln(w)
			}
			opened++
			shown, hidden := split(acc, v, views[v])
			line := fmt.Sprintf("    %s: %s", viewPath(v), list(shown))
			if len(hidden) > 0 {
				line += " (hidden, not in its destinations: " + strings.Join(hidden, ", ") + ")"
			}
			fmt.Fprintln(w, line)
		}
		if opened == 0 {
			fmt.Fprintln(w, " none")
		}
		fmt.Fprintf(w, "  tools: %s\n", filterText(c.Tools))
		fmt.Fprintf(w, "  prompts: %s\n", filterText(c.Prompts))
		fmt.Fprintf(w, "  resources: %s\n", filterText(c.Resources))
		fmt.Fprintf(w, "  read_only: %s\n", yesNo(c.ReadOnly))
		if rl := c.RateLimit; rl != nil {
			fmt.Fprintf(w, "  rate_limit: %s/s, burst %d (every request, and every tool call of its scripts)\n", strconv.FormatFloat(rl.Rate, 'f', -1, 64), rl.Burst)
		} else {
			fmt.Fprintln(w, "  rate_limit: none")
		}
		fmt.Fprintf(w, "  status pages (/ui, /metrics, /healthz): %s\n", yesNo(c.Status))
	}
	fmt.Fprintln(w)
	if cfg.OAuth {
		fmt.Fprintln(w, "an OAuth caller that matches no client: nothing")
	}
	if !cfg.Required {
		fmt.Fprintln(w, "a caller without credentials (auth.required: false): everything, no rules, no rate limit")
	}
}

// Warnings are the grants of cfg that read wider or narrower than they
// are: a view a client names explicitly that hides some or all of its
// members (not in the client's destinations), and a client that lists no
// destinations, whose views show it every member.
func Warnings(cfg *Setup, views map[string][]string) []string {
	auth := NewAuthority(cfg.Clients, nil)
	var out []string
	for _, name := range clientNames(cfg) {
		c, acc := cfg.Clients[name], auth.Client(name)
		if len(c.Destinations) == 0 {
			var reached []string
			for _, v := range viewNames(views) {
				if !acc.MayOpen(ViewEndpoint(v)) {
					continue
				}
				reached = append(reached, views[v]...)
			}
			if len(reached) > 0 {
				slices.Sort(reached)
				reached = slices.Compact(reached)
				out = append(out, fmt.Sprintf("client %s lists no destinations, so the views it may open show it every member: it reaches %s; list destinations to bound it",
					name, strings.Join(reached, ", ")))
			}
			continue
		}
		for _, v := range viewNames(views) {
			listed := v
			if listed == "" {
				listed = "mcp"
			}
			if !slices.Contains(c.Namespaces, listed) {
				continue
			}
			shown, hidden := split(acc, v, views[v])
			switch {
			case len(hidden) == 0:
			case len(shown) == 0:
				out = append(out, fmt.Sprintf("client %s: %s (namespaces: %s) shows it nothing: none of its servers (%s) is in the client's destinations",
					name, viewPath(v), listed, strings.Join(hidden, ", ")))
			default:
				out = append(out, fmt.Sprintf("client %s: %s (namespaces: %s) shows it only %s; hidden, not in the client's destinations: %s",
					name, viewPath(v), listed, strings.Join(shown, ", "), strings.Join(hidden, ", ")))
			}
		}
	}
	return out
}
