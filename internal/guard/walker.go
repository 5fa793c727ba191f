package guard

import (
	"errors"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// walker visits the string values of a JSON document in one pass over its
// bytes, checking its syntax as it goes (RFC 8259; a document is one
// value, white space around it). It builds each string's JSON Pointer in
// a reused buffer, and each string's value without a copy unless it holds
// escapes (then in a reused buffer). What it hands to its visitor is valid
// only during the call.
type walker struct {
	doc  []byte
	path []byte // the JSON Pointer of the value being walked
	buf  []byte // unescaped strings
	// visit is called with each string's pointer and value and the span
	// of its token in doc (quotes included).
	visit    func(path []byte, s string, start, end int)
	skipping bool // visit nothing (a skipped member's value)
}

// maxDepth bounds nesting, so that a hostile document cannot exhaust the
// stack.
const maxDepth = 512

var (
	errSyntax = errors.New("guard: invalid JSON")
	errDepth  = errors.New("guard: JSON nested deeper than 512")
)

// walkers keeps walkers, their buffers with them, between walks; one
// whose unescape buffer grew past maxScratch is not kept.
var walkers = sync.Pool{New: func() any { return &walker{} }}

const maxScratch = 4 << 20

func newWalker(doc []byte) *walker {
	w := walkers.Get().(*walker)
	w.doc = doc
	return w
}

// release returns the walker to the pool; it is not used after.
func (w *walker) release() {
	if cap(w.buf) > maxScratch {
		return
	}
	w.doc, w.visit, w.path, w.buf = nil, nil, w.path[:0], w.buf[:0]
	walkers.Put(w)
}

func (w *walker) run(visit func(path []byte, s string, start, end int)) error {
	w.visit = visit
	w.path = w.path[:0]
	end, err := w.value(skipWS(w.doc, 0), 0)
	if err != nil {
		return err
	}
	if skipWS(w.doc, end) != len(w.doc) {
		return errSyntax
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// value walks the value at doc[i] and returns the index past it.
func (w *walker) value(i, depth int) (int, error) {
	b := w.doc
	if i >= len(b) {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		end, esc, ok := jsonrpc.ScanString(b, i)
		if !ok {
			return 0, errSyntax
		}
		if !w.skipping {
			w.visit(w.path, w.str(i, end, esc), i, end)
		}
		return end, nil
	case c == '{':
		return w.object(i, depth+1)
	case c == '[':
		if depth+1 > maxDepth {
			return 0, errDepth
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		mark := len(w.path)
		for n := 0; ; n++ {
			w.path = strconv.AppendInt(append(w.path[:mark], '/'), int64(n), 10)
			end, err := w.value(i, depth+1)
			if err != nil {
				return 0, err
			}
			i = skipWS(b, end)
			if i >= len(b) {
				return 0, errSyntax
			}
			if b[i] == ']' {
				w.path = w.path[:mark]
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errSyntax
			}
			i = skipWS(b, i+1)
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		if end, ok := jsonrpc.SkipNumber(b, i); ok {
			return end, nil
		}
	}
	return 0, errSyntax
}

// object walks the object at doc[i]. Members named "blob" are skipped, and
// so are those named "data" when the object has a "mimeType": one met
// before the "mimeType" is put off to the object's end.
func (w *walker) object(i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errDepth
	}
	b := w.doc
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	mark := len(w.path)
	mime := false
	data := -1 // the start of a "data" value put off; -1: none
	var dataPath []byte
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, errSyntax
		}
		kend, esc, ok := jsonrpc.ScanString(b, i)
		if !ok {
			return 0, errSyntax
		}
		key := b[i+1 : kend-1]
		if esc {
			key = []byte(unescape(nil, key))
		}
		i = skipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		i = skipWS(b, i+1)
		w.path = appendPointer(append(w.path[:mark], '/'), key)
		var end int
		var err error
		switch k := string(key); {
		case k == "blob", k == "data" && mime:
			end, err = w.skip(i, depth)
		case k == "data":
			data, dataPath = i, append(dataPath[:0], w.path[mark:]...)
			end, err = w.skip(i, depth)
		default:
			mime = mime || k == "mimeType"
			end, err = w.value(i, depth)
		}
		if err != nil {
			return 0, err
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return 0, errSyntax
		}
		if b[i] == '}' {
			break
		}
		if b[i] != ',' {
			return 0, errSyntax
		}
		i = skipWS(b, i+1)
	}
	if data >= 0 && !mime {
		w.path = append(w.path[:mark], dataPath...)
		if _, err := w.value(data, depth); err != nil {
			return 0, err
		}
	}
	w.path = w.path[:mark]
	return i + 1, nil
}

// skip checks the value at doc[i] and returns the index past it, visiting
// nothing.
func (w *walker) skip(i, depth int) (int, error) {
	was := w.skipping
	w.skipping = true
	end, err := w.value(i, depth)
	w.skipping = was
	return end, err
}

// str is the value of the string token doc[start:end]: a view of doc
// when it has no escapes (esc false), else unescaped into w.buf.
func (w *walker) str(start, end int, esc bool) string {
	raw := w.doc[start+1 : end-1]
	if esc {
		if cap(w.buf) < len(raw) {
			w.buf = make([]byte, 0, len(raw)) // the value is never longer than its token
		}
		w.buf = unescape(w.buf[:0], raw)
		raw = w.buf
	}
	return unsafe.String(unsafe.SliceData(raw), len(raw))
}

// unescape appends the value of raw (a checked string token's inside) to
// dst. A lone surrogate becomes U+FFFD, as encoding/json has it.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = hex4(raw[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					i += 6
					r = d
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errSyntax
	}
	return i + len(lit), nil
}

// appendPointer appends key escaped as a JSON Pointer token (RFC 6901).
func appendPointer(dst, key []byte) []byte {
	for _, c := range key {
		switch c {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendQuoted appends s as a JSON string: quote and backslash escaped,
// the C0 controls as \b \t \n \f \r or \u00xx, invalid UTF-8 as U+FFFD,
// everything else as itself (for valid UTF-8, RFC 8785's form).
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
				break
			}
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(dst, '"')
}
