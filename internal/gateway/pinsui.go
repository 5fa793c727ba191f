package gateway

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/edge"
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

// approve records req in the pin file and reloads (edge.ApprovePins's
// approve): an HTTP status and, when it is not 204, why.
func (g *Gateway) approve(req edge.PinApproval) (int, string) {
	cur := g.state()
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
