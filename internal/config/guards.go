package config

import (
	"cmp"
	"path/filepath"
	"regexp"
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

	// PII configures the pii detector (`pii`). Zero: e-mail, card and IBAN
	// rules, no national ids.
	PII GuardPII `yaml:"pii"`
}

// GuardPII configures the pii detector.
type GuardPII struct {
	// Disable turns rules off (`disable`): any of email, card, iban.
	// Default none.
	Disable []string `yaml:"disable"`
	// NationalIDs are national identifiers to find (`national_ids`), by
	// name: the rule id findings, placeholders ([REDACTED:name]) and allow
	// lists use. Default none.
	NationalIDs map[string]*GuardNationalID `yaml:"national_ids"`
}

// GuardNationalID is one national identifier's shape.
type GuardNationalID struct {
	// Pattern is its regular expression (`pattern`; RE2 syntax).
	// Required.
	Pattern string `yaml:"pattern"`
	// Check is what a match must pass (`check`): luhn, mod97 (ISO 7064)
	// or us-ssn (no 000, 666 or 9xx area, no 00 group, no 0000 serial).
	// Default "": none.
	Check string `yaml:"check"`
}

// GuardTool scopes the detectors on one tool's calls (under
// guards.destinations.NAME.tools, by the server's name for the tool).
type GuardTool struct {
	// Action replaces the destination's action for this tool (`action`):
	// monitor, redact or block. "": the destination's.
	Action string `yaml:"action"`
	// Allow lets findings through on this tool's calls (`allow`): a
	// detector (secrets, pii, hidden, markup) or a rule id (email, card,
	// iban, a national id's name, a gitleaks rule id such as
	// aws-access-token, a hidden-character rule such as bidi). Default
	// none.
	Allow []string `yaml:"allow"`
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

	// Descriptions is what hidden characters and markup in a listed
	// tool's strings (name, title, description, schemas, annotations) get
	// (`descriptions`): off, monitor (an audit line; the tool is listed
	// as it is), strip (listed without them) or block (left out of
	// tools/list and refused on tools/call). The markup check uses
	// allow_hosts. "" inherits; the default is off.
	Descriptions string `yaml:"descriptions"`

	// Shadowing is what a tool of this destination gets when an aggregated
	// view (/mcp, a namespace, a group, code mode) finds it shadowing
	// another server's: its name is another server's tool's too, or its
	// description names another server's distinctive tool (`shadowing`):
	// off, monitor (an audit line) or block (left out of that view; its
	// own endpoint still lists it). "" inherits; the default is off.
	Shadowing string `yaml:"shadowing"`

	// Tools scope the detectors per tool (`tools`; only under a
	// destination), by the server's name for the tool. Default none.
	Tools map[string]*GuardTool `yaml:"tools"`
}

// Guard modes and actions, as written in the config.
const (
	GuardOff     = "off"
	GuardMonitor = "monitor"
	GuardRedact  = "redact"
	GuardStrip   = "strip"
	GuardBlock   = "block"
)

// PIIRules are the pii detector's built-in rules, as written in the
// config.
var PIIRules = []string{"email", "card", "iban"}

// PIIChecks are the checks a national id may name ("" none).
var PIIChecks = []string{"luhn", "mod97", "us-ssn"}

// ruleID is the shape of a rule id in an allow list.
var ruleID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Detectors is every detector the guards know, as written in the config.
var Detectors = []string{"hidden", "markup", "secrets", "pii"}

// DefaultGuardMaxBytes is Guards.MaxBytes's default.
const DefaultGuardMaxBytes = 1 << 20

// For returns destination name's settings: its own keys over the defaults,
// with the defaults' defaults filled in. Nil Guards: everything off.
func (g *Guards) For(name string) GuardSettings {
	if g == nil {
		return GuardSettings{Pinning: GuardOff, Action: GuardMonitor, Descriptions: GuardOff, Shadowing: GuardOff}
	}
	s := g.Defaults
	s.Tools = nil
	if o := g.Destinations[name]; o != nil {
		s.Pinning = cmp.Or(o.Pinning, s.Pinning)
		if o.Detectors != nil {
			s.Detectors = o.Detectors
		}
		s.Action = cmp.Or(o.Action, s.Action)
		s.Descriptions = cmp.Or(o.Descriptions, s.Descriptions)
		s.Shadowing = cmp.Or(o.Shadowing, s.Shadowing)
		s.Tools = o.Tools
	}
	s.Pinning = cmp.Or(s.Pinning, GuardOff)
	s.Action = cmp.Or(s.Action, GuardMonitor)
	s.Descriptions = cmp.Or(s.Descriptions, GuardOff)
	s.Shadowing = cmp.Or(s.Shadowing, GuardOff)
	return s
}

// Enabled reports whether s checks anything.
func (s GuardSettings) Enabled() bool {
	on := func(m string) bool { return m != GuardOff && m != "" }
	return on(s.Pinning) || len(s.Detectors) > 0 || on(s.Descriptions) || on(s.Shadowing)
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
	for _, name := range d.order["guards.pii.national_ids"] {
		p := "guards.pii.national_ids." + name
		id := g.PII.NationalIDs[name]
		switch {
		case !ruleID.MatchString(name) || slices.Contains(PIIRules, name):
			d.errorAt(p, "invalid name %q: want a rule id of lower-case letters, digits and dashes, not email, card or iban", name)
		case id.Pattern == "":
			d.errorIn(p, p+".pattern", "missing: want the identifier's regular expression")
		default:
			if _, err := regexp.Compile(id.Pattern); err != nil {
				d.errorAt(p+".pattern", "invalid regular expression: %v", err)
			}
		}
		if id.Check != "" && !slices.Contains(PIIChecks, id.Check) {
			d.errorAt(p+".check", "unknown check %q: want luhn, mod97 or us-ssn", id.Check)
		}
	}
	for i, r := range g.PII.Disable {
		ip := index("guards.pii.disable", i)
		d.oneOf(ip, ip, "unknown rule", r, PIIRules...)
	}
	check := func(p string, s *GuardSettings) {
		// "" inherits.
		d.oneOf(p+".pinning", p+".pinning", "invalid mode", s.Pinning, "", GuardOff, GuardMonitor, GuardBlock)
		d.oneOf(p+".action", p+".action", "invalid action", s.Action, "", GuardMonitor, GuardRedact, GuardBlock)
		d.oneOf(p+".descriptions", p+".descriptions", "invalid mode", s.Descriptions, "", GuardOff, GuardMonitor, GuardStrip, GuardBlock)
		d.oneOf(p+".shadowing", p+".shadowing", "invalid mode", s.Shadowing, "", GuardOff, GuardMonitor, GuardBlock)
		for _, tool := range d.order[p+".tools"] {
			tp := p + ".tools." + tool
			t := s.Tools[tool]
			d.oneOf(tp+".action", tp+".action", "invalid action", t.Action, "", GuardMonitor, GuardRedact, GuardBlock)
			for i, a := range t.Allow {
				if !ruleID.MatchString(a) {
					d.errorAt(index(tp+".allow", i), "invalid rule %q: want a detector (secrets, pii, hidden, markup) or a rule id such as email or aws-access-token", a)
				}
			}
		}
		for i, det := range s.Detectors {
			ip := index(p+".detectors", i)
			d.oneOf(ip, ip, "unknown detector", det, Detectors...)
		}
	}
	check("guards.defaults", &g.Defaults)
	if g.Defaults.Tools != nil {
		d.errorAt("guards.defaults.tools", "per-tool settings belong to a destination: guards.destinations.NAME.tools")
	}
	for _, name := range d.order["guards.destinations"] {
		p := "guards.destinations." + name
		if _, ok := c.Destinations[name]; !ok {
			d.errorAt(p, "unknown destination %q", name)
			continue
		}
		check(p, g.Destinations[name])
	}
	for i, h := range g.AllowHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			d.errorAt(index("guards.allow_hosts", i), "invalid host %q: want a host name such as example.com", h)
		}
	}
}
