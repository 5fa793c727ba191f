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
// inside a JSON string (with quotes, backslashes, control characters, and
// <, >, & escaped), since bodies are JSON. Other spellings of a secret
// (percent-encoding, base64, \u escapes of ordinary characters) are not
// recognised.
type Redactor struct {
	set atomic.Pointer[redactorSet] // replaced whole by Update
}

// redactorSet is one immutable set of secrets.
type redactorSet struct {
	secrets []string // distinct, longest first, each at least minSecretLen bytes
	raw     [][]byte // secrets as byte slices, for Bytes
	rep     *strings.Replacer
	maxLen  int // length of the longest secret
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
		r.raw = append(r.raw, []byte(s))
	}
	r.rep = strings.NewReplacer(pairs...)
	r.maxLen = len(list[0])
	return r
}

// jsonEscapes returns s as it appears inside JSON strings written by
// encoders that do and do not escape HTML characters.
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
	return out
}

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
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

func (r *redactorSet) containsBytes(b []byte) bool {
	if r == nil || len(b) < minSecretLen {
		return false
	}
	for _, sec := range r.raw {
		if bytes.Contains(b, sec) {
			return true
		}
	}
	return false
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
// LogValuers, and groups, recursively), including attributes added with
// WithAttrs. A value found to hold a secret is replaced by its redacted
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
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.String(v.String()))
	case slog.KindGroup:
		a.Value = slog.GroupValue(r.attrs(v.Group())...)
	case slog.KindAny:
		x := v.Any()
		if b, ok := byteSlice(x); ok {
			// Text handlers print byte slices as strings.
			if r.containsBytes(b) {
				a.Value = slog.StringValue(string(r.Bytes(b)))
				return a
			}
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
