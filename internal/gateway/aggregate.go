package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/edge"
	stdiofront "github.com/switchboard-mcp/switchboard/internal/front/stdio"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/guard/gate"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/router"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
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

// viewKey is the session-table name of a view's sessions.
func viewKey(name string) string {
	if name == "" {
		return "mcp"
	}
	return "mcp/" + name
}

// buildViews creates (or, on a reload, updates) a Router and its fronts for
// the default view and every namespace and group, over dests (each
// destination, or its guards' gate). Routers live across
// reloads, so their sessions do; a router whose view is gone is closed.
// The views' fronts go in t. reloadMu is held.
func (g *Gateway) buildViews(cfg *config.Config, dests map[string]gate.Server, t *edge.Table) map[string]*router.Router {
	servers := map[string]router.Server{}
	for name, d := range dests {
		servers[name] = d
	}
	vs := router.Views(RouterLayout(cfg), servers, g.log)
	out := map[string]*router.Router{}
	t.MCP, t.Stream, t.Message = map[string]http.Handler{}, map[string]http.Handler{}, map[string]http.Handler{}
	for name, rt := range g.routers {
		if vs[name] == nil {
			rt.Close()
			delete(g.routers, name)
		}
	}
	for name, v := range vs {
		key := viewKey(name)
		rt := g.routers[name]
		if rt == nil {
			auditScript := func(rec *audit.Record) { // a code-mode script's call, through this view
				rec.View = key
				g.audit.Log(rec)
			}
			rt = router.New(v, router.Options{Version: buildinfo.Version(), Timeout: cfg.Timeout, Logger: g.log, Audit: auditScript})
			g.routers[name] = rt
		} else {
			rt.Update(v)
		}
		out[name] = rt
		front := g.guarded(cfg, rt, policy.ViewEndpoint(name))
		msgPath := "/message"
		if name != "" {
			msgPath += "/" + name
		}
		t.MCP[name], t.Stream[name], t.Message[name] = g.fronts(cfg, front,
			streamable.Options{Name: key, View: true, Timeout: cfg.Timeout, ParamHeaders: rt.ParamHeaders}, msgPath)
		names := make([]string, 0, len(v.Servers))
		for _, s := range v.Servers {
			names = append(names, s.Name())
		}
		g.log.Debug("aggregated view", "view", name, "servers", names, "tool_prefix", v.Prefix)
	}
	return out
}

// RouterLayout is what package router knows of cfg's destinations,
// namespaces and groups (for router.Views and router.Members).
func RouterLayout(cfg *config.Config) *router.Layout {
	l := &router.Layout{Names: cfg.Names, Namespaces: map[string]*router.Namespace{}, Groups: map[string]*router.Group{}}
	for name, ns := range cfg.Namespaces {
		shape := router.Shaping{Prefixes: ns.Prefix}
		if ns.Overrides != nil {
			shape.Overrides = map[string]map[string]*router.ToolOverride{}
			for server, tools := range ns.Overrides {
				shape.Overrides[server] = map[string]*router.ToolOverride{}
				for tool, o := range tools {
					shape.Overrides[server][tool] = &router.ToolOverride{Name: o.Name, Title: o.Title,
						Description: o.Description, Hide: o.Hide, Annotations: o.Annotations}
				}
			}
		}
		s := ns.Sandbox
		l.Namespaces[name] = &router.Namespace{Servers: ns.Servers, Isolated: ns.Isolated, Extends: ns.Extends,
			ToolPrefix: ns.ToolPrefix, Tools: router.Filter{Allow: ns.Tools.Allow, Deny: ns.Tools.Deny}, Shape: shape,
			ToolSearch: ns.ToolSearch, CodeMode: ns.CodeMode, Sandbox: sandbox.Limits{Timeout: s.Timeout, Memory: s.Memory,
				MaxCalls: s.MaxCalls, MaxOutput: s.MaxOutput, Concurrency: s.Concurrency}}
	}
	for name, g := range cfg.Groups {
		l.Groups[name] = &router.Group{Namespaces: g.Namespaces, Forced: g.Forced}
	}
	return l
}

// ServeStdio serves one view ("" the default view) as a single MCP server
// on in and out (newline-delimited JSON-RPC) until in ends or ctx is done,
// then stops every destination. Logs never go to out.
func (g *Gateway) ServeStdio(ctx context.Context, view string, in io.Reader, out io.Writer) error {
	cur := g.state()
	rt := cur.routers[view]
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
		if !cur.table.Authority.Client(name).MayOpen(e) {
			return fmt.Errorf("gateway: client %s may not use %s (its namespaces)", name, e)
		}
		ctx = auth.NewContext(ctx, &auth.Identity{Client: &auth.Client{Name: name, Spec: clientSpec(name, c)}, Method: "stdio"})
		front = policy.Wrap(rt, policy.Options{Access: g.edge.AccessOf, Endpoint: e, ChargeRequests: true, IdentityMeta: cur.cfg.Auth.IdentityMeta})
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
