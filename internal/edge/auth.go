package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/policy"
)

// Inbound authentication (internal/auth): authenticate runs between the
// guard and the routes and puts the caller's identity in the request
// context; each route then admits the caller or answers 403 (permit*), as
// the route knows what it serves.

// authenticate answers 401 (or 503 when the issuer's keys cannot be had)
// to a request whose credentials are missing or wrong, and serves the
// others with their identity in the context. /health, /readyz, the
// RFC 9728 metadata and the OAuth login redirects (whose state is their
// credential) need no credentials.
func (e *Edge) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := e.table()
		a := st.Auth
		p := r.URL.Path
		hop := false
		if c := e.opts.Cluster; c != nil { // Hop is false at once without its header
			var err error
			if hop, err = c.Hop(r); err != nil {
				audit.FromContext(r.Context()).Error = "cluster: forwarded request refused: " + err.Error()
				http.Error(w, "forwarded request refused", http.StatusForbidden)
				return
			}
		}
		if a == nil || p == "/health" || p == "/readyz" || p == auth.MetadataPath || strings.HasPrefix(p, auth.MetadataPath+"/") ||
			strings.HasPrefix(p, callbackPrefix) {
			if e.opts.Cluster != nil && !hop && e.forward(w, r, nil) {
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		ep := endpointOf(p)
		id, f := a.Authenticate(r, ep)
		rec := audit.FromContext(r.Context())
		if f != nil {
			rec.Error = "auth: " + f.Description
			a.Challenge(w, f, ep)
			return
		}
		if id != nil && !hop {
			// A forwarded request was charged at the replica it came to.
			rec.Client = id.Name()
			if e.overRate(w, r, st.Authority.Of(id)) {
				return
			}
		}
		if e.opts.Cluster != nil && !hop && e.forward(w, r, id) {
			return
		}
		// The caller's credential is the gateway's, never an upstream's:
		// no forward_headers entry can pass it on.
		r.Header.Del("Authorization")
		r.Header.Del("X-Api-Key")
		if h := st.IdentityHeader; h != "" {
			// Upstreams trust this header: never the client's own.
			r.Header.Del(h)
			if id != nil {
				r.Header.Set(h, id.Name())
			}
		}
		if id != nil {
			rec.Client = id.Name()
		}
		if !e.sessionOwner(w, r, id) {
			return
		}
		if id == nil {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.NewContext(r.Context(), id)))
	})
}

// forward serves r at the replica owning its session, or holding the
// call a 2026-07-28 retry resumes (its requestState), when that is another
// live replica (Options.Cluster), and reports whether it did. A session
// this replica holds is served here.
func (e *Edge) forward(w http.ResponseWriter, r *http.Request, id *auth.Identity) bool {
	sid := r.Header.Get(mcp.HeaderSessionID)
	if sid != "" && e.opts.Sessions.Get(sid) != nil {
		return false
	}
	return e.opts.Cluster.Forward(w, r, id)
}

// endpointOf is the MCP endpoint a path belongs to, as a resource: the
// legacy message endpoints belong to their stream's. "" for other routes.
func endpointOf(p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	stream := func(s string) bool { return s == "mcp" || s == "sse" }
	switch {
	case len(segs) == 1 && segs[0] == "message":
		return "/sse"
	case len(segs) == 1 && stream(segs[0]), len(segs) == 2 && (stream(segs[0]) || stream(segs[1])):
		return p
	case len(segs) == 2 && segs[1] == "message":
		return "/" + segs[0] + "/sse"
	case len(segs) == 2 && segs[0] == "message":
		return "/sse/" + segs[1]
	}
	return ""
}

// permitDestination reports whether the caller may use destination name's
// endpoints, answering 403 when not.
func (e *Edge) permitDestination(w http.ResponseWriter, r *http.Request, name string) bool {
	id := auth.FromContext(r.Context())
	if e.table().Authority.Of(id).MayOpen(policy.DestinationEndpoint(name)) {
		return true
	}
	audit.FromContext(r.Context()).Error = "auth: client " + id.Name() + " may not use destination " + name
	auth.Forbid(w, id, "destination "+name)
	return false
}

// permitView is permitDestination for a namespace or group ("" the
// default view).
func (e *Edge) permitView(w http.ResponseWriter, r *http.Request, name string) bool {
	id := auth.FromContext(r.Context())
	if e.table().Authority.Of(id).MayOpen(policy.ViewEndpoint(name)) {
		return true
	}
	what := "namespace " + name
	if name == "" {
		what = "the default view (/mcp)"
	}
	audit.FromContext(r.Context()).Error = "auth: client " + id.Name() + " may not use " + what
	auth.Forbid(w, id, what)
	return false
}

// PermitStatus guards /healthz, /metrics and /ui.
func PermitStatus(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := auth.FromContext(r.Context())
		if id == nil || id.Client.MayReadStatus() {
			next(w, r)
			return
		}
		auth.Forbid(w, id, "the status endpoints (/healthz, /metrics, /ui)")
	}
}

// serveMetadata answers the RFC 9728 protected-resource metadata.
func (e *Edge) serveMetadata(w http.ResponseWriter, r *http.Request) {
	a := e.table().Auth
	if a == nil {
		http.NotFound(w, r)
		return
	}
	a.ServeMetadata(w, r)
}

// sessionOwner answers 404, as for an unknown session, when the request
// names a session another caller opened (Mcp-Session-Id, or the legacy
// message endpoint's session_id), and reports whether it may go on.
func (e *Edge) sessionOwner(w http.ResponseWriter, r *http.Request, id *auth.Identity) bool {
	sid := r.Header.Get(mcp.HeaderSessionID)
	if sid == "" {
		sid = querySession(r)
	}
	if sid == "" {
		return true
	}
	if owner, ok := e.opts.Owners.Of(sid); !ok || owner == id.Name() {
		return true
	}
	audit.FromContext(r.Context()).Error = "auth: client " + id.Name() + " named a session of another client"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"session not found"}}` + "\n"))
	return false
}

// AccessOf returns the access of a request's caller under the current
// Table (policy.Options.Access).
func (e *Edge) AccessOf(ctx context.Context) *policy.Access {
	return e.table().Authority.Of(auth.FromContext(ctx))
}

// overRate answers 429 with Retry-After when the caller's client is over
// its rate limit, and reports whether it did.
func (e *Edge) overRate(w http.ResponseWriter, r *http.Request, acc *policy.Access) bool {
	ok, wait := acc.Take(time.Now())
	if ok {
		return false
	}
	secs := policy.RetryAfterSeconds(wait)
	audit.FromContext(r.Context()).Error = "rate limit of client " + acc.Client() + " exceeded"
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"rate limit of client %s exceeded; retry after %ds","data":{"retryAfter":%d}}}`+"\n",
		mcp.CodeRequestRefused, acc.Client(), secs, secs)
	return true
}

// Gone is the handler of /{name}/sse and /{name}/message of a destination
// whose legacy HTTP+SSE transport is disabled: 410, pointing to /{name}/mcp.
func Gone(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		audit.FromContext(r.Context()).Destination = name
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"error": fmt.Sprintf("the legacy HTTP+SSE transport is disabled for %s; use Streamable HTTP at /%s/mcp", name, name),
		})
	})
}
