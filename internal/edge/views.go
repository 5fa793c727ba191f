package edge

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// HeaderNamespace names the view of a request to an aggregated endpoint;
// it takes precedence over the path.
const HeaderNamespace = "X-Namespace"

// routeViews registers the aggregated endpoints.
func (e *Edge) routeViews(mux *http.ServeMux) {
	for _, p := range []string{"/mcp", "/mcp/{name}"} {
		mux.HandleFunc(p, e.serveView(e.currentViews(func(t *Table) map[string]http.Handler { return t.MCP }), ""))
	}
	for _, p := range []string{"/sse", "/sse/{name}"} {
		mux.HandleFunc(p, e.serveView(e.currentViews(func(t *Table) map[string]http.Handler { return t.Stream }), ""))
	}
	for _, p := range []string{"/message", "/message/{name}"} {
		mux.HandleFunc(p, e.serveView(e.currentViews(func(t *Table) map[string]http.Handler { return t.Message }), "message"))
	}
}

// viewRoutes serves a namespace or group at /{name}/mcp, /{name}/sse and
// /{name}/message too, by endpoint: the handler reads the name from the
// "name" path value, which the caller sets. Clients that rewrite any path
// not ending in /mcp (inspector 0.15) reach a view only there. A
// destination of the same name would take these paths; config validation
// refuses that (`switchboard check` reports it).
func (e *Edge) viewRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"mcp":     e.serveView(e.currentViews(func(t *Table) map[string]http.Handler { return t.MCP }), ""),
		"sse":     e.serveView(e.currentViews(func(t *Table) map[string]http.Handler { return t.Stream }), ""),
		"message": e.serveView(e.currentViews(func(t *Table) map[string]http.Handler { return t.Message }), ""),
	}
}

// currentViews returns a func that picks, with f, the handlers of the
// current configuration's views.
func (e *Edge) currentViews(f func(*Table) map[string]http.Handler) func() map[string]http.Handler {
	return func() map[string]http.Handler { return f(e.table()) }
}

// serveView dispatches to the handler of the view the request names.
// shadowed is the first path segment that a destination's routes may share
// ("message").
func (e *Edge) serveView(current func() map[string]http.Handler, shadowed string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		handlers := current()
		name := r.PathValue("name")
		header := canonicalHeader(r.Header, HeaderNamespace)
		if shadowed != "" && header == "" && name != "" {
			if d := e.table().Fronts[shadowed+"/"+name]; d != nil {
				_, isView := handlers[name]
				if !isView || e.sessionDest(r) == shadowed {
					if e.permitDestination(w, r, shadowed) {
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
		if !e.permitView(w, r, name) {
			return
		}
		h.ServeHTTP(w, r)
	}
}

// sessionDest returns the destination of the session a legacy POST names.
func (e *Edge) sessionDest(r *http.Request) string {
	id := r.URL.Query().Get("session_id")
	if id == "" {
		id = r.URL.Query().Get("sessionId")
	}
	if s := e.opts.Sessions.Get(id); s != nil {
		return s.Dest
	}
	return ""
}
