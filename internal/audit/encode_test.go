package audit

import (
	"encoding/json"
	"testing"
	"time"
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

// FuzzAppendTime checks the hand-written time format against
// time.RFC3339Nano, in UTC, for any instant and zone.
func FuzzAppendTime(f *testing.F) {
	for _, c := range [][2]int64{{0, 0}, {1767225600, 0}, {1767225600, 123456789}, {1767225600, 100}, {1767225600, 120000000}, {-62135596800, 1}, {253402300799, 999999999}, {253402300800, 0}, {-62135596801, 5}} {
		f.Add(c[0], c[1], int32(3600))
	}
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int32) {
		tm := time.Unix(sec, nsec).In(time.FixedZone("z", int(offset%86400)))
		got := string(appendTime(nil, tm))
		if want := tm.UTC().Format(time.RFC3339Nano); got != want {
			t.Fatalf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	})
}
