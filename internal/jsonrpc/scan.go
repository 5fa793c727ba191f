package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"
)

// maxDepth bounds nesting so a hostile message cannot exhaust the stack.
const maxDepth = 512

var errSyntax = &Error{Code: ParseError, Message: "parse error: invalid JSON"}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// eachMember walks the object starting at b[i] == '{' and calls fn with each
// unescaped key and raw value. It returns the index just past the closing
// brace. Keys are unescaped (rarely: only keys holding a backslash allocate)
// so that "progress\u0054oken" is the member a JSON parser upstream sees as
// progressToken.
func eachMember(b []byte, i int, fn func(key, val []byte) error) (int, error) {
	return walkObject(b, i, 0, fn, nil)
}

// walkObject is eachMember at a nesting depth; fn may be nil (skip only).
// p, when not nil, notes one member of one nested object in the same pass
// (see probe).
func walkObject(b []byte, i, depth int, fn func(key, val []byte) error, p *probe) (int, error) {
	i++ // '{'
	i = skipSpace(b, i)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return 0, errSyntax
		}
		kend, _, ok := ScanString(b, i)
		if !ok {
			return 0, errSyntax
		}
		key := b[i+1 : kend-1]
		if (fn != nil || p != nil) && bytes.IndexByte(key, '\\') >= 0 {
			k, _ := unquote(b[i:kend])
			key = []byte(k)
		}
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		i = skipSpace(b, i+1)
		var vend int
		if p != nil && !p.inside && i < len(b) && b[i] == '{' && string(key) == p.in {
			if depth > maxDepth {
				return 0, errSyntax
			}
			p.inside, p.at, p.val, p.meta = true, i, nil, nil
			end, err := walkObject(b, i, depth+1, nil, p)
			p.inside = false
			if err != nil {
				return 0, errSyntax
			}
			vend = end
		} else if vend, ok = skipValue(b, i, depth); !ok {
			return 0, errSyntax
		}
		if p != nil && p.inside {
			switch string(key) {
			case p.key:
				p.val = b[i:vend]
			case "_meta":
				p.meta = b[i:vend]
			}
		}
		if fn != nil {
			if err := fn(key, b[i:vend]); err != nil {
				return 0, err
			}
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return 0, errSyntax
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return 0, errSyntax
		}
		i++
	}
}

// probe notes, while an object is walked, the member key of its member in
// when that is an object: the last such object's start (at) and the value
// of its last key member (val, nil if none; at < 0 if no such object),
// and of its last _meta member (meta), which MCP puts in every params.
type probe struct {
	in, key string
	inside  bool // walking the in object
	at      int
	val     []byte
	meta    []byte
}

// ScanString returns the index just past the string token starting at
// b[i] == '"' and whether it holds escapes; ok is false for an
// unterminated string, a bad escape or a control character, as JSON
// requires. It is the scanner's own string reader, for other walkers of
// JSON text (the guards').
func ScanString(b []byte, i int) (end int, escaped, ok bool) {
	i++
	for i < len(b) {
		// Fast path: skip 8 plain bytes at a time (no quote, backslash or
		// control character among them), and land on the first special
		// byte of a word at once. Long strings (base64 images, file
		// contents) are most of what a gateway scans; short ones (keys)
		// end within their first word.
		for i+8 <= len(b) {
			if m := specialMask(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return 0, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		default:
			i++
		}
	}
	return 0, false, false
}

// Word-at-a-time byte tests ("Bit Twiddling Hacks", determine if a word has
// a byte less than n / equal to n).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialMask has the high bit of each byte of x (little-endian: the first
// byte is the lowest) that is a control character (< 0x20), a quote or a
// backslash set; it is zero when there is none. Bytes above the first such
// byte may be flagged falsely (a borrow carries upward), those below it
// never are, so the lowest set bit is exactly the first special byte.
func specialMask(x uint64) uint64 {
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((x-ones*0x20)&^x | (q-ones)&^q | (bs-ones)&^bs) & highs
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := ScanString(b, i)
		return end, ok
	case c == '{':
		end, err := walkObject(b, i, depth+1, nil, nil)
		return end, err == nil
	case c == '[':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			end, ok := skipValue(b, skipSpace(b, i), depth+1)
			if !ok {
				return 0, false
			}
			i = skipSpace(b, end)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == ']' {
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
			}
			i++
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return SkipNumber(b, i)
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// SkipNumber returns the index just past the JSON number starting at
// b[i]; false when there is none.
func SkipNumber(b []byte, i int) (int, bool) {
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, false
	}
	if b[i] == '0' {
		i++
	} else if b[i] >= '1' && b[i] <= '9' {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	} else {
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	return i, i > start
}

// unquote returns the string a raw JSON string holds.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	simple := true
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 || c >= utf8.RuneSelf {
			simple = false
			break
		}
	}
	if simple {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// String returns the Go string a raw JSON string value holds.
func String(raw json.RawMessage) (string, bool) { return unquote(raw) }

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Quote returns s as a raw JSON string.
func Quote(s string) json.RawMessage { return appendString(nil, s) }

// Lookup finds the member at path (object keys, outermost first) in the JSON
// object obj and returns its raw value and its [start, end) offsets in obj.
// ok is false when any step is missing or not an object. When a key appears
// more than once the last one wins, as in Decode and in encoding/json,
// JSON.parse and Python's json: a rewrite must hit the member the receiver
// will read.
func Lookup(obj []byte, path ...string) (val []byte, start, end int, ok bool) {
	base := 0
	cur := obj
	for _, key := range path {
		i := skipSpace(cur, 0)
		if i >= len(cur) || cur[i] != '{' {
			return nil, 0, 0, false
		}
		found := false
		var vs, ve int
		_, err := eachMember(cur, i, func(k, v []byte) error {
			if string(k) == key {
				found = true
				// v is a subslice of cur: recover its offset.
				vs = cap(cur) - cap(v)
				ve = vs + len(v)
			}
			return nil
		})
		if err != nil || !found {
			return nil, 0, 0, false
		}
		base += vs
		cur = cur[vs:ve]
	}
	return cur, base, base + len(cur), true
}

// EachMember calls fn with each member of the JSON object obj, in order:
// its key (unescaped, as Lookup compares it) and raw value, a subslice of
// obj (its offset is cap(obj)-cap(val)). One pass reads several members:
// a key seen twice is given twice, so keeping the last one agrees with
// Lookup. It reports false when obj is not a valid object (fn may have
// been called for the members before the fault).
func EachMember(obj []byte, fn func(key, val []byte)) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	end, err := eachMember(obj, i, func(k, v []byte) error { fn(k, v); return nil })
	return err == nil && skipSpace(obj, end) == len(obj)
}

// Splice returns a copy of b with b[start:end] replaced by v.
func Splice(b []byte, start, end int, v []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(v))
	out = append(out, b[:start]...)
	out = append(out, v...)
	return append(out, b[end:]...)
}

// Member returns the raw value of a member of obj, or nil.
func Member(obj []byte, path ...string) json.RawMessage {
	v, _, _, _ := Lookup(obj, path...) // nil when not found
	return v
}

// StringMember returns the string value at path, if it is a string.
func StringMember(obj []byte, path ...string) (string, bool) { return unquote(Member(obj, path...)) }

// Valid reports whether b is one syntactically valid JSON value.
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	end, ok := skipValue(b, i, 0)
	return ok && skipSpace(b, end) == len(b)
}

// PeekID returns the id of a possibly truncated message (the first bytes of
// an oversized line), if a complete "id" member appears before the cut.
func PeekID(prefix []byte) (json.RawMessage, bool) {
	i := skipSpace(prefix, 0)
	if i >= len(prefix) || prefix[i] != '{' {
		return nil, false
	}
	var id json.RawMessage
	_, _ = eachMember(prefix, i, func(key, val []byte) error {
		// A number that runs to the cut may be cut short ("12" of "123").
		cut := cap(prefix)-cap(val)+len(val) == len(prefix) && val[0] != '"'
		if string(key) == "id" && !cut { // the last complete one, as in Decode
			id = val
		}
		return nil
	})
	return id, id != nil
}
