package guard

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestCanonical: RFC 8785's examples and the cases that differ from
// encoding/json (member order by UTF-16, escapes, numbers), and bad input
// refused with an error.
func TestCanonical(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":2, "a":1}`, `{"a":1,"b":2}`},
		{`{ "z": [1, 2.0, 1e3, -0, 0.000001, 1e-7, 1e21, 123456789012345678901] }`, `{"z":[1,2,1000,0,0.000001,1e-7,1e+21,123456789012345680000]}`},
		{`"<&>\u2028\u00e9\/"`, "\"<&>\u2028\u00e9/\""},
		{`"\u0001\b\f\n\r\t\"\\"`, `"\u0001\b\f\n\r\t\"\\"`},
		// RFC 8785 3.2.3: sorted by UTF-16 code units, not code points.
		{`{"\ud83d\ude00":1,"\ufb33":2,"a":3}`, "{\"a\":3,\"\U0001F600\":1,\"\ufb33\":2}"},
		{`{"peach":1,"péché":2,"pêche":3,"sin":4}`, `{"peach":1,"péché":2,"pêche":3,"sin":4}`},
		{` [ {}, [], null, true, false ] `, `[{},[],null,true,false]`},
	} {
		got, err := Canonical([]byte(c.in))
		if err != nil {
			t.Errorf("Canonical(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":1} x`, `1e400`, "\"\xff\"", `{`, ``, `[1,]`} {
		if got, err := Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%q) = %s, want an error", bad, got)
		}
	}
}

// FuzzCanonical: whatever encoding/json accepts without duplicate names,
// Canonical's output is valid JSON of the same value, and canonical again
// is itself.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.5,{"c":null}],"a":"x"}`, `"\u00e9\n"`, `1e-7`, `[true,false,{}]`, `{"\ud83d\ude00":1,"\ufb33":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Canonical(b)
		if err != nil {
			return
		}
		var v1, v2 any
		if err := json.Unmarshal(b, &v1); err != nil {
			t.Fatalf("Canonical accepted %q, which encoding/json refuses: %v", b, err)
		}
		if err := json.Unmarshal(c, &v2); err != nil {
			t.Fatalf("Canonical(%q) = %q: not JSON: %v", b, c, err)
		}
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("Canonical(%q) = %q: a different value", b, c)
		}
		c2, err := Canonical(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("Canonical not idempotent: %q -> %q -> %q (%v)", b, c, c2, err)
		}
	})
}
