package mcp

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

func TestVersions(t *testing.T) {
	legacy := LegacyVersions()
	if !slices.IsSorted(legacy) || legacy[len(legacy)-1] != LatestLegacyVersion || legacy[0] != "2024-11-05" {
		t.Fatalf("LegacyVersions() = %v, want oldest first, ending with %s", legacy, LatestLegacyVersion)
	}
	legacy[0] = "mutated"
	if LegacyVersions()[0] != "2024-11-05" {
		t.Fatal("LegacyVersions returned the package's own slice")
	}
	if got := SupportedVersions(); got[0] != ModernVersion || len(got) != len(legacy)+1 || !slices.IsSortedFunc(got, func(a, b string) int { return -cmpString(a, b) }) {
		t.Fatalf("SupportedVersions() = %v, want newest first, %s first", got, ModernVersion)
	}
	for _, c := range []struct {
		v             string
		rank          int
		legacy, known bool
	}{
		{"2024-11-05", 0, true, true},
		{LatestLegacyVersion, 3, true, true},
		{ModernVersion, -1, false, true},
		{"2030-01-01", -1, false, false},
		{"", -1, false, false},
	} {
		if LegacyRank(c.v) != c.rank || IsLegacy(c.v) != c.legacy || Known(c.v) != c.known {
			t.Errorf("%q: rank %d legacy %v known %v, want %d %v %v", c.v, LegacyRank(c.v), IsLegacy(c.v), Known(c.v), c.rank, c.legacy, c.known)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestMethodTables(t *testing.T) {
	for _, m := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "tasks/result"} {
		if !Removed(m) {
			t.Errorf("Removed(%q) = false", m)
		}
	}
	for _, m := range []string{"tools/call", "tools/list", "server/discover", "subscriptions/listen"} {
		if Removed(m) {
			t.Errorf("Removed(%q) = true", m)
		}
	}
	if !Cacheable("resources/read") || !Cacheable("server/discover") || Cacheable("tools/call") {
		t.Error("Cacheable: wrong table")
	}
	if !InputMethod("prompts/get") || InputMethod("tools/list") {
		t.Error("InputMethod: wrong table")
	}
}

func TestCheckMeta(t *testing.T) {
	for _, c := range []struct {
		name, params string
		code         int // 0: passes
	}{
		{"complete", `{"_meta":{"` + MetaProtocolVersion + `":"2026-07-28","` + MetaClientCapabilities + `":{}}}`, 0},
		{"escaped version", `{"_meta":{"` + MetaProtocolVersion + `":"2026\u002d07-28","` + MetaClientCapabilities + `":{"x":1}}}`, 0},
		{"no params", ``, jsonrpc.InvalidParams},
		{"no _meta", `{"name":"x"}`, jsonrpc.InvalidParams},
		{"version not a string", `{"_meta":{"` + MetaProtocolVersion + `":20260728,"` + MetaClientCapabilities + `":{}}}`, jsonrpc.InvalidParams},
		{"empty version", `{"_meta":{"` + MetaProtocolVersion + `":"","` + MetaClientCapabilities + `":{}}}`, jsonrpc.InvalidParams},
		{"legacy version", `{"_meta":{"` + MetaProtocolVersion + `":"2025-11-25","` + MetaClientCapabilities + `":{}}}`, jsonrpc.UnsupportedProtocolVersion},
		{"no capabilities", `{"_meta":{"` + MetaProtocolVersion + `":"2026-07-28"}}`, jsonrpc.InvalidParams},
		{"capabilities not an object", `{"_meta":{"` + MetaProtocolVersion + `":"2026-07-28","` + MetaClientCapabilities + `":[]}}`, jsonrpc.InvalidParams},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := jsonrpc.NewRequest(json.RawMessage(`1`), "tools/list", json.RawMessage(c.params))
			if c.params == "" {
				req.Params = nil
			}
			e := CheckMeta(req)
			switch {
			case c.code == 0 && e != nil:
				t.Fatalf("CheckMeta = %v, want nil", e)
			case c.code != 0 && (e == nil || e.Code != c.code):
				t.Fatalf("CheckMeta = %v, want code %d", e, c.code)
			}
			if e != nil && e.Code == jsonrpc.UnsupportedProtocolVersion {
				var d struct {
					Supported []string `json:"supported"`
					Requested string   `json:"requested"`
				}
				if json.Unmarshal(e.Data, &d) != nil || !slices.Equal(d.Supported, []string{ModernVersion}) || d.Requested != "2025-11-25" {
					t.Fatalf("data %s, want the supported and the requested version", e.Data)
				}
			}
		})
	}
}
