package config

import (
	"path/filepath"
	"reflect"
	"testing"
)

func init() {
	expectedErrors = append(expectedErrors, []struct{ filename, errMsg string }{
		{"guards_mode.bad.yaml", `:3: guards.defaults.pinning: invalid mode "strict": want off, monitor or block`},
		{"guards_action.bad.yaml", `:3: guards.destinations.fs.action: invalid action "drop": want monitor, redact or block`},
		{"guards_detector.bad.yaml", `:3: guards.defaults.detectors[1]: unknown detector "virus": want hidden, markup, secrets or pii`},
		{"guards_unknown_dest.bad.yaml", `:3: guards.destinations.nope: unknown destination "nope"`},
		{"guards_unknown_key.bad.yaml", `:2: guards: unknown key "pinning"`},
		{"guards_allow_host.bad.yaml", `guards.allow_hosts[0]: invalid host "https://example.com/"`},
		{"guards_max_bytes.bad.yaml", `:2: guards.max_bytes: must be positive`},
		{"guards_descriptions.bad.yaml", `:3: guards.defaults.descriptions: invalid mode "hide": want off, monitor, strip or block`},
		{"guards_shadowing.bad.yaml", `:3: guards.destinations.fs.shadowing: invalid mode "strip": want off, monitor or block`},
		{"guards_tool_action.bad.yaml", `:5: guards.destinations.fs.tools.read.action: invalid action "strip": want monitor, redact or block`},
		{"guards_tool_allow.bad.yaml", `:5: guards.destinations.fs.tools.read.allow[1]: invalid rule "AWS key": want a detector`},
		{"guards_defaults_tools.bad.yaml", `:3: guards.defaults.tools: per-tool settings belong to a destination: guards.destinations.NAME.tools`},
		{"guards_pii_pattern.bad.yaml", `:4: guards.pii.national_ids.fr-insee.pattern: invalid regular expression: error parsing regexp: missing closing )`},
		{"guards_pii_no_pattern.bad.yaml", `:4: guards.pii.national_ids.nl-bsn.pattern: missing: want the identifier's regular expression`},
		{"guards_pii_check.bad.yaml", `:4: guards.pii.national_ids.us-ssn.check: unknown check "ssn": want luhn, mod97 or us-ssn`},
		{"guards_pii_name.bad.yaml", `:4: guards.pii.national_ids.email: invalid name "email": want a rule id`},
		{"guards_pii_disable.bad.yaml", `:3: guards.pii.disable[0]: unknown rule "phone": want email, card or iban`},
	}...)
}

// TestGuardsConfig: the guards block decodes, a destination's keys
// override the defaults (detectors: [] runs none), the pin file defaults
// to beside the config, and no block means nil (everything off).
func TestGuardsConfig(t *testing.T) {
	c, err := testLoader(nil).load("testdata/guards.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g := c.Guards
	if g == nil {
		t.Fatal("Guards is nil")
	}
	if want, _ := filepath.Abs("testdata/guards.good.pins.json"); g.Pins != "testdata/guards.good.pins.json" && g.Pins != want {
		t.Errorf("Pins = %q, want beside the config", g.Pins)
	}
	if g.MaxBytes != 64<<10 {
		t.Errorf("MaxBytes = %d", g.MaxBytes)
	}
	for name, want := range map[string]GuardSettings{
		"fs": {Pinning: GuardBlock, Detectors: []string{"hidden", "secrets"}, Action: GuardRedact, Descriptions: GuardStrip, Shadowing: GuardOff,
			Tools: map[string]*GuardTool{"read": {Action: GuardBlock}, "whoami": {Allow: []string{"email", "secrets"}}}},
		"web":   {Pinning: GuardMonitor, Detectors: []string{}, Action: GuardMonitor, Descriptions: GuardStrip, Shadowing: GuardBlock},
		"other": {Pinning: GuardMonitor, Detectors: []string{"hidden", "secrets"}, Action: GuardMonitor, Descriptions: GuardStrip, Shadowing: GuardOff},
	} {
		if got := g.For(name); !reflect.DeepEqual(got, want) {
			t.Errorf("For(%s) = %+v, want %+v", name, got, want)
		}
	}
	wantPII := GuardPII{Disable: []string{"iban"}, NationalIDs: map[string]*GuardNationalID{"us-ssn": {Pattern: `\b\d{3}-\d{2}-\d{4}\b`, Check: "us-ssn"}}}
	if !reflect.DeepEqual(g.PII, wantPII) {
		t.Errorf("PII = %+v, want %+v", g.PII, wantPII)
	}
	if s := g.For("web"); !s.Enabled() {
		t.Errorf("web: pinning monitor is enabled")
	}
	m, err := testLoader(nil).load("testdata/minimal.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Guards != nil || m.Guards.For("x").Enabled() {
		t.Errorf("no guards block: Guards = %+v", m.Guards)
	}
}
