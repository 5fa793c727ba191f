package config

import (
	"path/filepath"
	"slices"
	"strings"
)

// Guards configures the checks between clients and servers (`guards`;
// docs/guards.md): tool pinning against rug pulls, and detectors of hidden
// characters, exfiltrating markup, secrets and personal data in tools/call
// arguments and results. Nil (no guards block): no guard runs and the
// request path is as without guards.
type Guards struct {
	// Pins is the pin file (`pins`): the approved tool definitions, written
	// by `switchboard pin --approve`. Default "": beside the config, its
	// name with .pins.json for its extension (switchboard.yaml ->
	// switchboard.pins.json). A relative path is the config's folder's.
	Pins string `yaml:"pins"`

	// MaxBytes caps the string bytes the detectors scan per message
	// (`max_bytes`); the rest passes unscanned. Default 1 MiB.
	MaxBytes int64 `yaml:"max_bytes" min:"1"`

	// AllowHosts are the hosts markup may point at with data in the query
	// (`allow_hosts`; a host allows its subdomains). Default none.
	AllowHosts []string `yaml:"allow_hosts"`

	// Defaults apply to every destination (`defaults`); each key a
	// destination leaves out is taken from here.
	Defaults GuardSettings `yaml:"defaults"`

	// Destinations override Defaults per destination name
	// (`destinations`).
	Destinations map[string]*GuardSettings `yaml:"destinations"`

	// Hook is an external classifier asked about calls (`hook`;
	// guardhook.go). Nil: none.
	Hook *GuardHook `yaml:"hook" decode:"optional"`
}

// GuardSettings are the guards of one destination (or their defaults).
// An unset key takes the defaults' value; the defaults' zero values are
// pinning off, no detectors, action monitor.
type GuardSettings struct {
	// Pinning is what a tool that changed since its approval, or was never
	// approved, gets (`pinning`): off, monitor (listed and callable, one
	// audit line with the diff) or block (left out of tools/list and
	// refused on tools/call until approved). "" inherits; the default is
	// off.
	Pinning string `yaml:"pinning"`

	// Detectors run over tools/call arguments and results (`detectors`):
	// any of hidden, markup, secrets, pii. Nil inherits; [] runs none.
	Detectors []string `yaml:"detectors"`

	// Action is what a detection does (`action`): monitor (an audit line
	// naming detector, rule and where; the message passes), redact (secrets
	// and personal data replaced by [REDACTED:rule], hidden characters and
	// markup removed) or block (the call refused, or its result replaced
	// by an error naming the rule). "" inherits; the default is monitor.
	Action string `yaml:"action"`
}

// Guard modes and actions, as written in the config.
const (
	GuardOff     = "off"
	GuardMonitor = "monitor"
	GuardRedact  = "redact"
	GuardBlock   = "block"
)

// Detectors is every detector the guards know, as written in the config.
var Detectors = []string{"hidden", "markup", "secrets", "pii"}

// DefaultGuardMaxBytes is Guards.MaxBytes's default.
const DefaultGuardMaxBytes = 1 << 20

// For returns destination name's settings: its own keys over the defaults,
// with the defaults' defaults filled in. Nil Guards: everything off.
func (g *Guards) For(name string) GuardSettings {
	if g == nil {
		return GuardSettings{Pinning: GuardOff, Action: GuardMonitor}
	}
	s := g.Defaults
	if o := g.Destinations[name]; o != nil {
		if o.Pinning != "" {
			s.Pinning = o.Pinning
		}
		if o.Detectors != nil {
			s.Detectors = o.Detectors
		}
		if o.Action != "" {
			s.Action = o.Action
		}
	}
	if s.Pinning == "" {
		s.Pinning = GuardOff
	}
	if s.Action == "" {
		s.Action = GuardMonitor
	}
	return s
}

// Enabled reports whether s checks anything.
func (s GuardSettings) Enabled() bool {
	return s.Pinning != GuardOff && s.Pinning != "" || len(s.Detectors) > 0
}

// finishGuards fills in the pin file's path and the byte cap.
func (d *decoder) finishGuards(c *Config, filename string) {
	g := c.Guards
	if g == nil {
		return
	}
	if g.MaxBytes == 0 {
		g.MaxBytes = DefaultGuardMaxBytes
	}
	switch {
	case g.Pins == "" && filename != "":
		g.Pins = strings.TrimSuffix(filename, filepath.Ext(filename)) + ".pins.json"
	case g.Pins != "" && !filepath.IsAbs(g.Pins):
		g.Pins = filepath.Join(filepath.Dir(filename), g.Pins)
	}
}

// validateGuards reports invalid modes, actions, detectors and unknown
// destinations.
func (d *decoder) validateGuards(c *Config) {
	g := c.Guards
	if g == nil {
		return
	}
	check := func(p string, s *GuardSettings) {
		if s.Pinning != "" && !slices.Contains([]string{GuardOff, GuardMonitor, GuardBlock}, s.Pinning) {
			d.errorAt(p+".pinning", p+".pinning", "invalid mode %q: want off, monitor or block", s.Pinning)
		}
		if s.Action != "" && !slices.Contains([]string{GuardMonitor, GuardRedact, GuardBlock}, s.Action) {
			d.errorAt(p+".action", p+".action", "invalid action %q: want monitor, redact or block", s.Action)
		}
		for i, det := range s.Detectors {
			if !slices.Contains(Detectors, det) {
				ip := index(p+".detectors", i)
				d.errorAt(ip, ip, "unknown detector %q: want hidden, markup, secrets or pii", det)
			}
		}
	}
	check("guards.defaults", &g.Defaults)
	for _, name := range d.order["guards.destinations"] {
		p := "guards.destinations." + name
		if _, ok := c.Destinations[name]; !ok {
			d.errorAt(p, p, "unknown destination %q", name)
			continue
		}
		check(p, g.Destinations[name])
	}
	for i, h := range g.AllowHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			ip := index("guards.allow_hosts", i)
			d.errorAt(ip, ip, "invalid host %q: want a host name such as example.com", h)
		}
	}
}
