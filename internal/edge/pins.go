package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
)

// PinApproval is POST /ui/pins/approve's body: the destination and the
// tool (or "instructions") with the digest the status page showed.
type PinApproval struct {
	Destination string `json:"destination"`
	Tool        string `json:"tool"`
	Digest      string `json:"digest"`
}

// MayApprove reports whether r's caller may approve pins: an
// authenticated client with admin: true.
func MayApprove(r *http.Request) bool {
	id := auth.FromContext(r.Context())
	return id != nil && id.Client.MayApprove()
}

// ApprovePins serves POST /ui/pins/approve (mount it behind PermitStatus
// and http.CrossOriginProtection): 403 but for an admin, 415 but for JSON,
// 400 for a body that is not one PinApproval, else what approve answers
// (an HTTP status and, when it is not 204, why). Each approval or refusal
// of an admin is written to log.
func ApprovePins(approve func(PinApproval) (status int, why string), log *audit.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !MayApprove(r) {
			http.Error(w, "approving tools needs an authenticated client with admin: true", http.StatusForbidden)
			return
		}
		if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
			http.Error(w, "want Content-Type: application/json", http.StatusUnsupportedMediaType)
			return
		}
		var req PinApproval
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Destination == "" || req.Tool == "" || req.Digest == "" {
			http.Error(w, `want {"destination": …, "tool": …, "digest": …}`, http.StatusBadRequest)
			return
		}
		rec := &audit.Record{Time: time.Now(), Destination: req.Destination, Client: auth.FromContext(r.Context()).Client.Spec.Name,
			SourceIP: audit.SourceIP(r), HTTPMethod: r.Method, Path: r.URL.Path, Tool: req.Tool}
		status, why := approve(req)
		rec.Status = status
		if status == http.StatusNoContent {
			rec.Guard = "pin approved (ui)"
		} else {
			rec.Guard, rec.Error = "pin approval refused (ui)", why
		}
		log.Log(rec)
		if status != http.StatusNoContent {
			http.Error(w, why, status)
			return
		}
		w.WriteHeader(status)
	}
}
