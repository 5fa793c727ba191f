package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/edge"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/guard/gate"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/router"
)

// Hot reload. A reload builds the new state, diffs it against the current
// one and applies only the changes:
//
//   - a destination whose config (and the global settings it uses) did not
//     change keeps its *destination: same processes, same sessions;
//   - a changed destination gets a new one; the old one is closed after the
//     swap (its sessions end and answer 404; its members leave the
//     aggregated views, whose clients get list_changed);
//   - removed destinations are closed, added ones start;
//   - routers (aggregated views) live across reloads and are updated in
//     place, so their sessions and open streams survive.
//
// An invalid config is rejected whole and the old one keeps serving. The
// listen address and the log and audit outputs are not reloadable: a change
// to them is logged and ignored until restart.

// build makes a state for cfg, reusing prev's unchanged destinations, and
// returns the destinations of prev that the new state no longer uses.
// reloadMu is held (or the Gateway is not yet shared).
func (g *Gateway) build(cfg *config.Config, prev *state) (*state, []*destination.Destination) {
	ps := PolicySetup(cfg)
	t := &edge.Table{Fronts: map[string]http.Handler{}, Guard: edge.NewGuard(cfg.Listen, cfg.AllowedHosts, cfg.AllowedOrigins),
		Auth: authOf(cfg), Authority: policy.NewAuthority(ps.Clients, &g.clientLimits),
		IdentityHeader: cfg.Auth.IdentityHeader, Metrics: cfg.Metrics.Enabled, UI: cfg.UI.Enabled}
	if cfg.Format == config.FormatMCProxy {
		t.HealthStatus = "healthy" // MCProxy's /health body
	}
	st := &state{cfg: cfg, dests: map[string]*destination.Destination{}, loadedAt: time.Now(), table: t}
	for _, name := range cfg.Names {
		if prev != nil {
			if old := prev.dests[name]; old != nil && sameDestination(prev.cfg, cfg, name) {
				old.SetLimits(destinationLimits(cfg))
				st.dests[name] = old
				continue
			}
		}
		st.dests[name] = g.newDestination(cfg.Destinations[name], cfg)
	}
	var stale []*destination.Destination
	if prev != nil {
		for name, old := range prev.dests {
			if st.dests[name] != old {
				stale = append(stale, old)
			}
		}
	}
	for _, w := range policy.Warnings(ps, router.Members(RouterLayout(cfg))) {
		g.log.Warn("access: " + w)
	}
	pins := g.loadPins(cfg)
	g.dropGates(st.dests)
	servers := map[string]gate.Server{}
	for name, d := range st.dests {
		d.SetRequestLimits(policy.NewDestinationLimiter(name, destinationLimitsOf(cfg.Limits.Destinations[name]), d.RequestLimits()))
		dc := cfg.Destinations[name]
		srv := g.server(cfg, name, d, pins) // guards.go: d itself without guards
		servers[name] = srv
		front := g.guarded(cfg, srv, policy.DestinationEndpoint(name))
		mcpFront, stream, message := g.fronts(cfg, front, streamable.Options{Name: name, Timeout: timeoutOf(dc, cfg),
			ParamHeaders: d.ParamHeaders}, "/"+name+"/message")
		if !dc.LegacySSE {
			stream, message = edge.Gone(name), edge.Gone(name)
		}
		t.Fronts[name+"/mcp"], t.Fronts[name+"/sse"], t.Fronts[name+"/message"] = mcpFront, stream, message
		if cb := d.OAuthCallback(); cb != nil {
			if t.OAuthCallbacks == nil {
				t.OAuthCallbacks = map[string]http.Handler{}
			}
			t.OAuthCallbacks[name] = cb
		}
	}
	st.routers = g.buildViews(cfg, servers, t)
	return st, stale
}

// sameDestination reports whether destination name would run the same way
// under both configs: its own settings and the global ones it uses.
func sameDestination(a, b *config.Config, name string) bool {
	da, db := a.Destinations[name], b.Destinations[name]
	if da == nil || db == nil || !reflect.DeepEqual(da, db) {
		return false
	}
	return a.Timeout == b.Timeout && a.MaxMessageBytes == b.MaxMessageBytes &&
		reflect.DeepEqual(a.Restart, b.Restart)
}

// Reload applies cfg. It is the only writer of the gateway's state.
func (g *Gateway) Reload(cfg *config.Config) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	if g.stopped {
		// A SIGHUP racing shutdown: what it started would never be stopped.
		g.log.Warn("config reload ignored: switchboard is shutting down")
		return
	}
	prev := g.state()
	if cfg.Listen != g.static.Listen {
		g.log.Warn("listen cannot change without a restart; keeping the old address", "old", g.static.Listen, "new", cfg.Listen)
	}
	if !reflect.DeepEqual(cfg.Log, g.static.Log) || !reflect.DeepEqual(cfg.Audit, g.static.Audit) {
		g.log.Warn("log and audit settings change only on restart")
	}
	g.redactor.Update(append(cfg.SecretValues(), prev.cfg.SecretValues()...))
	st, stale := g.build(cfg, prev)
	g.sessions.SetLimits(cfg.MaxSessions, cfg.SessionIdleTimeout)
	g.cur.Store(st)
	g.edge.Store(st.table)
	g.lastReload = edge.Reload{Time: st.loadedAt, OK: true}
	g.reloadsOK++
	g.metrics.SetToolLabels(cfg.Metrics.ToolLabels)

	var added, changed, removed, kept []string
	for name, d := range st.dests {
		switch old := prev.dests[name]; {
		case old == nil:
			added = append(added, name)
		case old == d:
			kept = append(kept, name)
		default:
			changed = append(changed, name)
		}
	}
	for name := range prev.dests {
		if st.dests[name] == nil {
			removed = append(removed, name)
		}
	}
	for _, l := range [][]string{added, changed, removed, kept} {
		slices.Sort(l)
	}
	g.log.Info("config reloaded", "added", added, "changed", changed, "removed", removed, "unchanged", len(kept))
	for _, name := range kept {
		if st.dests[name].Retry() {
			g.log.Info("config reloaded: retrying a failed destination", "destination", name)
		}
	}
	for _, d := range stale {
		g.retiring.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d.Close(ctx)
		})
	}
	g.startShared(st)
}

// reloadFailed records a config that was rejected.
func (g *Gateway) reloadFailed(err error) {
	g.reloadMu.Lock()
	g.lastReload = edge.Reload{Time: time.Now(), OK: false, Error: err.Error()}
	g.reloadsFailed++
	g.reloadMu.Unlock()
	g.log.Error("config reload rejected; the running config keeps serving", "err", err)
}

// ReloadFile loads ConfigPath and applies it; an invalid file is rejected
// and the running config keeps serving. SIGHUP calls it.
func (g *Gateway) ReloadFile() error {
	if g.opts.ConfigPath == "" {
		return errors.New("gateway: no config file to reload")
	}
	cfg, err := config.Load(g.opts.ConfigPath)
	if err != nil {
		g.reloadFailed(err)
		return err
	}
	g.Reload(cfg)
	return nil
}

// startShared starts the shared processes of st that are idle, so a broken
// server shows as failed in /healthz at once and the first client does not
// wait for it to start. Under ServeStdio only the servers of its view start:
// no client can reach the others.
func (g *Gateway) startShared(st *state) {
	if view := g.stdioView.Load(); view != nil {
		rt := st.routers[*view]
		if rt == nil {
			return
		}
		for _, s := range rt.View().Servers {
			if d := st.dests[s.Name()]; d != nil {
				d.Start()
			}
		}
		return
	}
	for _, d := range st.dests {
		d.Start()
	}
}

// stopAll stops every destination of the current state and those still
// retiring, then closes the log files. Called once at shutdown.
func (g *Gateway) stopAll(ctx context.Context) {
	g.reloadMu.Lock()
	g.stopped = true
	st := g.state()
	for _, rt := range g.routers {
		rt.Close()
	}
	g.reloadMu.Unlock()
	g.sessions.EndAll(errors.New("switchboard is shutting down"))
	var wg sync.WaitGroup
	for _, d := range st.dests {
		wg.Go(func() { d.Close(ctx) })
	}
	wg.Wait()
	g.retiring.Wait()
	for _, c := range g.closers {
		_ = c.Close()
	}
}

// reloadDebounce is how long the config file must stay unchanged before a
// change is applied.
const reloadDebounce = 100 * time.Millisecond

// watch reloads the config file when it changes, until ctx is done: on
// file-system events (debounced) and, as a fallback for file systems
// without events, by checking its checksum every ReloadInterval.
func (g *Gateway) watch(ctx context.Context) {
	if g.opts.ConfigPath == "" || g.opts.NoReload {
		return
	}
	interval := g.opts.ReloadInterval
	if interval <= 0 {
		interval = time.Second
	}
	last := g.watchSum
	// Watch the directories: editors and config managers replace files by
	// renaming, which a watch on the file itself would lose.
	events, stop, err := watchDirs(dirsOf(g.watchFiles()), func(dir string, err error) {
		g.log.Warn("config watch failed", "dir", dir, "err", err)
	})
	if err != nil {
		g.log.Warn("config watch unavailable; polling only", "err", err)
	} else {
		defer stop()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var debounce <-chan time.Time
	// The watched paths, cleaned, for the state they were computed from
	// (a reload may name another secrets file). Every write to any file
	// in a watched directory is an event (a log or audit file kept beside
	// the config: one per request), so matching one must be cheap.
	var files []string
	var filesOf *state
	for {
		select {
		case <-ctx.Done():
			return
		case name, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if st := g.state(); st != filesOf {
				files, filesOf = g.cleanWatchFiles(), st
			}
			if name == "" || slices.Contains(files, filepath.Clean(name)) { // "": events were lost
				// Wait for the writes to settle: a file being written
				// (truncated, then filled) must not be loaded half-way.
				debounce = time.After(reloadDebounce)
			}
			continue
		case <-tick.C:
			// A change seen by polling waits out the debounce too.
			if debounce == nil && g.checksum() != last {
				debounce = time.After(reloadDebounce)
			}
			continue
		case <-debounce:
			debounce = nil
		}
		if sum := g.checksum(); sum != last {
			last = sum
			_ = g.ReloadFile()
		}
	}
}

// watchFiles are the config file, its secrets file and its pin file
// (guards).
func (g *Gateway) watchFiles() []string {
	files := []string{g.opts.ConfigPath}
	if gd := g.state().cfg.Guards; gd != nil && gd.Pins != "" {
		files = append(files, gd.Pins)
	}
	if sf := g.state().cfg.SecretsFile; sf != "" {
		files = append(files, sf)
	} else {
		dir := filepath.Dir(g.opts.ConfigPath)
		files = append(files, filepath.Join(dir, "secrets.yml"), filepath.Join(dir, "secrets.yaml"))
	}
	return files
}

// dirsOf returns the directories of files, each once.
func dirsOf(files []string) []string {
	var dirs []string
	for _, f := range files {
		if d := filepath.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// cleanWatchFiles returns watchFiles, each cleaned, to compare the events'
// names with.
func (g *Gateway) cleanWatchFiles() []string {
	files := g.watchFiles()
	for i, f := range files {
		files[i] = filepath.Clean(f)
	}
	return files
}

// checksum hashes the watched files' contents ("" for a missing file).
func (g *Gateway) checksum() string {
	h := sha256.New()
	for _, f := range g.watchFiles() {
		b, _ := os.ReadFile(f)
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return string(h.Sum(nil))
}
