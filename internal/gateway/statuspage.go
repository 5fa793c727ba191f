package gateway

import (
	"context"
	"maps"
	"net/http"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/edge"
	"github.com/switchboard-mcp/switchboard/internal/router"
	"github.com/switchboard-mcp/switchboard/internal/statusui"
)

// The status page, /ui (internal/statusui): its routes, and the state it
// shows, read from the same structures as /healthz on every poll.

// routeStatusPage registers the page's routes; they answer 404 while the
// config has ui.enabled false.
func (g *Gateway) routeStatusPage(mux *http.ServeMux) {
	enabled := func(h http.Handler) http.HandlerFunc {
		return g.when(func(cfg *config.Config) bool { return cfg.UI.Enabled }, h)
	}
	page := enabled(g.statusPage.Handler())
	for _, p := range []string{"GET /ui", "GET /ui/style.css", "GET /ui/app.js", "GET /ui/status.json"} {
		mux.HandleFunc(p, edge.PermitStatus(page))
	}
	// An approval changes state: a same-origin POST only (pinsui.go).
	approve := enabled(edge.ApprovePins(g.approve, g.audit))
	mux.Handle("POST /ui/pins/approve", http.NewCrossOriginProtection().Handler(edge.PermitStatus(approve)))
}

// when serves h while on(the current config), and 404 otherwise: /metrics
// and /ui follow metrics.enabled and ui.enabled across reloads.
func (g *Gateway) when(on func(*config.Config) bool, h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !on(g.state().cfg) {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}
}

// uiStatus is the gateway's state for one poll of the page
// (statusui.Options.Status).
func (g *Gateway) uiStatus(r *http.Request) statusui.Status {
	cur := g.state()
	g.reloadMu.Lock()
	last := g.lastReload
	g.reloadMu.Unlock()
	st := statusui.Status{Version: buildinfo.Version(), ConfigLoaded: cur.loadedAt.UTC(),
		LastReload: statusui.Reload{Time: last.Time.UTC(), OK: last.OK, Error: last.Error}}
	for _, d := range g.destinationStatus(context.Background(), cur) {
		st.Destinations = append(st.Destinations, statusui.Destination{Name: d.Name, Type: d.Type, State: d.State,
			Error: g.redactor.String(d.err), Restarts: d.Restarts, Sessions: d.Sessions, Members: d.Members, InFlight: d.InFlight})
	}
	st.Views = g.uiViews(cur)
	if cur.cfg.Guards != nil { // the pins, and whether the viewer may approve them
		st.Pins, st.Admin = g.uiPins(cur), edge.MayApprove(r)
	}
	return st
}

// uiViews describes every aggregated view and the tools it exposes: those
// of its own last tools/list answer to a client, else the ones its
// servers' last answers give under its naming policy and filters.
func (g *Gateway) uiViews(cur *state) []statusui.View {
	if cur.routers == nil {
		return []statusui.View{}
	}
	out := make([]statusui.View, 0, len(cur.routers))
	for _, n := range slices.Sorted(maps.Keys(cur.routers)) { // "" (the default view) first
		v := cur.routers[n].View()
		uv := statusui.View{Name: n, Path: "/" + viewKey(n), Prefix: v.Prefix, Servers: []string{}, Tools: []statusui.Tool{}}
		for _, s := range v.Servers {
			uv.Servers = append(uv.Servers, s.Name())
			if p, ok := v.Shape.Prefixes[s.Name()]; ok {
				if uv.ServerPrefixes == nil {
					uv.ServerPrefixes = map[string]string{}
				}
				uv.ServerPrefixes[s.Name()] = p
			}
		}
		if listed, ok := g.statusPage.Tools(viewKey(n)); ok {
			uv.Source = "listed"
			for _, t := range listed {
				uv.Tools = append(uv.Tools, statusui.Tool{Name: t})
			}
			out = append(out, uv)
			continue
		}
		var items []router.Item
		seen := false
		for _, s := range uv.Servers {
			tools, ok := g.statusPage.Tools(s)
			seen = seen || ok
			for _, t := range tools {
				if v.Admits(s, t) {
					items = append(items, v.Item(s, t, true))
				}
			}
		}
		if seen {
			uv.Source = "derived"
			exposed, err := router.ExposeNames(v.Prefix, items)
			if err != nil {
				uv.Error = err.Error()
			}
			for i, name := range exposed {
				if name != "" {
					uv.Tools = append(uv.Tools, statusui.Tool{Name: name, Server: items[i].Server})
				}
			}
		}
		out = append(out, uv)
	}
	return out
}
