package tracing

import (
	"testing"
)

func TestTracingSetMeta(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, c := range []struct{ in, want string }{
		{``, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`{}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{` { } `, ` {"_meta":{"traceparent":"` + tp + `"} } `},
		{`{"name":"echo","arguments":{"a":1}}`, `{"_meta":{"traceparent":"` + tp + `"},"name":"echo","arguments":{"a":1}}`},
		{`{"name":"x", "_meta" : { }}`, `{"name":"x", "_meta" : {"traceparent":"` + tp + `" }}`},
		{`{"_meta":{"progressToken":7},"name":"x"}`, `{"_meta":{"traceparent":"` + tp + `","progressToken":7},"name":"x"}`},
		{`{"_meta":{"traceparent":"00-old-old-00", "k":[1, 2]},"z":  3}`, `{"_meta":{"traceparent":"` + tp + `", "k":[1, 2]},"z":  3}`},
	} {
		got, ok := SetMeta([]byte(c.in), MetaKey, tp)
		if !ok || string(got) != c.want {
			t.Errorf("SetMeta(%s) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{`[1,2]`, `{"_meta":[]}`, `{"_meta":"x"}`, `7`} {
		got, ok := SetMeta([]byte(in), MetaKey, tp)
		if ok || string(got) != in {
			t.Errorf("SetMeta(%s) = %s, %v; want it unchanged and false", in, got, ok)
		}
	}
	// The input is never written to.
	in := []byte(`{"_meta":{"traceparent":"x"}}`)
	orig := string(in)
	SetMeta(in[:len(in):len(in)], MetaKey, tp)
	if string(in) != orig {
		t.Errorf("input modified: %s", in)
	}
}
