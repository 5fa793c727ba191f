package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Health is /healthz's answer.
type Health struct {
	// Status is "ok", or "degraded" while a destination is failed,
	// unreachable or waiting for a login (Healthz sets it).
	Status       string       `json:"status"`
	ConfigLoaded string       `json:"config_loaded_at"` // RFC 3339
	LastReload   Reload       `json:"last_reload"`
	Destinations []HealthDest `json:"destinations"`
}

// Reload is the outcome of the last reload.
type Reload struct {
	Time  time.Time `json:"time"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// HealthDest is one destination's state in Health.
type HealthDest struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	Sessions int    `json:"sessions"` // client sessions of /{name}/…
	// Members counts the client sessions the destination serves,
	// directly or through aggregated endpoints; Children its
	// per-session processes (isolation: session).
	Members  int `json:"members"`
	Children int `json:"children"`
	// NextRetry is when a failed destination accepts work again
	// (RFC 3339); a request or a reload then starts it.
	NextRetry string `json:"next_retry,omitempty"`
}

// Healthz serves /healthz: what report gives for the request, with its
// Status set.
func Healthz(report func(context.Context) Health) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := report(r.Context())
		h.Status = "ok"
		for _, d := range h.Destinations {
			if d.State == "failed" || d.State == "unreachable" || d.State == "needs_login" {
				h.Status = "degraded"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h)
	}
}
