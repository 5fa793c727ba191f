package stdio

import (
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// Bounds of the stderr tail kept for error messages.
const (
	tailLines   = 5    // last stderr lines kept per process
	tailKeep    = 1024 // bytes of each line kept (redaction needs more than is shown)
	tailShow    = 200  // bytes of each line shown, after redaction
	tailShowAll = 600  // bytes of all lines shown together
)

// tail is a ring of a process's last stderr lines, so that the error of a
// child that dies says why ("fatal: no API key set"). Lines are stored
// raw; redaction happens once, when the error is built.
type tail struct {
	mu    sync.Mutex
	slots [tailLines][]byte // guarded by mu; slot buffers are reused
	next  int               // guarded by mu: the slot the next line goes to
	n     int               // guarded by mu: lines held, up to tailLines
}

// add keeps the first tailKeep bytes of line, cut between words: a
// secret the cut went through would not be redacted later, and redaction
// before it could shift its prefix into what is shown.
func (t *tail) add(line []byte) {
	if len(line) > tailKeep {
		line = line[:audit.WordCut(line, tailKeep)]
		if len(line) == 0 {
			line = []byte("…")
		}
	}
	t.mu.Lock()
	t.slots[t.next] = append(t.slots[t.next][:0], line...)
	t.next = (t.next + 1) % tailLines
	t.n = min(t.n+1, tailLines)
	t.mu.Unlock()
}

// lines returns the lines held, oldest first, each redacted (redact may be
// nil) and then clipped, within tailShowAll bytes in all (the newest kept).
func (t *tail) lines(redact func(string) string) []string {
	t.mu.Lock()
	raw := make([]string, 0, t.n)
	for i := range t.n {
		raw = append(raw, string(t.slots[(t.next-t.n+i+tailLines)%tailLines]))
	}
	t.mu.Unlock()
	out := make([]string, 0, len(raw))
	total := 0
	for i := len(raw) - 1; i >= 0; i-- {
		s := raw[i]
		if redact != nil {
			s = redact(s) // before clipping, so no secret is cut in half
		}
		s = clipString(s, tailShow)
		if total+len(s) > tailShowAll && len(out) > 0 {
			break
		}
		total += len(s)
		out = append(out, s)
	}
	slices.Reverse(out)
	return out
}

// clipString cuts s to at most n bytes on a rune boundary, marking the cut.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}

// ExitError is how a child that wrote to stderr ended: Err (usually an
// *exec.ExitError, which errors.As still finds) and its last stderr lines,
// redacted (Spec.Redact) and clipped.
type ExitError struct {
	Err    error
	Stderr []string
}

func (e *ExitError) Error() string {
	return e.Err.Error() + "; last stderr: " + strings.Join(e.Stderr, " | ")
}

func (e *ExitError) Unwrap() error { return e.Err }
