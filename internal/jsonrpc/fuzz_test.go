package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonDepth returns the deepest nesting of arrays and objects in b, which
// must be valid JSON.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// unmarshalAny is json.Unmarshal into an any, keeping numbers as
// json.Number so that 1e700 is not an error.
func unmarshalAny(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func fuzzSeeds() []string {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"name":"x"},"n\u0061me":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"a"},"params":[1],"p\u0061rams":{"name":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"a"},"params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":"a","result":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","method":"n","meth\u006fd":"o"}`,
		`{"js\u006fnrpc":"2.0","id":-0,"method":"\ud800\u00e9"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xffb\"}",
		`{"jsonrpc":"2.0","id":1.5,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1e5,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":1,`,
		`[{"jsonrpc":"2.0","id":1,"method":"m"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"m"} {}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest("[", "]", maxDepth+1, "") + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest("[", "]", maxDepth+2, "") + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[-0,1e5,1.5E-3,0.0,"\"\\\/\b\f\n\r\t\u0041"]}`,
		` {} `, `null`, `"x"`, `{`, `}`, `{"a":}`, `{"a" 1}`, `{"a":01}`, `{"a":1.}`,
	}
	for _, s := range mcpCorpus() {
		if len(s) < 4096 {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// FuzzDecode checks Decode against encoding/json:
//
//   - Decode never panics;
//   - Decode accepts only what json.Valid accepts (the scanner is never more
//     lenient than encoding/json), with one deliberate exception: input that
//     starts with '[' is refused as ErrBatch without being checked;
//   - a ParseError means the input is not JSON, or nests deeper than
//     maxDepth (the one place the scanner is stricter);
//   - on success, Encode gives valid JSON that decodes to an equal Message
//     and that encoding/json reads as the input's envelope members.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		m, err := Decode(in)
		if !bytes.Equal(in, orig) {
			t.Fatalf("Decode modified its input")
		}
		valid := json.Valid(in)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned a message and an error")
			}
			if errors.Is(err, ErrBatch) {
				if i := skipSpace(in, 0); i >= len(in) || in[i] != '[' {
					t.Fatalf("ErrBatch for a non-array")
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error", err)
			}
			switch e.Code {
			case ParseError:
				if valid && jsonDepth(in) <= maxDepth {
					t.Fatalf("ParseError (%s) for valid JSON %q", e.Message, in)
				}
			case InvalidRequest:
				if !valid {
					t.Fatalf("InvalidRequest (%s) for invalid JSON %q", e.Message, in)
				}
			default:
				t.Fatalf("unexpected code %d", e.Code)
			}
			return
		}
		if !valid {
			t.Fatalf("Decode accepted invalid JSON %q", in)
		}
		if kindOf(m) == 0 {
			t.Fatalf("message of no kind: %#v", m)
		}
		// Where Decode noted params._meta is where Lookup finds it (on a
		// copy: MetaAt caches what it finds).
		_, ws, we, wok := Lookup(m.Params, "_meta")
		if s, e, ok := new(*m).MetaAt(); ok != wok || (ok && (s != ws || e != we)) {
			t.Fatalf("MetaAt %d %d %v, Lookup %d %d %v, for %q", s, e, ok, ws, we, wok, in)
		}
		out := m.Encode()
		if !json.Valid(out) {
			t.Fatalf("Encode gave invalid JSON %q from %q", out, in)
		}
		m2, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(Encode()) = %v\n in: %q\nout: %q", err, in, out)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decoded message differs:\n%#v\n%#v", m, m2)
		}
		// ParamName: what a separate lookup finds, before and after Detach.
		wantName, wantOK := StringMember(m.Params, "name")
		if got, ok := m.ParamName(); got != wantName || ok != wantOK {
			t.Fatalf("ParamName = %q, %v; StringMember finds %q, %v in %q", got, ok, wantName, wantOK, m.Params)
		}
		// Detach: the same wire form, kept when the input is overwritten,
		// and dropped once a member is replaced.
		buf := bytes.Clone(in)
		d, _ := Decode(buf)
		d.Detach()
		for i := range buf {
			buf[i] = 'x'
		}
		if got := d.Encode(); !bytes.Equal(got, out) || !bytes.Equal(d.AppendTo([]byte("> ")), append([]byte("> "), out...)) {
			t.Fatalf("detached message encodes as %q, want %q", got, out)
		}
		if got, ok := d.ParamName(); got != wantName || ok != wantOK {
			t.Fatalf("detached: ParamName = %q, %v; want %q, %v", got, ok, wantName, wantOK)
		}
		// SpliceResult keeps a detached message's wire form, equal to
		// the spliced members encoded afresh.
		if d.Result != nil {
			mid := len(d.Result) / 2
			want := Message{ID: d.ID, Method: d.Method, Params: d.Params, Error: d.Error,
				Result: Splice(d.Result, mid, len(d.Result), []byte(`"spliced"`))}
			d2 := *d
			d2.SpliceResult(mid, len(d2.Result), []byte(`"spliced"`))
			if !d2.wireValid() || !bytes.Equal(d2.Encode(), want.Encode()) || !bytes.Equal(d2.Result, want.Result) {
				t.Fatalf("SpliceResult: wire valid %v, encodes as %q; want %q", d2.wireValid(), d2.Encode(), want.Encode())
			}
			if got, ok := d2.ParamName(); got != wantName || ok != wantOK {
				t.Fatalf("after SpliceResult: ParamName = %q, %v; want %q, %v", got, ok, wantName, wantOK)
			}
		}
		d.ID = json.RawMessage(`"replaced"`)
		if got := d.Encode(); !bytes.Contains(got, []byte(`"id":"replaced"`)) {
			t.Fatalf("detached message with a new id encodes as %q", got)
		}
		// encoding/json agrees on the envelope: the known members of the
		// input (last duplicate wins, keys unescaped) are what Encode wrote.
		w, err := unmarshalAny(in)
		if err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		got, err := unmarshalAny(out)
		if err != nil {
			t.Fatalf("encoding/json on output: %v", err)
		}
		want := w.(map[string]any)
		for k := range want {
			switch k {
			case "jsonrpc", "id", "method", "params", "result", "error":
			default:
				delete(want, k)
			}
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("encoding/json reads the input as %v, the output as %v", want, got)
		}
	})
}

// FuzzLookup checks Lookup against encoding/json on valid JSON, and checks
// that a Splice at the offsets it returns rewrites the member encoding/json
// reads.
func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"name":"echo","_meta":{"progressToken":"p"}}`), "_meta", "progressToken", uint8(2))
	f.Add([]byte(`{"_meta":{"progressToken":1,"progress\u0054oken":2}}`), "_meta", "progressToken", uint8(2))
	f.Add([]byte(`{"requestId":7,"requestId":"x"}`), "requestId", "", uint8(1))
	f.Add([]byte(`{"a":[1,{"b":2}],"a\"b":{"c":null}}`), `a"b`, "c", uint8(2))
	f.Add([]byte(` { "a" : { "b" : 1 } } `), "a", "b", uint8(2))
	f.Add([]byte(`{"a":"x"}`), "a", "b", uint8(2))
	f.Add([]byte(`{"a":1} trailing`), "a", "", uint8(1))
	f.Add([]byte(`[1]`), "a", "", uint8(0))
	f.Fuzz(func(t *testing.T, obj []byte, k1, k2 string, n uint8) {
		path := []string{k1, k2}[:n%3]
		val, s, e, ok := Lookup(obj, path...)
		if !ok {
			if val != nil || s != 0 || e != 0 {
				t.Fatalf("not found but returned %q [%d:%d]", val, s, e)
			}
		} else {
			if s < 0 || e < s || e > len(obj) || !bytes.Equal(obj[s:e], val) {
				t.Fatalf("offsets [%d:%d] do not match %q", s, e, val)
			}
			if len(path) > 0 && !Valid(val) {
				t.Fatalf("found value %q is not valid JSON", val)
			}
		}
		// Compare with encoding/json on valid JSON within maxDepth and on
		// valid UTF-8 only: encoding/json turns invalid UTF-8 in a key into
		// U+FFFD, while Lookup compares key bytes as they are (a difference
		// no ASCII path, which is all Switchboard looks up, can see).
		if !json.Valid(obj) || jsonDepth(obj) > maxDepth || !utf8.Valid(obj) || !utf8.ValidString(k1+k2) {
			return
		}
		// Walk the same path with encoding/json.
		v, err := unmarshalAny(obj)
		if err != nil {
			t.Fatal(err)
		}
		found := true
		for _, k := range path {
			o, isObj := v.(map[string]any)
			if !isObj {
				found = false
				break
			}
			if v, found = o[k]; !found {
				break
			}
		}
		if found != ok {
			t.Fatalf("Lookup(%q, %q) ok = %v, encoding/json found = %v", obj, path, ok, found)
		}
		if !ok || len(path) == 0 {
			return
		}
		got, err := unmarshalAny(val)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("Lookup gives %v, encoding/json %v", got, v)
		}
		// Rewrite the member and read it back with encoding/json.
		const mark = `"\u2603rewritten"`
		out := Splice(obj, s, e, []byte(mark))
		if !json.Valid(out) {
			t.Fatalf("Splice gave invalid JSON %q", out)
		}
		w, err := unmarshalAny(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range path {
			w = w.(map[string]any)[k]
		}
		if w != "\u2603rewritten" {
			t.Fatalf("after Splice encoding/json reads %v at %q in %q", w, path, out)
		}
		if s2, ok := StringMember(out, path...); !ok || s2 != "\u2603rewritten" {
			t.Fatalf("StringMember after Splice = %q, %v", s2, ok)
		}
	})
}

// FuzzPeekID checks that the id PeekID reads from any prefix of a message is
// the id of the whole message, or nothing.
func FuzzPeekID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":12345,"result":{"a":[1,2,3]}}`), uint16(27))
	f.Add([]byte(`{"id":"x","id":2,"result":{}}`), uint16(12))
	f.Add([]byte(`{"jsonrpc":"2.0","id":-7,"error":{"code":1,"message":"m"}}`), uint16(23))
	f.Fuzz(func(t *testing.T, msg []byte, cut uint16) {
		whole, ok := PeekID(msg)
		if ok && !Valid(whole) {
			t.Fatalf("PeekID gave invalid JSON %q", whole)
		}
		m, err := Decode(msg)
		if err != nil || m.ID == nil {
			return
		}
		if !ok || !bytes.Equal(whole, m.ID) {
			t.Fatalf("PeekID of the whole message = %q, %v; Decode says %q", whole, ok, m.ID)
		}
		prefix := msg[:int(cut)%(len(msg)+1)]
		id, ok := PeekID(prefix)
		if !ok {
			return
		}
		// With duplicate ids the prefix may hold an earlier one; it must
		// still be one of the message's ids, whole.
		var ids [][]byte
		_, _ = eachMember(msg, skipSpace(msg, 0), func(k, v []byte) error {
			if string(k) == "id" {
				ids = append(ids, v)
			}
			return nil
		})
		for _, x := range ids {
			if bytes.Equal(x, id) {
				return
			}
		}
		t.Fatalf("PeekID(%q) = %q, the message's ids are %q", prefix, id, ids)
	})
}

// FuzzSkipString checks the word-at-a-time string scanner against a plain
// byte loop: the same end, the same verdict, for any bytes after a quote.
func FuzzSkipString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"0123456789abcdef"`, `"a\"b"`, `"tab	"`, `"\u00e9\u0041"`, `"héllo wörld 😀 0123456789"`, `"unterminated`, `"\x01"`, `"\\"x`} {
		f.Add([]byte(s))
	}
	// Long strings, past the word-by-word start: escapes, a quote taken by
	// an escape, control characters before and after the quote.
	long := strings.Repeat("abcdefgh", 12)
	for _, s := range []string{
		`"` + long + `"`, `"` + long + `\"` + long + `"x`, `"` + long + `\\"`, `"` + long + `\u0022"`,
		`"` + long + "\x1f" + long + `"`, `"` + long + `"` + "\x01", `"` + long + `\u00"`, `"` + long + `\`, `"` + long,
		`"` + long + `\n\t\/` + long + `\"\"` + `"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			return
		}
		gotEnd, _, gotOK := ScanString(b, 0)
		wantEnd, wantOK := skipStringSlow(b)
		if gotEnd != wantEnd || gotOK != wantOK {
			t.Fatalf("ScanString(%q) = %d %v, want %d %v", b, gotEnd, gotOK, wantEnd, wantOK)
		}
	})
}

// skipStringSlow is ScanString one byte at a time.
func skipStringSlow(b []byte) (int, bool) {
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+6 > len(b) {
					return 0, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false
					}
				}
				i += 5
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// FuzzEachMember checks that one EachMember pass agrees with Lookup: the
// last value given for each key is what Lookup finds, at the same offset,
// and a valid object is reported valid.
func FuzzEachMember(f *testing.F) {
	f.Add([]byte(`{"name":"echo","_meta":{"progressToken":"p"}}`))
	f.Add([]byte(`{"a":1,"a":2,"\u0061":3}`))
	f.Add([]byte(` { "a" : [1,{"b":2}] , "c":"x\"y" } `))
	f.Add([]byte(`{"a":1} trailing`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		last := map[string][]byte{}
		ok := EachMember(obj, func(k, v []byte) {
			if off := cap(obj) - cap(v); off < 0 || off+len(v) > len(obj) || !bytes.Equal(obj[off:off+len(v)], v) {
				t.Fatalf("value %q is not a subslice of the object", v)
			}
			last[string(k)] = v
		})
		if ok != (Valid(obj) && len(bytes.TrimSpace(obj)) > 0 && bytes.TrimSpace(obj)[0] == '{') {
			t.Fatalf("EachMember(%q) ok = %v, Valid = %v", obj, ok, Valid(obj))
		}
		if !ok {
			return
		}
		for k, v := range last {
			got, s, _, found := Lookup(obj, k)
			if !found || !bytes.Equal(got, v) || s != cap(obj)-cap(v) {
				t.Fatalf("key %q: EachMember last %q, Lookup %q (found %v)", k, v, got, found)
			}
		}
	})
}
