package guard

import (
	"slices"
	"strings"
)

// Mode is what a guard does with what it finds. The zero value is Off.
type Mode string

const (
	Off     Mode = ""        // not checked
	Monitor Mode = "monitor" // reported (audit line, metric), passed on as it is
	Strip   Mode = "strip"   // hidden characters and markup: removed, then passed on
	Redact  Mode = "redact"  // secrets and PII: replaced by a typed placeholder
	Block   Mode = "block"   // refused (a call) or hidden (a listed tool)
)

// Finding is one thing a detector found in one string: where, and by which
// rule, never the text it matched, so that a finding can be logged.
type Finding struct {
	Detector string // "hidden", "markup", "secret", "pii"
	Rule     string // e.g. "tag", "bidi", "ansi", "image", "aws-access-token", "email"
	Path     string // JSON Pointer to the string in a walked value; "" for a lone string
	Offset   int    // bytes into the string
	Length   int    // bytes
}

// Placeholder is what Redact puts in place of f: [REDACTED:rule].
func Placeholder(f Finding) string { return "[REDACTED:" + f.Rule + "]" }

// Apply returns s with the span of each finding replaced by repl(f) ("" to
// strip). Findings must be of s (one Path); overlapping ones are merged
// into the first.
func Apply(s string, fs []Finding, repl func(Finding) string) string {
	if len(fs) == 0 {
		return s
	}
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b Finding) int { return a.Offset - b.Offset })
	var b strings.Builder
	at := 0
	for _, f := range fs {
		if f.Offset < at || f.Offset+f.Length > len(s) {
			continue
		}
		b.WriteString(s[at:f.Offset])
		b.WriteString(repl(f))
		at = f.Offset + f.Length
	}
	b.WriteString(s[at:])
	return b.String()
}

// Detector finds things in one string. Findings' offsets are into s. s
// is valid only during the call (Walk hands over views of the message and
// of a reused buffer): a Detector that keeps it must copy it.
type Detector interface {
	Scan(s string) []Finding
}
