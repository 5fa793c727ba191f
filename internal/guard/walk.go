package guard

import (
	"encoding/json"
	"slices"
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
//
// doc is read in place, in one pass (see walker): a string without
// escapes is handed to the detectors as it lies in doc, one with escapes
// is unescaped into a reused buffer, nothing is decoded into Go values.
// Strings are visited in document order, but a "data" member met before
// its object's "mimeType" is visited at the object's end. doc must not
// change during the call.
func Walk(doc json.RawMessage, maxBytes int, ds ...Detector) (Report, error) {
	var r Report
	w := newWalker(doc)
	defer w.release()
	err := w.run(func(path []byte, s string, _, _ int) {
		n := len(s)
		if maxBytes > 0 && r.Scanned+n > maxBytes {
			r.Unscanned += n
			return
		}
		r.Scanned += n
		p, named := "", false
		for _, d := range ds {
			for _, f := range d.Scan(s) {
				if !named {
					p, named = string(path), true
				}
				f.Path = p
				r.Findings = append(r.Findings, f)
			}
		}
	})
	if err != nil {
		return Report{}, err
	}
	return r, nil
}

// Rewrite returns doc with each finding's span replaced by repl(f) (see
// Apply): Placeholder to redact, "" to strip. Without findings doc comes
// back as it was; otherwise a copy of doc in which only the strings with
// findings are written anew (members, order and spacing kept).
func Rewrite(doc json.RawMessage, fs []Finding, repl func(Finding) string) (json.RawMessage, error) {
	if len(fs) == 0 {
		return doc, nil
	}
	byPath := map[string][]Finding{}
	for _, f := range fs {
		byPath[f.Path] = append(byPath[f.Path], f)
	}
	type edit struct {
		start, end int
		with       []byte
	}
	var edits []edit
	w := newWalker(doc)
	defer w.release()
	err := w.run(func(path []byte, s string, start, end int) {
		if f := byPath[string(path)]; f != nil {
			edits = append(edits, edit{start, end, appendQuoted(nil, Apply(s, f, repl))})
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	out := make([]byte, 0, len(doc)+len(fs)*24)
	at := 0
	for _, e := range edits {
		out = append(append(out, doc[at:e.start]...), e.with...)
		at = e.end
	}
	return append(out, doc[at:]...), nil
}
