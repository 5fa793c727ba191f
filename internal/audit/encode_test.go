package audit

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString checks the hand-written encoder against
// encoding/json for every input.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"uote", "back\\slash", "ctl\x01\x1f\n\r\t", "ünï", "bad\xffutf8", "\u2028\u2029", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("appendJSONString(%q) = %s: not JSON: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("appendJSONString(%q) decodes to %q, encoding/json's to %q", s, back, wantBack)
		}
	})
}
