package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Report is what a walk found. Findings are in document order; each has
// the JSON Pointer of its string as Path. Unscanned counts the string
// bytes past the cap, which were passed unseen.
type Report struct {
	Findings  []Finding
	Scanned   int
	Unscanned int
}

// Walk runs the detectors over every string value of the JSON document
// doc (a tools/call result: content text, embedded resource text,
// structuredContent; or a call's arguments), up to maxBytes of string
// bytes in all (0: no cap). Base64 payloads are skipped: "blob" members,
// and "data" of an object with a "mimeType". Member names are not
// scanned. Malformed JSON is an error.
func Walk(doc json.RawMessage, maxBytes int, ds ...Detector) (Report, error) {
	v, err := decode(doc)
	if err != nil {
		return Report{}, err
	}
	var r Report
	walk(v, "", func(path string, s string) string {
		n := len(s)
		if maxBytes > 0 && r.Scanned+n > maxBytes {
			r.Unscanned += n
			return s
		}
		r.Scanned += n
		for _, d := range ds {
			for _, f := range d.Scan(s) {
				f.Path = path
				r.Findings = append(r.Findings, f)
			}
		}
		return s
	})
	return r, nil
}

// Rewrite returns doc with each finding's span replaced by repl(f) (see
// Apply): Placeholder to redact, "" to strip. Without findings doc comes
// back as it was; otherwise it is encoded again (members sorted, numbers
// as written).
func Rewrite(doc json.RawMessage, fs []Finding, repl func(Finding) string) (json.RawMessage, error) {
	if len(fs) == 0 {
		return doc, nil
	}
	byPath := map[string][]Finding{}
	for _, f := range fs {
		byPath[f.Path] = append(byPath[f.Path], f)
	}
	v, err := decode(doc)
	if err != nil {
		return nil, err
	}
	v = walk(v, "", func(path, s string) string { return Apply(s, byPath[path], repl) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func decode(doc json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	return v, nil
}

// walk calls fn on every string value under v in document order (object
// members by name), replacing each with what fn returns.
func walk(v any, path string, fn func(path, s string) string) any {
	switch t := v.(type) {
	case string:
		return fn(path, t)
	case []any:
		for i := range t {
			t[i] = walk(t[i], path+"/"+strconv.Itoa(i), fn)
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		_, binary := t["mimeType"]
		for _, k := range keys {
			if k == "blob" || k == "data" && binary {
				continue
			}
			t[k] = walk(t[k], path+"/"+escapePointer(k), fn)
		}
	}
	return v
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// HeaderPrefix is the prefix of the headers that mirror a call's
// arguments (Mcp-Param-*).
const HeaderPrefix = "Mcp-Param-"

// ScanHeaders runs the detectors over the values of h's Mcp-Param-*
// headers; a finding's Path is "header:", the header's name, "/" and the
// value's index.
func ScanHeaders(h http.Header, ds ...Detector) []Finding {
	var out []Finding
	for name, vals := range h {
		if !strings.HasPrefix(http.CanonicalHeaderKey(name), HeaderPrefix) {
			continue
		}
		for i, v := range vals {
			for _, d := range ds {
				for _, f := range d.Scan(v) {
					f.Path = "header:" + name + "/" + strconv.Itoa(i)
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// RewriteHeaders applies findings from ScanHeaders to h in place.
func RewriteHeaders(h http.Header, fs []Finding, repl func(Finding) string) {
	byValue := map[string][]Finding{}
	for _, f := range fs {
		byValue[f.Path] = append(byValue[f.Path], f)
	}
	for name, vals := range h {
		for i, v := range vals {
			if f := byValue["header:"+name+"/"+strconv.Itoa(i)]; f != nil {
				vals[i] = Apply(v, f, repl)
			}
		}
	}
}
