package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// health is the liveness probe of the projects Switchboard replaces: it
// answers 200 while the process serves, whatever the destinations' state
// (/healthz has that). Its body has the shape the configuration file's
// project used: MCProxy's {"status":"healthy","version":...} for an
// mcproxy.json, mithril-proxy's {"status":"ok"} otherwise (plus the
// version). It is routed for GET and HEAD only.
func (g *Gateway) health(w http.ResponseWriter, r *http.Request) {
	status := "ok"
	if g.state().cfg.Format == config.FormatMCProxy {
		status = "healthy"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		Status  string `json:"status"`
		Version string `json:"version"`
	}{status, buildinfo.Version()})
}

// readyz is the readiness probe: 200 while the gateway serves, 503 once it
// has begun to shut down (connections still open get that answer while
// they drain). It needs no credentials and tells nothing of the
// destinations (/healthz has them).
func (g *Gateway) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	select {
	case <-g.done:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"shutting down"}` + "\n"))
	default:
		_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
	}
}
