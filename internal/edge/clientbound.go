package edge

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/connlimit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// clientRequests counts the requests in progress of each authenticated
// client, for the bound connections.per_client: on HTTP/1.1 each request
// in progress holds a connection, so one client with many long requests
// (streams, slow calls) could otherwise hold every connection under the
// cap.
type clientRequests struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu: requests in progress by client name; no zero entries
}

// enter counts one request of name in, unless max are in progress
// already; it reports whether it did.
func (c *clientRequests) enter(name string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[name] >= max {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return true
}

// leave ends one enter.
func (c *clientRequests) leave(name string) {
	c.mu.Lock()
	if c.n[name]--; c.n[name] <= 0 {
		delete(c.n, name)
	}
	c.mu.Unlock()
}

// clientBound answers 429 to an authenticated client's request beyond its
// bound of requests in progress (Options.PerClient). Requests without a
// client (auth off, or the unauthenticated routes) and the probes are not
// counted.
func (e *Edge) clientBound(next http.Handler) http.Handler {
	bound := e.opts.PerClient
	if bound <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := auth.FromContext(r.Context())
		if id == nil || connlimit.ProbePath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		name := id.Name()
		if !e.clientReqs.enter(name, bound) {
			msg := fmt.Sprintf("client %s has %d requests in progress, its bound (connections.per_client)", name, bound)
			audit.FromContext(r.Context()).Error = msg
			w.Header().Set("Retry-After", strconv.Itoa(1))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write(jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "%s", msg)).Encode())
			return
		}
		defer e.clientReqs.leave(name)
		next.ServeHTTP(w, r)
	})
}
