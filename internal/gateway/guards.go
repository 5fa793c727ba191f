package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/guard/gate"
)

// Guards (internal/guard/gate): a destination with guards configured is
// served through its Gate, by its own endpoint and by every view's router
// alike; one without is served as it is (nothing on its path). Gates live
// across reloads with their destination, so sessions keep them and a
// reload or an approval (the pin file is watched with the config) only
// updates their settings.

// server returns what serves destination d (named name) under cfg: its
// gate, made or updated, when cfg guards it; d itself otherwise. pins are
// the pin file's approvals. reloadMu is held.
func (g *Gateway) server(cfg *config.Config, name string, d *destination.Destination, pins *guard.PinFile) gate.Server {
	s := cfg.Guards.For(name)
	hc := cfg.Guards.HookFor(name)
	if !s.Enabled() && hc == nil {
		delete(g.gates, d)
		return d
	}
	set, err := guardSettings(cfg, s, pins.Destinations[name])
	if err != nil {
		g.log.Error("guards: detectors unavailable; the destination is served without them", "destination", name, "err", err)
	}
	if hc != nil {
		var herr error
		if set.Hook, herr = gateHook(hc); herr != nil {
			g.log.Error("guards: the hook's token is unavailable; checks are sent without it", "destination", name, "err", herr)
		}
	}
	if gt := g.gates[d]; gt != nil {
		gt.Update(set)
		return gt
	}
	gt := gate.New(d, set, gate.Options{Audit: g.audit.Log, Logger: g.log, Detected: g.metrics.GuardDetected})
	g.gates[d] = gt
	return gt
}

// loadPins reads cfg's pin file; an unreadable one is logged and taken as
// empty (block mode then hides every tool: it fails closed).
func (g *Gateway) loadPins(cfg *config.Config) *guard.PinFile {
	if cfg.Guards == nil {
		return &guard.PinFile{}
	}
	pf, err := guard.LoadPins(cfg.Guards.Pins)
	if err != nil {
		g.log.Error("guards: pin file unreadable; no tool counts as approved", "err", err)
		return &guard.PinFile{}
	}
	return pf
}

// dropGates forgets the gates of destinations no longer served.
func (g *Gateway) dropGates(dests map[string]*destination.Destination) {
	live := map[*destination.Destination]bool{}
	for _, d := range dests {
		live[d] = true
	}
	maps.DeleteFunc(g.gates, func(d *destination.Destination, _ *gate.Gate) bool { return !live[d] })
}

// secrets are compiled once: the rules take a while.
var secrets = sync.OnceValues(func() (guard.Detector, error) {
	return guard.NewSecrets(guard.SecretsConfig{})
})

// newPII compiles the pii detector of cfg's pii block (its national ids
// were validated with the config).
func newPII(cfg *config.Config) (guard.Detector, error) {
	pc := guard.PIIConfig{Disable: cfg.Guards.PII.Disable}
	for name, id := range cfg.Guards.PII.NationalIDs {
		pc.NationalIDs = append(pc.NationalIDs, guard.NationalID{Name: name, Pattern: id.Pattern, Check: id.Check})
	}
	slices.SortFunc(pc.NationalIDs, func(a, b guard.NationalID) int { return strings.Compare(a.Name, b.Name) })
	return guard.NewPII(pc)
}

// guardSettings translates a destination's guard settings.
func guardSettings(cfg *config.Config, s config.GuardSettings, pins *guard.ServerPins) (*gate.Settings, error) {
	out := &gate.Settings{Pinning: mode(s.Pinning), Action: mode(s.Action), MaxBytes: int(cfg.Guards.MaxBytes),
		Descriptions: mode(s.Descriptions), Shadowing: mode(s.Shadowing)}
	if pins != nil {
		out.Pins = *pins
	}
	markup := guard.Markup{AllowHosts: cfg.Guards.AllowHosts}
	if out.Descriptions != guard.Off {
		out.DescriptionDetectors = []guard.Detector{guard.Hidden{}, markup}
	}
	for tool, t := range s.Tools {
		ts := gate.ToolSettings{Action: mode(t.Action)}
		for _, a := range t.Allow {
			if a == "secrets" {
				a = "secret" // as findings name the detector
			}
			ts.Allow = append(ts.Allow, a)
		}
		if out.Tools == nil {
			out.Tools = map[string]gate.ToolSettings{}
		}
		out.Tools[tool] = ts
	}
	var errs []error
	for _, name := range s.Detectors {
		var d guard.Detector
		var err error
		switch name {
		case "hidden":
			d = guard.Hidden{}
		case "markup":
			d = markup
		case "secrets":
			d, err = secrets()
		case "pii":
			d, err = newPII(cfg)
		}
		if err != nil || d == nil {
			errs = append(errs, err)
			continue
		}
		out.Detectors = append(out.Detectors, gate.Detector{Name: name, Detector: d})
	}
	return out, errors.Join(errs...)
}

// gateHook translates the hook's configuration, reading its token (an
// error says why there is none; the hook is still used).
func gateHook(hc *config.GuardHook) (*gate.Hook, error) {
	h := &gate.Hook{URL: hc.URL, Timeout: hc.Timeout, FailClosed: hc.Fail == config.HookFailClosed,
		Arguments: hc.Sends(config.HookArguments), Result: hc.Sends(config.HookResult), MaxBytes: int(hc.MaxBytes)}
	switch {
	case hc.TokenEnv != "":
		tok, ok := os.LookupEnv(hc.TokenEnv)
		if !ok || tok == "" {
			return h, fmt.Errorf("environment variable %s is not set", hc.TokenEnv)
		}
		h.Token = tok
	case hc.TokenFile != "":
		b, err := os.ReadFile(hc.TokenFile)
		if err != nil {
			return h, fmt.Errorf("token file: %w", err)
		}
		tok, _, _ := strings.Cut(string(b), "\n")
		if tok = strings.TrimSpace(tok); tok == "" {
			return h, fmt.Errorf("token file %s is empty", hc.TokenFile)
		}
		h.Token = tok
	}
	return h, nil
}

// modes are the guard modes of the config's words; any other word is
// guard.Off (the zero Mode).
var modes = map[string]guard.Mode{config.GuardMonitor: guard.Monitor, config.GuardRedact: guard.Redact,
	config.GuardStrip: guard.Strip, config.GuardBlock: guard.Block}

func mode(s string) guard.Mode { return modes[s] }

// ListTools starts destination name of cfg on its own (not through a
// running gateway), lists its tools (destination.ListTools) and stops it:
// what `switchboard pin` compares with the pin file.
func ListTools(ctx context.Context, cfg *config.Config, name string, log *slog.Logger) (*destination.Listing, error) {
	dc := cfg.Destinations[name]
	if dc == nil {
		return nil, fmt.Errorf("no destination named %q", name)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gw := &Gateway{log: log}
	d := gw.newDestination(dc, cfg)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Close(cctx)
	}()
	return destination.ListTools(ctx, d)
}
