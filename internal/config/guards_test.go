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
		"fs":    {Pinning: GuardBlock, Detectors: []string{"hidden", "secrets"}, Action: GuardRedact},
		"web":   {Pinning: GuardMonitor, Detectors: []string{}, Action: GuardMonitor},
		"other": {Pinning: GuardMonitor, Detectors: []string{"hidden", "secrets"}, Action: GuardMonitor},
	} {
		if got := g.For(name); !reflect.DeepEqual(got, want) {
			t.Errorf("For(%s) = %+v, want %+v", name, got, want)
		}
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
