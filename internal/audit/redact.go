package audit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Redacted replaces each secret value the [Redactor] finds.
const Redacted = "[REDACTED]"

// minSecretLen is the shortest value treated as a secret. Shorter values
// ("1", "yes") would redact ordinary text and protect nothing.
const minSecretLen = 4

// Redactor replaces every occurrence of a set of secret values with
// "[REDACTED]". It is safe for concurrent
// use; Update swaps the whole set atomically. A nil *Redactor redacts
// nothing and returns its input unchanged.
//
// Besides each value as given, it also matches the value as it appears
// inside a JSON string, since bodies are JSON: as Go writes it (quotes,
// backslashes and control characters escaped, with and without <, >, &
// as \u003c…), as Python's json.dumps writes it by default (every
// non-ASCII character \u-escaped, surrogate pairs beyond U+FFFF), and
// with every character \u-escaped; \u escapes in lower- or upper-case
// hex. Other spellings of a secret (percent-encoding, base64, a mix of
// escaped and plain characters) are not recognised.
type Redactor struct {
	set atomic.Pointer[redactorSet] // replaced whole by Update
}

// redactorSet is one immutable set of secrets.
type redactorSet struct {
	secrets []string // distinct, longest first, each at least minSecretLen bytes
	// The secrets without and with a \u escape, for the contains checks:
	// text without "\u" (most) is not scanned for the second kind.
	plain, escaped []string
	rep            *strings.Replacer
	maxLen         int // length of the longest secret
}

// NewRedactor returns a Redactor for the given secret values. Values shorter
// than 4 bytes are ignored. When one secret contains another, the longer is
// matched first, so no part of it is left behind.
func NewRedactor(secrets []string) *Redactor {
	r := &Redactor{}
	r.Update(secrets)
	return r
}

// Update replaces the secret values (a config reload); it is safe while
// the Redactor is in use.
func (r *Redactor) Update(secrets []string) {
	r.set.Store(newRedactorSet(secrets))
}

// load returns the current set; nil for a nil Redactor.
func (r *Redactor) load() *redactorSet {
	if r == nil {
		return nil
	}
	return r.set.Load()
}

func newRedactorSet(secrets []string) *redactorSet {
	seen := make(map[string]bool)
	var list []string
	add := func(s string) {
		if len(s) >= minSecretLen && !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		add(s)
		for _, esc := range jsonEscapes(s) {
			add(esc)
		}
	}
	r := &redactorSet{}
	if len(list) == 0 {
		return r
	}
	slices.SortStableFunc(list, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, Redacted)
	}
	r.secrets = list
	for _, s := range list {
		if strings.Contains(s, `\u`) {
			r.escaped = append(r.escaped, s)
		} else {
			r.plain = append(r.plain, s)
		}
	}
	r.rep = strings.NewReplacer(pairs...)
	r.maxLen = len(list[0])
	return r
}

// jsonEscapes returns s as it appears inside JSON strings written by
// encoders that do and do not escape HTML characters (Go), that escape
// every non-ASCII character (Python's default ensure_ascii), and that
// escape every character; the last two in both hex cases. Duplicates are
// dropped by the caller.
func jsonEscapes(s string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(s) != nil {
			continue
		}
		q := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		out = append(out, string(q[1:len(q)-1]))
	}
	for _, hex := range []string{"0123456789abcdef", "0123456789ABCDEF"} {
		out = append(out, uEscape(s, hex, false), uEscape(s, hex, true))
	}
	return out
}

// uEscape writes s as the inside of a JSON string: with all, every
// character as \uXXXX; else as Python's json.dumps does by default
// (pyEscapes, other control characters and everything beyond ASCII as
// \uXXXX). Characters beyond U+FFFF are surrogate pairs; invalid UTF-8 is
// U+FFFD.
func uEscape(s, hex string, all bool) string {
	var b strings.Builder
	u := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xf])
		}
	}
	for _, r := range s {
		if !all {
			if e, ok := pyEscapes[r]; ok {
				b.WriteString(e)
				continue
			}
			if r >= 0x20 && r < utf8.RuneSelf {
				b.WriteRune(r)
				continue
			}
		}
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			u(r1)
			u(r2)
			continue
		}
		u(r)
	}
	return b.String()
}

// pyEscapes are the two-character escapes Python's json.dumps writes.
var pyEscapes = map[rune]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\b': `\b`, '\f': `\f`}

// String returns s with every secret replaced. It does not allocate when s
// holds no secret.
func (r *Redactor) String(s string) string {
	set := r.load()
	if !set.containsString(s) {
		return s
	}
	return set.rep.Replace(s)
}

// Bytes returns b with every secret replaced. When b holds no secret it
// returns b itself; otherwise a new slice, leaving b unchanged.
func (r *Redactor) Bytes(b []byte) []byte {
	set := r.load()
	if !set.containsBytes(b) {
		return b
	}
	return []byte(set.rep.Replace(string(b)))
}

// containsString reports whether s holds any secret. One vectorised scan
// per secret is far cheaper than the Replacer's allocation when, as almost
// always, nothing matches.
func (r *redactorSet) containsString(s string) bool {
	if r == nil || len(s) < minSecretLen {
		return false
	}
	for _, sec := range r.plain {
		if strings.Contains(s, sec) {
			return true
		}
	}
	if len(r.escaped) == 0 || !strings.Contains(s, `\u`) {
		return false
	}
	for _, sec := range r.escaped {
		if strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

func (r *redactorSet) containsBytes(b []byte) bool {
	return r.containsString(bytesView(b))
}

// bytesView is b as a string, without a copy: for reading only, while b
// is not written to, and never kept.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// trimHead returns head, the start of a longer text, without a trailing
// proper prefix of a secret: the rest of a secret the cut went through is
// not there to be matched, and redaction before it could shift that
// prefix into what is shown.
func (r *redactorSet) trimHead(head []byte) []byte {
	if r == nil {
		return head
	}
	cut := 0
	for _, sec := range r.secrets {
		for k := min(len(sec)-1, len(head)); k > cut; k-- {
			if strings.HasSuffix(bytesView(head), sec[:k]) {
				cut = k
				break
			}
		}
	}
	return head[:len(head)-cut]
}

// Clipped is a log value cut to N bytes (on a rune boundary, marked "…").
// A [RedactingHandler] redacts the whole of S before it cuts, so a cut can
// never leave part of a secret in the log; any other handler sees S cut
// (LogValue, String). Head says that S is itself the start of a longer
// text (a line read in bounded pieces): a trailing prefix of a secret is
// then dropped as well.
type Clipped struct {
	S    string
	N    int
	Head bool
}

// Clip returns b as a [Clipped] log value of at most n bytes.
func Clip(b []byte, n int) Clipped { return Clipped{S: string(b), N: n} }

// LogValue is the clipped string, unredacted.
func (c Clipped) LogValue() slog.Value { return slog.StringValue(c.String()) }

func (c Clipped) String() string { return clipString(c.S, c.N) }

// redact returns c redacted by r, then clipped.
func (c Clipped) redact(r *Redactor) string {
	s := c.S
	if c.Head {
		s = string(r.load().trimHead([]byte(s)))
	}
	return clipString(r.String(s), c.N)
}

// clipString cuts s to at most n bytes on a rune boundary, marking the cut.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func (r *Redactor) maxSecretLen() int {
	set := r.load()
	if set == nil {
		return 0
	}
	return set.maxLen
}

// containsString and containsBytes report whether the input holds a
// current secret.
func (r *Redactor) containsString(s string) bool { return r.load().containsString(s) }
func (r *Redactor) containsBytes(b []byte) bool  { return r.load().containsBytes(b) }

// RedactingHandler returns a handler that removes secret values from every
// record before h sees it: the message, attribute keys, and attribute values
// of every kind (strings, errors, Stringers, byte slices, numbers, values of
// LogValuers, [Clipped] values before they are cut, and groups,
// recursively), including attributes added with WithAttrs. A value found to hold a secret is replaced by its redacted
// string form; other values pass through unchanged.
//
// With a nil or empty Redactor it returns h itself.
func RedactingHandler(h slog.Handler, r *Redactor) slog.Handler {
	if r == nil {
		return h
	}
	return &redactingHandler{h: h, r: r}
}

type redactingHandler struct {
	h slog.Handler
	r *Redactor
}

func (h *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.h.Enabled(ctx, l)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &redactingHandler{h: h.h.WithAttrs(h.r.attrs(as)), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{h: h.h.WithGroup(h.r.String(name)), r: h.r}
}

func (r *Redactor) attrs(as []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = r.attr(a)
	}
	return out
}

func (r *Redactor) attr(a slog.Attr) slog.Attr {
	a.Key = r.String(a.Key)
	if c, ok := a.Value.Any().(Clipped); ok {
		// Before Resolve, which would clip first.
		a.Value = slog.StringValue(c.redact(r))
		return a
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.String(v.String()))
	case slog.KindGroup:
		a.Value = slog.GroupValue(r.attrs(v.Group())...)
	case slog.KindAny:
		x := v.Any()
		if b, ok := byteSlice(x); ok && r.containsBytes(b) {
			// Text handlers print byte slices as strings.
			a.Value = slog.StringValue(string(r.Bytes(b)))
			return a
		}
		a.Value = r.scalar(v)
	default:
		a.Value = r.scalar(v)
	}
	return a
}

// scalar checks the printed form of v and replaces v only if that holds a
// secret, so ordinary values keep their kind.
func (r *Redactor) scalar(v slog.Value) slog.Value {
	if s := v.String(); r.containsString(s) {
		return slog.StringValue(r.String(s))
	}
	return v
}

func byteSlice(x any) ([]byte, bool) {
	if b, ok := x.([]byte); ok {
		return b, true
	}
	if x == nil {
		return nil, false
	}
	t := reflect.TypeOf(x)
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		return reflect.ValueOf(x).Bytes(), true
	}
	return nil, false
}

// WordCut returns where to cut s to keep at most n bytes of it without
// splitting a word: a run of bytes other than white space, quotes and the
// punctuation that delimits tokens (, ; ( ) [ ] { } < >). It is for text
// that is cut before a Redactor sees it whole (an error message built
// from a remote's answer, a line stored cut): a secret the cut would
// split is dropped whole rather than leaving its prefix. The result is on
// a rune boundary; it is 0 when s starts with a word longer than n.
func WordCut[T ~string | ~[]byte](s T, n int) int {
	if len(s) <= n {
		return len(s)
	}
	cut := max(n, 0)
	for cut > 0 && isWordByte(s[cut-1]) && isWordByte(s[cut]) {
		cut--
	}
	return cut
}

func isWordByte(c byte) bool {
	if c >= utf8.RuneSelf {
		return true
	}
	return c > ' ' && strings.IndexByte("\"'`,;()[]{}<>", c) < 0
}
