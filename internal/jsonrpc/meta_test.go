package jsonrpc

import "testing"

func TestLookupMeta(t *testing.T) {
	m, err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"big":"` +
		string(make([]byte, 0)) + `aaaaaaaaaaaaaaaaaaaaaaaa"},"_meta":{"progressToken":"tok","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second round uses the cached position
		v, s, e, ok := m.LookupMeta("progressToken")
		if !ok || string(v) != `"tok"` || string(m.Params[s:e]) != `"tok"` {
			t.Fatalf("round %d: %q %d %d %v", i, v, s, e, ok)
		}
		if got, ok := m.MetaString("io.modelcontextprotocol/protocolVersion"); !ok || got != "2026-07-28" {
			t.Fatalf("round %d: version %q %v", i, got, ok)
		}
	}
	if _, _, _, ok := m.LookupMeta("missing"); ok {
		t.Fatal("found a missing key")
	}
	// A copy with other params must not use the original's cached position.
	c := *m
	c.Params = []byte(`{"_meta":{"progressToken":7}}`)
	if v, s, e, ok := c.LookupMeta("progressToken"); !ok || string(v) != "7" || string(c.Params[s:e]) != "7" {
		t.Fatalf("copy: %q %v", v, ok)
	}
	c.Params = []byte(`{"level":"info"}`)
	if _, _, _, ok := c.LookupMeta("progressToken"); ok {
		t.Fatal("copy without _meta found one")
	}
	var empty Message
	if _, _, _, ok := empty.LookupMeta("x"); ok {
		t.Fatal("nil params found a key")
	}
}
