package mcpheader_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/mcpheader"
)

func TestExtractBindings(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []mcpheader.ParamBinding
	}{
		{"empty", ``, nil},
		{"not an object", `"string"`, nil},
		{"no properties", `{"type":"object"}`, nil},
		{"properties not an object", `{"type":"object","properties":[1]}`, nil},
		{"no annotations", `{"type":"object","properties":{"a":{"type":"string"}}}`, nil},
		{"top level", `{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},
			"level":{"type":"integer"}}}`,
			[]mcpheader.ParamBinding{{Path: []string{"region"}, Header: "Region"}}},
		{"nested, sorted by path", `{"type":"object","properties":{
			"z":{"type":"boolean","x-mcp-header":"Z"},
			"cfg":{"type":"object","x-mcp-header":"NotAString-ButKept","properties":{
				"tenant":{"type":"string","x-mcp-header":"Tenant"},
				"deep":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}},
			"a":{"type":"string","x-mcp-header":"A"}}}`,
			[]mcpheader.ParamBinding{
				{Path: []string{"a"}, Header: "A"},
				{Path: []string{"cfg"}, Header: "NotAString-ButKept"},
				{Path: []string{"cfg", "deep", "n"}, Header: "N"},
				{Path: []string{"cfg", "tenant"}, Header: "Tenant"},
				{Path: []string{"z"}, Header: "Z"},
			}},
		{"non-string and empty annotations are ignored", `{"properties":{
			"a":{"type":"string","x-mcp-header":7},
			"b":{"type":"string","x-mcp-header":""},
			"c":{"type":"string","x-mcp-header":null},
			"d":{"type":"string","x-mcp-header":"D"}}}`,
			[]mcpheader.ParamBinding{{Path: []string{"d"}, Header: "D"}}},
		{"an odd sibling does not hide the others", `{"properties":{
			"a":{"type":["string","null"]},
			"b":true,
			"c":{"type":"string","x-mcp-header":"C"}}}`,
			[]mcpheader.ParamBinding{{Path: []string{"c"}, Header: "C"}}},
		{"only properties are walked", `{"properties":{"a":{"type":"string","x-mcp-header":"A"}},
			"$defs":{"x":{"properties":{"b":{"type":"string","x-mcp-header":"B"}}}},
			"items":{"properties":{"c":{"type":"string","x-mcp-header":"C"}}}}`,
			[]mcpheader.ParamBinding{{Path: []string{"a"}, Header: "A"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mcpheader.ExtractBindings(json.RawMessage(tt.schema))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ExtractBindings = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEncodeHeaderValue(t *testing.T) {
	for _, v := range []string{"echo", "file:///tmp/a b", "héllo", " lead", "trail\t", "a\nb", "=?base64?abc?=", ""} {
		enc := mcpheader.EncodeHeaderValue(v)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7e {
				t.Errorf("%q encodes to %q: not header-safe", v, enc)
				break
			}
		}
		if dec, ok := mcpheader.DecodeHeaderValue(enc); !ok || dec != v {
			t.Errorf("%q → %q → %q", v, enc, dec)
		}
	}
	if got := mcpheader.EncodeHeaderValue("echo"); got != "echo" {
		t.Errorf("a safe value was encoded: %q", got)
	}
}
