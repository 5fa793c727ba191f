package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Errors is every problem found while loading a configuration. Load and
// Parse return it, sorted by file and line, whenever they fail. Its elements
// wrap the underlying error where there is one (a file that cannot be
// read), so errors.Is and errors.As see through it.
type Errors []error

// Error returns the messages, one per line.
func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the individual errors.
func (e Errors) Unwrap() []error { return e }

// posError is one problem at a position of a file.
type posError struct {
	file string // "" when no file is involved (environment overrides)
	line int    // 0 when unknown
	path string // dotted path of the offending key, "" for the document
	msg  string
	err  error // wrapped cause, or nil
}

func (e *posError) Error() string {
	var b strings.Builder
	if e.file != "" {
		b.WriteString(e.file)
		if e.line > 0 {
			fmt.Fprintf(&b, ":%d", e.line)
		}
		b.WriteString(": ")
	}
	if e.path != "" {
		b.WriteString(e.path)
		b.WriteString(": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

func (e *posError) Unwrap() error { return e.err }

// sortErrors orders errs by file (main first, other files next, no file
// last) and then by line, unknown lines last; it keeps the discovery order
// of errors at the same position.
func sortErrors(errs []*posError, main string) {
	rank := func(e *posError) int {
		switch e.file {
		case main:
			return 0
		case "":
			return 2
		}
		return 1
	}
	line := func(e *posError) int {
		if e.line == 0 {
			return int(^uint(0) >> 1)
		}
		return e.line
	}
	slices.SortStableFunc(errs, func(a, b *posError) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.file, b.file), cmp.Compare(line(a), line(b)))
	})
}
