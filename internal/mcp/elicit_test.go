package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// TestURLElicitation: the -32042 error has the 2025-11-25 shape
// (data.elicitations of mode url); only a 2025-11-25 client that
// declared elicitation.url takes it; the others' fallback carries the URL
// in its message and keeps the data.
func TestURLElicitation(t *testing.T) {
	e := URLElicitationRequired("id-1", "https://as.example.com/authorize?state=x", "Authorize Switchboard")
	var d struct {
		Elicitations []map[string]string `json:"elicitations"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil || e.Code != -32042 || len(d.Elicitations) != 1 {
		t.Fatalf("error %d %s (%v)", e.Code, e.Data, err)
	}
	if el := d.Elicitations[0]; el["mode"] != "url" || el["elicitationId"] != "id-1" || el["url"] != "https://as.example.com/authorize?state=x" || el["message"] == "" {
		t.Errorf("elicitation %v", el)
	}
	for _, tc := range []struct {
		version, caps string
		want          bool
	}{
		{"2025-11-25", `{"elicitation":{"url":{}}}`, true},
		{"2025-11-25", `{"elicitation":{"form":{}}}`, false},
		{"2025-11-25", `{"elicitation":{}}`, false},
		{"2025-06-18", `{"elicitation":{"url":{}}}`, false},
		{"2026-07-28", `{"elicitation":{"url":{}}}`, false},
		{"2025-11-25", ``, false},
	} {
		if got := ElicitsURL(tc.version, json.RawMessage(tc.caps)); got != tc.want {
			t.Errorf("ElicitsURL(%s, %s) = %v", tc.version, tc.caps, got)
		}
	}
	f := URLElicitationFallback(e)
	if f.Code != CodeOpenURL || !strings.Contains(f.Message, "open https://as.example.com/authorize?state=x") || string(f.Data) != string(e.Data) {
		t.Errorf("fallback %d %q %s", f.Code, f.Message, f.Data)
	}
	other := jsonrpc.Errorf(jsonrpc.InvalidParams, "x")
	if URLElicitationFallback(other) != other {
		t.Error("another error was rewritten")
	}
}
