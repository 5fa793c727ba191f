package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/front/sse"
	stdiofront "github.com/switchboard-mcp/switchboard/internal/front/stdio"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/router"
)

// Aggregated endpoints (package router):
//
//	/mcp, /sse, /message                    the default view: destinations in no
//	                                        namespace + every non-isolated namespace
//	/mcp/{name}, /sse/{name}, /message/{name}  one namespace or group
//	/{name}/mcp, /{name}/sse, /{name}/message  the same (no destination may
//	                                        share a view's name)
//
// The X-Namespace header names the view and takes precedence over the path.
// An unknown name gets 404. Sessions of a view are kept in the session
// table under "mcp" (default view) or "mcp/{name}", names no destination
// can have, so caps and session ids never mix with a destination's.
//
// /message/{name} shadows the routes of a destination called "message"
// (/message/mcp, /message/sse, /message/message): those go to the
// destination unless a view of that name exists; for /message/message,
// when both exist, the session_id decides.

// HeaderNamespace names the view of a request to an aggregated endpoint.
const HeaderNamespace = "X-Namespace"

// views holds the aggregated endpoints.
type views struct {
	routers map[string]*router.Router // by view name; "" is the default view
	mcp     map[string]http.Handler
	stream  map[string]http.Handler // GET /sse
	message map[string]http.Handler // POST /message
}

// viewKey is the session-table name of a view's sessions.
func viewKey(name string) string {
	if name == "" {
		return "mcp"
	}
	return "mcp/" + name
}

// buildViews creates (or, on a reload, updates) a Router and its fronts for
// the default view and every namespace and group. Routers live across
// reloads, so their sessions do; a router whose view is gone is closed.
// reloadMu is held.
func (g *Gateway) buildViews(cfg *config.Config, dests map[string]*destination.Destination) *views {
	servers := map[string]router.Server{}
	for name, d := range dests {
		servers[name] = d
	}
	vs := router.Views(cfg, servers, g.log)
	out := &views{routers: map[string]*router.Router{}, mcp: map[string]http.Handler{},
		stream: map[string]http.Handler{}, message: map[string]http.Handler{}}
	for name, rt := range g.routers {
		if vs[name] == nil {
			rt.Close()
			delete(g.routers, name)
		}
	}
	for name, v := range vs {
		rt := g.routers[name]
		if rt == nil {
			key := viewKey(name)
			auditScript := func(rec *audit.Record) { // a code-mode script's call, through this view
				rec.View = key
				g.audit.Log(rec)
			}
			rt = router.New(v, router.Options{Version: buildinfo.Version(), Timeout: cfg.Timeout, Logger: g.log, Audit: auditScript})
			g.routers[name] = rt
		} else {
			rt.Update(v)
		}
		key := viewKey(name)
		out.routers[name] = rt
		front := g.guarded(cfg, rt, policy.ViewEndpoint(name))
		out.mcp[name] = streamable.NewHandler(front, streamable.Options{
			Name: key, View: true, Sessions: g.sessions, Timeout: cfg.Timeout, MaxBody: cfg.MaxBodyBytes,
			KeepAlive: keepAlive(cfg), GetStreams: cfg.Connections.GetStreams, Done: g.done, Logger: g.log, ParamHeaders: rt.ParamHeaders,
		})
		msgPath := "/message"
		if name != "" {
			msgPath += "/" + name
		}
		h := sse.NewServer(front, sse.ServerOptions{
			Name: key, View: true, Sessions: g.sessions, Timeout: cfg.Timeout, MaxBody: cfg.MaxBodyBytes,
			KeepAlive: keepAlive(cfg), Done: g.done, Logger: g.log, MessagePath: msgPath,
		})
		out.stream[name] = http.HandlerFunc(h.ServeStream)
		out.message[name] = http.HandlerFunc(h.ServeMessage)
		names := make([]string, 0, len(v.Servers))
		for _, s := range v.Servers {
			names = append(names, s.Name())
		}
		g.log.Debug("aggregated view", "view", name, "servers", names, "tool_prefix", v.Prefix)
	}
	return out
}

// routeViews registers the aggregated endpoints.
func (g *Gateway) routeViews(mux *http.ServeMux) {
	for _, p := range []string{"/mcp", "/mcp/{name}"} {
		mux.HandleFunc(p, g.serveView(g.currentViews(func(v *views) map[string]http.Handler { return v.mcp }), ""))
	}
	for _, p := range []string{"/sse", "/sse/{name}"} {
		mux.HandleFunc(p, g.serveView(g.currentViews(func(v *views) map[string]http.Handler { return v.stream }), ""))
	}
	for _, p := range []string{"/message", "/message/{name}"} {
		mux.HandleFunc(p, g.serveView(g.currentViews(func(v *views) map[string]http.Handler { return v.message }), "message"))
	}
}

// viewRoutes serves a namespace or group at /{name}/mcp, /{name}/sse and
// /{name}/message too, by endpoint: the handler reads the name from the
// "name" path value, which the caller sets. Clients that rewrite any path
// not ending in /mcp (inspector 0.15) reach a view only there. A
// destination of the same name would take these paths; config validation
// refuses that (`switchboard check` reports it).
func (g *Gateway) viewRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"mcp":     g.serveView(g.currentViews(func(v *views) map[string]http.Handler { return v.mcp }), ""),
		"sse":     g.serveView(g.currentViews(func(v *views) map[string]http.Handler { return v.stream }), ""),
		"message": g.serveView(g.currentViews(func(v *views) map[string]http.Handler { return v.message }), ""),
	}
}

// currentViews returns a func that picks, with f, the handlers of the
// current configuration's views.
func (g *Gateway) currentViews(f func(*views) map[string]http.Handler) func() map[string]http.Handler {
	return func() map[string]http.Handler { return f(g.state().views) }
}

// serveView dispatches to the handler of the view the request names.
// shadowed is the first path segment that a destination's routes may share
// ("message").
func (g *Gateway) serveView(current func() map[string]http.Handler, shadowed string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		handlers := current()
		name := r.PathValue("name")
		header := canonicalHeader(r.Header, HeaderNamespace)
		if shadowed != "" && header == "" && name != "" {
			if d := g.state().fronts[shadowed+"/"+name]; d != nil {
				_, isView := handlers[name]
				if !isView || g.sessionDest(r) == shadowed {
					if g.permitDestination(w, r, shadowed) {
						d.ServeHTTP(w, r)
					}
					return
				}
			}
		}
		if header != "" {
			name = header
		}
		h := handlers[name]
		if h == nil {
			// The name is the client's: it goes in the audit line's error,
			// not in the destination, which is a metrics label (bounded to
			// configured names).
			msg := fmt.Sprintf("no namespace or group named %q", name)
			audit.FromContext(r.Context()).Error = msg
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
				"error": map[string]any{"code": -32600, "message": msg}})
			return
		}
		if !g.permitView(w, r, name) {
			return
		}
		h.ServeHTTP(w, r)
	}
}

// sessionDest returns the destination of the session a legacy POST names.
func (g *Gateway) sessionDest(r *http.Request) string {
	id := r.URL.Query().Get("session_id")
	if id == "" {
		id = r.URL.Query().Get("sessionId")
	}
	if s := g.sessions.Get(id); s != nil {
		return s.Dest
	}
	return ""
}

// ServeStdio serves one view ("" the default view) as a single MCP server
// on in and out (newline-delimited JSON-RPC) until in ends or ctx is done,
// then stops every destination. Logs never go to out.
func (g *Gateway) ServeStdio(ctx context.Context, view string, in io.Reader, out io.Writer) error {
	cur := g.state()
	rt := cur.views.routers[view]
	if rt == nil {
		return fmt.Errorf("gateway: no namespace or group named %q", view)
	}
	front := stdiofront.Destination(rt)
	if name := g.opts.StdioClient; name != "" {
		c := cur.cfg.Clients[name]
		if c == nil {
			return fmt.Errorf("gateway: no client named %q (--client)", name)
		}
		e := policy.ViewEndpoint(view)
		if !cur.authority.Client(name).MayOpen(e) {
			return fmt.Errorf("gateway: client %s may not use %s (its namespaces)", name, e)
		}
		ctx = auth.NewContext(ctx, &auth.Identity{Client: &auth.Client{Name: name, Config: c}, Method: "stdio"})
		front = policy.Wrap(rt, policy.Options{Access: g.accessOf, Endpoint: e, ChargeRequests: true, IdentityMeta: cur.cfg.Auth.IdentityMeta})
	}
	g.log.Info("switchboard serving on stdio", "view", view, "servers", len(rt.View().Servers), "client", g.opts.StdioClient)
	g.stdioView.Store(&view)
	// The config is watched here too: the router is updated in place, and
	// the stdio client gets list_changed when what it sees changes.
	wctx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); g.watch(wctx) }()
	g.startShared(cur)
	err := stdiofront.Serve(ctx, front, in, out, stdiofront.Options{
		Name: viewKey(view), Timeout: cur.cfg.Timeout, MaxLine: int(cur.cfg.MaxMessageBytes), Logger: g.log,
	})
	stopWatch()
	<-watched
	close(g.done)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.stopAll(sctx)
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
