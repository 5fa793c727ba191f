package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/guard/gate"
	"github.com/switchboard-mcp/switchboard/internal/statusui"
)

// Pins on /ui: the status page lists, per destination with pinning on,
// the tools its gate last saw listed that are not approved (with the diff
// `switchboard pin` prints), and an authenticated admin (a client with
// admin: true) approves one with POST /ui/pins/approve. The approval is
// `switchboard pin --approve --destination D TOOL`'s: the pin file is
// read, guard.Approve records the definition the page showed (its digest
// must still be the listed one), the file is written, and the gateway
// reloads, so the gate's pins change and its sessions are told
// notifications/tools/list_changed.

// pinGates returns the gates with pinning on, by destination name.
func (g *Gateway) pinGates(cur *state) map[string]*gate.Gate {
	out := map[string]*gate.Gate{}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	for name, d := range cur.dests {
		if gt := g.gates[d]; gt != nil && gt.Settings().Pinning != guard.Off {
			out[name] = gt
		}
	}
	return out
}

// uiPins is the page's pins section.
func (g *Gateway) uiPins(cur *state) []statusui.PinStanding {
	gates := g.pinGates(cur)
	out := []statusui.PinStanding{}
	for _, n := range slices.Sorted(maps.Keys(gates)) {
		gt := gates[n]
		st := gt.Standing()
		ps := statusui.PinStanding{Destination: n, Mode: string(gt.Settings().Pinning), Listed: st.Listed, Tools: []statusui.PinTool{}}
		for _, t := range st.Tools {
			if t.Status != guard.Approved && (st.Listed || t.Status != guard.Removed) {
				ps.Tools = append(ps.Tools, statusui.PinTool{Name: t.Name, Status: string(t.Status), Digest: t.Digest, Diff: t.Diff})
			}
		}
		if st.Comparison.Instructions != guard.Approved && st.Comparison.Instructions != "" && st.Instructions != nil {
			ps.Instructions, ps.InstructionsDiff = string(st.Comparison.Instructions), st.InstructionsDiff
			ps.InstructionsDigest = guard.InstructionsDigest(*st.Instructions)
		}
		out = append(out, ps)
	}
	return out
}

// mayApprove reports whether r's caller may approve pins.
func mayApprove(r *http.Request) bool {
	id := auth.FromContext(r.Context())
	return id != nil && id.Client.MayApprove()
}

// approveRequest is POST /ui/pins/approve's body: the destination and the
// tool (or "instructions") with the digest the page showed.
type approveRequest struct {
	Destination string `json:"destination"`
	Tool        string `json:"tool"`
	Digest      string `json:"digest"`
}

// approvePins serves POST /ui/pins/approve (behind PermitStatus and
// http.CrossOriginProtection): 403 but for an admin, 415 but for JSON,
// 404 for a destination without pinning, 409 when the tool is no longer
// listed as the page showed it, 204 once the pin file is written and the
// gateway reloaded. Each approval or refusal of an admin is audited.
func (g *Gateway) approvePins(w http.ResponseWriter, r *http.Request) {
	cur := g.state()
	if !cur.cfg.UI.Enabled {
		http.NotFound(w, r)
		return
	}
	if !mayApprove(r) {
		http.Error(w, "approving tools needs an authenticated client with admin: true", http.StatusForbidden)
		return
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
		http.Error(w, "want Content-Type: application/json", http.StatusUnsupportedMediaType)
		return
	}
	var req approveRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Destination == "" || req.Tool == "" || req.Digest == "" {
		http.Error(w, `want {"destination": …, "tool": …, "digest": …}`, http.StatusBadRequest)
		return
	}
	rec := &audit.Record{Time: time.Now(), Destination: req.Destination, Client: auth.FromContext(r.Context()).Client.Spec.Name,
		SourceIP: audit.SourceIP(r), HTTPMethod: r.Method, Path: r.URL.Path, Tool: req.Tool}
	status, msg := g.approve(cur, req)
	rec.Status = status
	if status == http.StatusNoContent {
		rec.Guard = "pin approved (ui)"
	} else {
		rec.Guard, rec.Error = "pin approval refused (ui)", msg
	}
	g.audit.Log(rec)
	if status != http.StatusNoContent {
		http.Error(w, msg, status)
		return
	}
	w.WriteHeader(status)
}

// approve records req in the pin file and reloads: an HTTP status and,
// when it is not 204, why.
func (g *Gateway) approve(cur *state, req approveRequest) (int, string) {
	gt := g.pinGates(cur)[req.Destination]
	if gt == nil {
		return http.StatusNotFound, fmt.Sprintf("no destination %q with pinning on", req.Destination)
	}
	path := ""
	if cur.cfg.Guards != nil {
		path = cur.cfg.Guards.Pins
	}
	if path == "" {
		return http.StatusInternalServerError, "no pin file: the config was not loaded from a file"
	}
	st := gt.Standing()
	if req.Tool == "instructions" {
		if st.Instructions == nil || guard.InstructionsDigest(*st.Instructions) != req.Digest {
			return http.StatusConflict, "the instructions changed since the page showed them; reload it"
		}
	} else {
		i := slices.IndexFunc(st.Definitions, func(d guard.Definition) bool { return d.Name == req.Tool })
		if i < 0 || st.Definitions[i].Digest != req.Digest {
			return http.StatusConflict, fmt.Sprintf("tool %q is no longer listed as the page showed it; reload it", req.Tool)
		}
	}
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	pf, err := guard.LoadPins(path)
	if err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	guard.Approve(pf.Server(req.Destination), st.Definitions, st.Instructions, time.Now(), req.Tool)
	if err := guard.SavePins(path, pf); err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	g.Reload(cur.cfg)
	return http.StatusNoContent, ""
}

// uiStatusPins fills in the page's pins and whether the viewer may
// approve them.
func (g *Gateway) uiStatusPins(r *http.Request, cur *state, st *statusui.Status) {
	if cur.cfg.Guards == nil {
		return
	}
	st.Pins = g.uiPins(cur)
	st.Admin = mayApprove(r)
}
