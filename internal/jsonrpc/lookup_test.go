package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	const params = `{"name":"echo","arguments":{"text":"hi","n":[1,2]},"_meta":{"progressToken":"tok-1","x":{"y":null}},"requestId":7}`
	tests := []struct {
		name string
		obj  string
		path []string
		want string // "" means not found
	}{
		{"top level", params, []string{"name"}, `"echo"`},
		{"nested", params, []string{"_meta", "progressToken"}, `"tok-1"`},
		{"nested null", params, []string{"_meta", "x", "y"}, `null`},
		{"object value", params, []string{"arguments"}, `{"text":"hi","n":[1,2]}`},
		{"array value", params, []string{"arguments", "n"}, `[1,2]`},
		{"number", params, []string{"requestId"}, `7`},
		{"empty path", ` {"a":1} `, nil, ` {"a":1} `},
		{"whitespace", " {\n \"a\" : { \"b\" :\t[ 1 ] } } ", []string{"a", "b"}, `[ 1 ]`},
		{"empty key", `{"":{"":3}}`, []string{"", ""}, `3`},

		// Keys are compared unescaped, as a JSON parser upstream sees them.
		{"escaped key", `{"_meta":{"progress\u0054oken":5}}`, []string{"_meta", "progressToken"}, `5`},
		{"escaped intermediate", `{"_m\u0065ta":{"progressToken":5}}`, []string{"_meta", "progressToken"}, `5`},
		{"key with quote", `{"a\"b":1}`, []string{`a"b`}, `1`},
		{"key with backslash", `{"a\\b":1}`, []string{`a\b`}, `1`},
		{"key with slash escape", `{"a\/b":1}`, []string{`a/b`}, `1`},
		{"unicode key", `{"ключ":{"\u00e9":"v"}}`, []string{"ключ", "é"}, `"v"`},
		{"raw escape is not the key", `{"a\\u0062":1}`, []string{"ab"}, ``},

		// Duplicate keys: the last wins, as in encoding/json.
		{"duplicate", `{"_meta":{"progressToken":1,"progressToken":2}}`, []string{"_meta", "progressToken"}, `2`},
		{"duplicate escaped", `{"_meta":{"progressToken":1,"progress\u0054oken":2}}`, []string{"_meta", "progressToken"}, `2`},
		{"duplicate intermediate", `{"_meta":{"progressToken":1},"_meta":{"other":2}}`, []string{"_meta", "progressToken"}, ``},

		// Missing and non-object steps.
		{"missing", params, []string{"nope"}, ``},
		{"missing nested", params, []string{"_meta", "nope"}, ``},
		{"missing intermediate", params, []string{"nope", "progressToken"}, ``},
		{"string intermediate", params, []string{"name", "x"}, ``},
		{"array intermediate", params, []string{"arguments", "n", "0"}, ``},
		{"number intermediate", params, []string{"requestId", "x"}, ``},
		{"null intermediate", params, []string{"_meta", "x", "y", "z"}, ``},
		{"not an object", `[1,2]`, []string{"a"}, ``},
		{"empty input", ``, []string{"a"}, ``},
		{"nil-ish", `null`, []string{"a"}, ``},
		{"case matters", `{"Name":1}`, []string{"name"}, ``},
		{"key inside a string", `{"a":"\"name\":1"}`, []string{"name"}, ``},
		{"key in a nested object is not top level", `{"a":{"name":1}}`, []string{"name"}, ``},

		// Malformed objects are not looked into.
		{"broken after match", `{"a":1,`, []string{"a"}, ``},
		{"broken before match", `{"x":tru,"a":1}`, []string{"a"}, ``},
		{"deep", `{"a":` + nest("[", "]", 1<<16, "") + `,"b":1}`, []string{"b"}, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			val, s, e, ok := Lookup([]byte(tt.obj), tt.path...)
			if ok != (tt.want != "") {
				t.Fatalf("Lookup ok = %v (val %q), want %q", ok, val, tt.want)
			}
			if !ok {
				if val != nil || s != 0 || e != 0 {
					t.Errorf("not found but returned %q [%d:%d]", val, s, e)
				}
				if Member([]byte(tt.obj), tt.path...) != nil {
					t.Errorf("Member found what Lookup did not")
				}
				return
			}
			if string(val) != tt.want {
				t.Errorf("val = %s, want %s", val, tt.want)
			}
			if tt.obj[s:e] != tt.want {
				t.Errorf("obj[%d:%d] = %s, want %s", s, e, tt.obj[s:e], tt.want)
			}
			if got := Member([]byte(tt.obj), tt.path...); string(got) != tt.want {
				t.Errorf("Member = %s", got)
			}
		})
	}
}

// TestLookupSubslice checks offsets when obj is a window on a larger buffer
// (as Params is on the line it was decoded from).
func TestLookupSubslice(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}`)
	m, err := Decode(line)
	if err != nil {
		t.Fatal(err)
	}
	val, s, e, ok := Lookup(m.Params, "_meta", "progressToken")
	if !ok || string(val) != `"abc"` || string(m.Params[s:e]) != `"abc"` {
		t.Fatalf("Lookup = %s [%d:%d] %v", val, s, e, ok)
	}
	// A window whose capacity runs past its length.
	buf := make([]byte, 0, 100)
	buf = append(buf, `{"a":{"b":1}}`...)
	if _, s, e, ok := Lookup(buf[:len(buf):len(buf)], "a", "b"); !ok || string(buf[s:e]) != "1" {
		t.Errorf("full-cap Lookup = [%d:%d] %v", s, e, ok)
	}
	if _, s, e, ok := Lookup(buf, "a", "b"); !ok || string(buf[s:e]) != "1" {
		t.Errorf("spare-cap Lookup = [%d:%d] %v", s, e, ok)
	}
}

func TestSpliceRewrites(t *testing.T) {
	tests := []struct {
		name string
		in   string
		path []string
		repl string
		want string
	}{
		{
			name: "progressToken string to int",
			in:   `{"name":"echo","_meta":{"progressToken":"abc-123"},"arguments":{}}`,
			path: []string{"_meta", "progressToken"},
			repl: `41`,
			want: `{"name":"echo","_meta":{"progressToken":41},"arguments":{}}`,
		},
		{
			name: "progressToken int to string",
			in:   `{"progressToken":41,"progress":1}`,
			path: []string{"progressToken"},
			repl: `"abc-123"`,
			want: `{"progressToken":"abc-123","progress":1}`,
		},
		{
			name: "requestId",
			in:   `{"requestId":123,"reason":"User requested cancellation"}`,
			path: []string{"requestId"},
			repl: `"client-9"`,
			want: `{"requestId":"client-9","reason":"User requested cancellation"}`,
		},
		{
			name: "requestId with whitespace",
			in:   "{ \"reason\" : \"r\" ,\n  \"requestId\" :  \"x\"  }",
			path: []string{"requestId"},
			repl: `5`,
			want: "{ \"reason\" : \"r\" ,\n  \"requestId\" :  5  }",
		},
		{
			name: "escaped key",
			in:   `{"_meta":{"progress\u0054oken":7}}`,
			path: []string{"_meta", "progressToken"},
			repl: `99`,
			want: `{"_meta":{"progress\u0054oken":99}}`,
		},
		{
			name: "duplicate key rewrites the last",
			in:   `{"_meta":{"progressToken":7,"progressToken":8}}`,
			path: []string{"_meta", "progressToken"},
			repl: `99`,
			want: `{"_meta":{"progressToken":7,"progressToken":99}}`,
		},
		{
			name: "object value",
			in:   `{"a":{"deep":[1,{"x":2}]},"b":0}`,
			path: []string{"a"},
			repl: `{}`,
			want: `{"a":{},"b":0}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			_, s, e, ok := Lookup(in, tt.path...)
			if !ok {
				t.Fatalf("Lookup failed")
			}
			out := Splice(in, s, e, []byte(tt.repl))
			if string(out) != tt.want {
				t.Errorf("Splice = %s, want %s", out, tt.want)
			}
			if string(in) != tt.in {
				t.Errorf("Splice modified its input")
			}
			if !json.Valid(out) {
				t.Errorf("spliced JSON is invalid")
			}
			// encoding/json reads the rewritten value: the rewrite hit the
			// member a JSON parser on the other side will use.
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.path {
				v = v.(map[string]any)[k]
			}
			var want any
			_ = json.Unmarshal([]byte(tt.repl), &want)
			if !equalAny(v, want) {
				t.Errorf("encoding/json reads %v after the rewrite, want %v", v, want)
			}
		})
	}
}

func equalAny(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestSpliceEdges(t *testing.T) {
	b := []byte("abcdef")
	for _, tt := range []struct {
		s, e int
		v    string
		want string
	}{
		{0, 0, "X", "Xabcdef"},
		{6, 6, "X", "abcdefX"},
		{0, 6, "", ""},
		{2, 4, "XYZ", "abXYZef"},
		{2, 4, "", "abef"},
	} {
		if got := string(Splice(b, tt.s, tt.e, []byte(tt.v))); got != tt.want {
			t.Errorf("Splice(%d,%d,%q) = %q, want %q", tt.s, tt.e, tt.v, got, tt.want)
		}
	}
	if string(b) != "abcdef" {
		t.Errorf("input modified")
	}
}

// TestRewriteMessage goes through the full gateway path: decode a request,
// rewrite its progress token and id, encode, and decode again.
func TestRewriteMessage(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"p"}}}`)
	m, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	tok, s, e, ok := Lookup(m.Params, "_meta", "progressToken")
	if !ok || string(tok) != `"p"` {
		t.Fatalf("token %s %v", tok, ok)
	}
	out := &Message{ID: IntID(17), Method: m.Method, Params: Splice(m.Params, s, e, IntID(17))}
	wire := out.Encode()
	want := `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":17}}}`
	if string(wire) != want {
		t.Errorf("wire = %s\nwant %s", wire, want)
	}
	if string(m.Params) != `{"name":"slow","_meta":{"progressToken":"p"}}` {
		t.Errorf("original params modified: %s", m.Params)
	}
}

func TestStringMember(t *testing.T) {
	obj := []byte(`{"protocolVersion":"2025-06-18","uri":"file:///a%20b/\u00e9","level":"info","n":1,"nul":null,"esc":"a\"b\\c\n","_meta":{"k":"v"}}`)
	for _, tt := range []struct {
		path []string
		want string
		ok   bool
	}{
		{[]string{"protocolVersion"}, "2025-06-18", true},
		{[]string{"uri"}, "file:///a%20b/é", true},
		{[]string{"esc"}, "a\"b\\c\n", true},
		{[]string{"_meta", "k"}, "v", true},
		{[]string{"n"}, "", false},
		{[]string{"nul"}, "", false},
		{[]string{"_meta"}, "", false},
		{[]string{"missing"}, "", false},
		{[]string{"level", "x"}, "", false},
	} {
		got, ok := StringMember(obj, tt.path...)
		if got != tt.want || ok != tt.ok {
			t.Errorf("StringMember(%v) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

func TestStringAndQuote(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"abc"`, "abc", true},
		{`""`, "", true},
		{`"a\u0062\n"`, "ab\n", true},
		{`"日本"`, "日本", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`abc`, "", false},
		{`1`, "", false},
		{`null`, "", false},
		{`"`, "", false},
		{``, "", false},
		// Not JSON strings: must not be accepted.
		{`"abc`, "", false},
		{`"x`, "", false},
		{`"a"b"`, "", false},
		{"\"a\nb\"", "", false},
		{`"a\"`, "", false},
	} {
		got, ok := String(raw(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("String(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	for _, s := range []string{"", "plain", "tools/call", `q"uote`, `back\slash`, "nl\n\t\x00\x1f", "é日本😀", "a\xffb", "<&>"} {
		q := Quote(s)
		if !json.Valid(q) {
			t.Errorf("Quote(%q) = %s is invalid JSON", s, q)
			continue
		}
		got, ok := String(q)
		want := strings.ToValidUTF8(s, "\uFFFD")
		if !ok || got != want {
			t.Errorf("String(Quote(%q)) = %q, %v", s, got, ok)
		}
	}
	if string(Quote("plain")) != `"plain"` {
		t.Errorf("Quote(plain) = %s", Quote("plain"))
	}
}

func TestPeekID(t *testing.T) {
	full := `{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 1000) + `"}]}}`
	for _, tt := range []struct {
		name string
		in   string
		want string // "" means none
	}{
		{"full", full, `12345`},
		{"truncated in result", full[:200], `12345`},
		{"truncated right after id", `{"jsonrpc":"2.0","id":12345,`, `12345`},
		// The id value is not known to be complete until a delimiter
		// follows: "12345" could be the start of "123456".
		{"truncated inside id", `{"jsonrpc":"2.0","id":12345`, ``},
		{"truncated inside negative id", `{"jsonrpc":"2.0","id":-`, ``},
		{"truncated after string id", `{"jsonrpc":"2.0","id":"abc"`, `"abc"`},
		{"truncated after id whitespace", `{"jsonrpc":"2.0","id":12345 `, `12345`},
		{"truncated inside string id", `{"jsonrpc":"2.0","id":"abc`, ``},
		{"string id", `{"id":"req-7","jsonrpc":"2.0","result":{"a":`, `"req-7"`},
		{"id after big member", `{"jsonrpc":"2.0","result":{"a":1},"id":9}`, `9`},
		{"id after truncation", `{"jsonrpc":"2.0","result":{"a":1`, ``},
		{"whitespace", " \n{ \"id\" : 3 , \"result\" : [", `3`},
		{"escaped key", `{"\u0069d":4,"result":`, `4`},
		{"duplicate id last complete wins", `{"id":1,"id":2,"result":{`, `2`},
		{"nested id ignored", `{"result":{"id":5},"x":`, ``},
		{"no id", `{"jsonrpc":"2.0","method":"m"}`, ``},
		{"not an object", `[{"id":1}]`, ``},
		{"empty", ``, ``},
		{"garbage", `xyz`, ``},
		{"broken before id", `{"a":tru,"id":1}`, ``},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := PeekID([]byte(tt.in))
			if ok != (tt.want != "") || string(id) != tt.want {
				t.Errorf("PeekID = %s, %v; want %s", id, ok, tt.want)
			}
		})
	}
}

func TestValid(t *testing.T) {
	for _, s := range []string{`{}`, ` [1, "a", null] `, `"x"`, `-0.5e3`, `true`, nest("[", "]", maxDepth, "")} {
		if !Valid([]byte(s)) {
			t.Errorf("Valid(%.40q) = false", s)
		}
	}
	// Valid is stricter than json.Valid only on depth.
	for _, s := range []string{``, ` `, `{`, `[1,]`, `{"a":1}x`, `01`, `"\x"`, `nul`, nest("[", "]", maxDepth+2, ""), nest("[", "]", 1<<20, "")} {
		if Valid([]byte(s)) {
			t.Errorf("Valid(%.40q) = true", s)
		}
	}
}
