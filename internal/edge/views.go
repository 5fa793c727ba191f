package edge

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// HeaderNamespace names the view of a request to an aggregated endpoint;
// it takes precedence over the path.
const HeaderNamespace = "X-Namespace"

// viewHandlers pick the current views' handlers of each endpoint.
var viewHandlers = map[string]func(*Table) map[string]http.Handler{
	"mcp":     func(t *Table) map[string]http.Handler { return t.MCP },
	"sse":     func(t *Table) map[string]http.Handler { return t.Stream },
	"message": func(t *Table) map[string]http.Handler { return t.Message },
}

// routeViews registers the aggregated endpoints: /mcp, /sse and /message,
// each with and without /{name}.
func (e *Edge) routeViews(mux *http.ServeMux) {
	for ep, pick := range viewHandlers {
		shadowed := "" // a destination's routes may share /message/{name}
		if ep == "message" {
			shadowed = ep
		}
		h := e.serveView(pick, shadowed)
		mux.HandleFunc("/"+ep, h)
		mux.HandleFunc("/"+ep+"/{name}", h)
	}
}

// viewRoutes serves a namespace or group at /{name}/mcp, /{name}/sse and
// /{name}/message too, by endpoint: the handler reads the name from the
// "name" path value, which the caller sets. Clients that rewrite any path
// not ending in /mcp (inspector 0.15) reach a view only there. A
// destination of the same name would take these paths; config validation
// refuses that (`switchboard check` reports it).
func (e *Edge) viewRoutes() map[string]http.HandlerFunc {
	out := map[string]http.HandlerFunc{}
	for ep, pick := range viewHandlers {
		out[ep] = e.serveView(pick, "")
	}
	return out
}

// serveView dispatches to the handler of the view the request names.
// shadowed is the first path segment that a destination's routes may share
// ("message").
func (e *Edge) serveView(pick func(*Table) map[string]http.Handler, shadowed string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		handlers := pick(e.table())
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
	if s := e.opts.Sessions.Get(querySession(r)); s != nil {
		return s.Dest
	}
	return ""
}

// querySession is the session a legacy POST names in its query:
// session_id, or sessionId.
func querySession(r *http.Request) string {
	q := r.URL.Query()
	return cmp.Or(q.Get("session_id"), q.Get("sessionId"))
}
