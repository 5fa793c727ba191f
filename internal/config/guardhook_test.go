package config

import (
	"path/filepath"
	"testing"
	"time"
)

func init() {
	expectedErrors = append(expectedErrors, []struct{ filename, errMsg string }{
		{"guards_hook_url.bad.yaml", `:3: guards.hook.url: required: the hook's http:// or https:// URL`},
		{"guards_hook_fail.bad.yaml", `guards.hook.fail: required: open (a failed check lets the message pass) or closed (it refuses it)`},
		{"guards_hook_fail_value.bad.yaml", `:4: guards.hook.fail: invalid "sometimes": want open or closed`},
		{"guards_hook_direction.bad.yaml", `:5: guards.hook.directions[1]: unknown direction "description": want arguments or result`},
		{"guards_hook_token.bad.yaml", `:6: guards.hook.token_file: give token_env or token_file, not both`},
		{"guards_hook_dest.bad.yaml", `:5: guards.hook.destinations[1]: unknown destination "nope"`},
		{"guards_hook_timeout.bad.yaml", `:5: guards.hook.timeout: must be positive`},
		{"guards_hook_key.bad.yaml", `:5: guards.hook: unknown key "fail_open"`},
	}...)
}

// TestGuardHookConfig: the hook block decodes with its defaults (2 s,
// 256 KiB), the token file is the config folder's, destinations narrow
// it, and directions left out mean both.
func TestGuardHookConfig(t *testing.T) {
	c, err := testLoader(nil).load("testdata/guards_hook.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := c.Guards.Hook
	if h == nil {
		t.Fatal("Hook is nil")
	}
	if h.Timeout != 2*time.Second || h.MaxBytes != 256<<10 || h.Fail != HookFailClosed {
		t.Errorf("defaults: %+v", h)
	}
	if filepath.Base(h.TokenFile) != "hook.token" || !filepath.IsAbs(h.TokenFile) && filepath.Dir(h.TokenFile) != "testdata" {
		t.Errorf("token_file = %q, want testdata/hook.token", h.TokenFile)
	}
	if c.Guards.HookFor("fs") != h || c.Guards.HookFor("web") != nil {
		t.Errorf("HookFor: fs %v, web %v", c.Guards.HookFor("fs"), c.Guards.HookFor("web"))
	}
	if h.Sends(HookArguments) || !h.Sends(HookResult) {
		t.Errorf("Sends: directions %v", h.Directions)
	}
	if !(&GuardHook{}).Sends(HookArguments) || (*GuardHook)(nil).Sends(HookResult) {
		t.Error("Sends: nil directions mean both; a nil hook sends nothing")
	}
	if (&Guards{}).HookFor("fs") != nil || (*Guards)(nil).HookFor("fs") != nil {
		t.Error("HookFor without a hook")
	}
}
