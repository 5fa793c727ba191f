package gateway

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/metrics"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Observability: /metrics (internal/metrics) and the status page /ui
// (internal/statusui). Both are fed from the one audit record each request
// gets (audited, gateway.go) and from the structures /healthz reads, read
// when they are asked; neither instruments the data path.

// metricsStatus is the gateway's state for a scrape (metrics.Options.Status).
func (g *Gateway) metricsStatus() metrics.Status {
	cur := g.state()
	g.reloadMu.Lock()
	last, ok, failed := g.lastReload, g.reloadsOK, g.reloadsFailed
	g.reloadMu.Unlock()
	st := metrics.Status{Reloads: ok, ReloadFailures: failed, LastReloadOK: last.OK, LastReload: last.Time,
		ConfigLoaded: cur.loadedAt, AuditWriteErrors: g.audit.WriteErrors(), Stalled: upstream.StalledTotal()}
	for _, d := range g.destinationStatus(context.Background(), cur) {
		st.Destinations = append(st.Destinations, d.Destination)
	}
	return st
}

// destStatus is one destination's state, why it is not ready, and when a
// failed one accepts work again (zero unless failed).
type destStatus struct {
	metrics.Destination
	err  string
	next time.Time
}

// destinationStatus reads every destination's state, as /healthz does
// (remote probes concurrently; each is cached for a few seconds).
func (g *Gateway) destinationStatus(ctx context.Context, cur *state) []destStatus {
	names := slices.Sorted(maps.Keys(cur.dests))
	out := make([]destStatus, len(names))
	ctx, cancel := context.WithTimeout(ctx, destination.ProbeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			d := cur.dests[n]
			st, msg := d.State(ctx)
			members, children := d.Usage()
			out[i] = destStatus{Destination: metrics.Destination{Name: n, Type: cur.cfg.Destinations[n].Type, State: st,
				Sessions: g.sessions.Count(n), Members: members, Children: children,
				InFlight: d.InFlight(), Restarts: d.Restarts()}, err: msg, next: d.NextRetry()}
		})
	}
	wg.Wait()
	return out
}

// logListening logs, when a listener starts, the URLs it serves: the
// aggregated endpoint and each namespace's and group's, each destination's,
// and the status page, metrics and health when the config has them on.
func (g *Gateway) logListening(l listener) {
	cur := g.state()
	attrs := []any{"addr", l.ln.Addr().String(), "destinations", len(cur.dests)}
	if l.name != "" {
		g.log.Info("switchboard listening", append(attrs, "serving", l.name)...)
		return
	}
	base := "http://" + l.ln.Addr().String()
	if l.tls != nil {
		base = "https://" + l.ln.Addr().String()
	}
	var views, dests []string
	for n := range cur.routers {
		if n != "" {
			views = append(views, base+"/"+viewKey(n))
		}
	}
	for n := range cur.dests {
		dests = append(dests, base+"/"+n+"/mcp")
	}
	slices.Sort(views)
	slices.Sort(dests)
	attrs = append(attrs, "mcp", base+"/mcp")
	if len(views) > 0 {
		attrs = append(attrs, "views", views)
	}
	attrs = append(attrs, "destination_urls", dests)
	if cur.cfg.UI.Enabled {
		attrs = append(attrs, "ui", base+"/ui")
	}
	if cur.cfg.Metrics.Enabled {
		attrs = append(attrs, "metrics", base+"/metrics")
	}
	attrs = append(attrs, "health", base+"/healthz")
	g.log.Info("switchboard listening", attrs...)
}

// logFeatures logs, once the listeners are up, which of authentication,
// tracing, code mode and config reload are on, and where the audit log
// goes.
func (g *Gateway) logFeatures() {
	cfg := g.state().cfg
	auth := "off"
	switch {
	case cfg.Auth.Required:
		auth = "required"
	case len(cfg.Clients) > 0 || cfg.Auth.OAuth != nil:
		auth = "optional"
	}
	if cfg.Auth.OAuth != nil {
		auth += " (oauth)"
	}
	tracing := map[bool]string{false: "off", true: "on"}[cfg.Tracing.Enabled]
	var code []string
	for name, ns := range cfg.Namespaces {
		if ns.CodeMode != "" && ns.CodeMode != config.CodeModeOff {
			code = append(code, name+"="+ns.CodeMode)
		}
	}
	slices.Sort(code)
	codeMode := "off"
	if len(code) > 0 {
		codeMode = strings.Join(code, ",")
	}
	reload := "off"
	switch {
	case g.opts.ConfigPath == "":
	case g.opts.NoReload:
		reload = "on SIGHUP"
	default:
		reload = "on (file watched, and SIGHUP)"
	}
	g.log.Info("switchboard features", "auth", auth, "tracing", tracing, "code_mode", codeMode, "reload", reload,
		"audit", g.auditDest)
}
