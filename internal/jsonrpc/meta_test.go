package jsonrpc

import (
	"strings"
	"testing"
)

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
	if s, e, ok := m.MetaAt(); !ok || string(m.Params[s:e]) != string(Member(m.Params, "_meta")) {
		t.Fatalf("MetaAt = [%d:%d], %v", s, e, ok)
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
	if _, _, ok := c.MetaAt(); ok {
		t.Fatal("MetaAt of params without _meta found one")
	}
}

// An escaped key is the same key: the fast "no _meta here" answer must not
// miss it.
func TestLookupMetaEscapedKey(t *testing.T) {
	for _, params := range []string{
		`{"\u005fmeta":{"progressToken":5}}`,
		`{"_met\u0061":{"progressToken":5}}`,
		`{"a":"x\"y","_meta":{"progressToken":5}}`,
		`{"_meta":{"\u0070rogressToken":5}}`, // escaped in _meta itself
	} {
		m := &Message{Params: []byte(params)}
		if v, _, _, ok := m.LookupMeta("progressToken"); !ok || string(v) != "5" {
			t.Errorf("%s: %q %v", params, v, ok)
		}
	}
	m := &Message{Params: []byte(`{"meta":{"progressToken":5},"x":"_meta"}`)}
	if _, _, _, ok := m.LookupMeta("progressToken"); ok {
		t.Error("found _meta in a value")
	}
	// SetMetaAt: the position given is trusted, and a _meta without the
	// key's bytes is not walked.
	m = &Message{Params: []byte(`{"_meta":{"traceparent":"x"},"a":1}`)}
	m.SetMetaAt(len(`{"_meta":`), len(`{"_meta":{"traceparent":"x"}`))
	if v, _, _, ok := m.LookupMeta("traceparent"); !ok || string(v) != `"x"` {
		t.Errorf("after SetMetaAt: %q %v", v, ok)
	}
	if _, _, _, ok := m.LookupMeta("progressToken"); ok {
		t.Error("after SetMetaAt: found a missing key")
	}
	m.SetMetaAt(-1, 0)
	if _, _, _, ok := m.LookupMeta("progressToken"); ok {
		t.Error("found _meta in a value")
	}
}

// Decode names the methods MCP defines without allocating, and still
// unescapes any other.
func TestDecodeMethod(t *testing.T) {
	for raw, want := range map[string]string{`"tools/call"`: "tools/call", `"tools\/call"`: "tools/call", `"x/y"`: "x/y", `"ping"`: "ping"} {
		m, err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":` + raw + `}`))
		if err != nil || m.Method != want {
			t.Errorf("%s: %q %v", raw, m.Method, err)
		}
	}
	b := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = Decode(b) }); n != 1 {
		t.Errorf("Decode of a tools/call: %v allocations, want 1 (the Message)", n)
	}
}

// TestAppendAround: the wire form put back together from AppendAround's
// pieces is AppendTo's, for built and detached messages, with the large
// member handed out as the message's own bytes.
func TestAppendAround(t *testing.T) {
	big := `{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 100) + `"}}`
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + big + `}`,
		`{"jsonrpc":"2.0","id":"a","result":` + big + `}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":` + big + `}}`,
		`{"jsonrpc":"2.0","method":"notifications/x","params":{"small":1}}`,
	} {
		for _, detached := range []bool{false, true} {
			m, err := Decode([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if detached {
				m.ID = []byte(`"renamed"`)
				m.Detach()
			}
			want := string(m.AppendTo([]byte("queued\n")))
			out, b, at := m.AppendAround([]byte("queued\n"), 64)
			got := string(out)
			if b != nil {
				got = string(out[:at]) + string(b) + string(out[at:])
				aliases := func(v []byte) bool { return len(v) > 0 && &v[0] == &b[0] }
				if !aliases(m.Params) && !aliases(m.Result) && !aliases(m.Error) {
					t.Errorf("%.40s: the large member was copied", raw)
				}
			} else if len(raw) > 100 {
				t.Errorf("%.40s: no large member handed out", raw)
			}
			if got != want {
				t.Errorf("detached %v: pieces make\n%s\nwant\n%s", detached, got, want)
			}
		}
	}
}

// TestDecodeNotesMeta: Decode notes where params._meta is in its own pass,
// as Lookup would find it (the last one, escaped keys included, never a
// deeper one), so MetaAt walks no params again.
func TestDecodeNotesMeta(t *testing.T) {
	for _, params := range []string{
		`{"name":"x","_meta":{"progressToken":1}}`,
		`{"_meta":{"a":1},"name":"x","_meta":{"b":2}}`,
		`{"\u005fmeta":{"c":3}}`,
		`{"arguments":{"_meta":{"deep":1}}}`,
		`{"name":"x"}`,
		`{"_meta":"not an object"}`,
	} {
		m, err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if m.metaOf == nil {
			t.Errorf("%s: _meta's place not noted by Decode", params)
		}
		_, ws, we, wok := Lookup(m.Params, "_meta")
		s, e, ok := m.MetaAt()
		if ok != wok || s != ws || e != we {
			t.Errorf("%s: MetaAt %d %d %v, Lookup %d %d %v", params, s, e, ok, ws, we, wok)
		}
	}
}

// TestDetachWithRelease: DetachWith puts the wire form in the buffer it is
// given, and Release hands that buffer back only while the message still
// holds its wire form there, once.
func TestDetachWithRelease(t *testing.T) {
	raw := `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + strings.Repeat("r", 300) + `"}]}}`
	var given []byte
	get := func(n int) []byte { given = make([]byte, n, n+10); return given }
	m, err := Decode([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	m.ID = []byte(`"client"`)
	m.DetachWith(get)
	want := strings.Replace(raw, `"id":9`, `"id":"client"`, 1)
	if got := m.Encode(); string(got) != want || &got[0] != &given[0] {
		t.Fatalf("wire form %.60s… not in the given buffer", got)
	}
	if b := m.Release(); b == nil || &b[0] != &given[0] {
		t.Fatal("Release did not hand back the given buffer")
	}
	if m.Release() != nil {
		t.Fatal("Release handed the buffer back twice")
	}

	m, _ = Decode([]byte(raw))
	m.DetachWith(get)
	m.Result = []byte(`{}`)
	if m.Release() != nil {
		t.Fatal("Release handed back a buffer the message no longer holds its wire form in")
	}
	m, _ = Decode([]byte(raw))
	m.Detach()
	if m.Release() != nil {
		t.Fatal("Release handed back Detach's own buffer")
	}
}
