//go:build unix

package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// countHandler counts what a Process logs: lines of child output, and the
// lines the summaries say were suppressed.
type countHandler struct {
	mu         sync.Mutex
	records    int
	lines      map[string]int // logged child lines by content
	suppressed int64
	truncated  int
}

func newCount() *countHandler { return &countHandler{lines: map[string]int{}} }

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countHandler) WithGroup(string) slog.Handler            { return h }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records++
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "line":
			h.lines[a.Value.String()]++
		case "suppressed":
			h.suppressed += a.Value.Int64()
		case "truncated":
			h.truncated++
		}
		return true
	})
	return nil
}

func (h *countHandler) snapshot() (records int, lines map[string]int, suppressed int64, truncated int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[string]int{}
	for k, v := range h.lines {
		m[k] = v
	}
	return h.records, m, h.suppressed, h.truncated
}

// A child writing 4 MiB of 2-byte lines on stdout and 4 MiB on stderr
// produces under 1,000 log records, every line is accounted for (logged or
// counted as suppressed), and a call made during the flood is answered.
func TestOutputFloodIsRateLimited(t *testing.T) {
	t.Parallel()
	h := newCount()
	r := &rec{ch: make(chan []byte, 4)}
	s := spec(t, "flood")
	s.Logger = slog.New(h)
	started := time.Now()
	p := start(t, s, r)
	if err := p.Write([]byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	sawAnswer, sawFlooded := false, false
	deadline := time.After(2 * time.Minute)
	for !sawAnswer || !sawFlooded {
		select {
		case b := <-r.ch:
			switch string(b) {
			case `{"id":1}`:
				sawAnswer = true
			case `{"flooded":true}`:
				sawFlooded = true
			}
		case <-deadline:
			t.Fatalf("after 2m: answer %v, flood finished %v", sawAnswer, sawFlooded)
		}
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	records, lines, suppressed, _ := h.snapshot()
	// The budget refills with time: on a loaded machine the flood lasts
	// longer and earns more lines (per stream: the burst, the rate per
	// second, and a summary a second).
	limit := 1000 + int(2*(DefaultLogRate+1)*time.Since(started).Seconds())
	if records >= limit {
		t.Errorf("%d log records for a flood of %d lines in %v; want under %d", records, 2*floodLines, time.Since(started), limit)
	}
	logged := int64(lines["x"] + lines["e"])
	if logged+suppressed != 2*floodLines {
		t.Errorf("logged %d + suppressed %d = %d lines, want %d (every line logged or counted)",
			logged, suppressed, logged+suppressed, 2*floodLines)
	}
	if lines["x"] == 0 || lines["e"] == 0 {
		t.Errorf("logged %d stdout and %d stderr lines; want some of each before the budget ran out", lines["x"], lines["e"])
	}
}

// A stderr line longer than the read buffer is logged clipped and does not
// silence the lines after it.
func TestLongStderrLine(t *testing.T) {
	t.Parallel()
	h := newCount()
	r := &rec{ch: make(chan []byte, 1)}
	s := spec(t, "longerr")
	s.Logger = slog.New(h)
	p := start(t, s, r)
	next(t, r) // {"done":true}: stderr was written before it
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, lines, _, truncated := h.snapshot()
	if lines["after"] != 1 {
		t.Errorf("\"after\" logged %d times, want 1; lines: %d", lines["after"], len(lines))
	}
	if truncated != 1 {
		t.Errorf("%d records marked truncated, want 1", truncated)
	}
	for l := range lines {
		if len(l) > 600 {
			t.Errorf("a logged line of %d bytes; want it clipped", len(l))
		}
	}
}

// A child that dies at start says why: its error carries the last stderr
// lines, redacted, and still unwraps to the *exec.ExitError.
// A secret across the 512-byte clip of a logged stderr or stdout line is
// redacted whole: no prefix of it reaches a redacting log, with or without
// Spec.Redact.
func TestLoggedLinesRedactedBeforeClip(t *testing.T) {
	t.Parallel()
	const secret = "sk-test-STRADDLES-THE-CLIP-0123"
	for _, withSpec := range []bool{false, true} {
		var buf peertest.Buffer
		s := spec(t, "secretlines", "STDIO_TEST_SECRET="+secret)
		red := audit.NewRedactor([]string{secret})
		s.Logger = slog.New(audit.RedactingHandler(slog.NewTextHandler(&buf, nil), red))
		if withSpec {
			s.Redact = red.String
		}
		r := &rec{ch: make(chan []byte, 1)}
		p := start(t, s, r)
		next(t, r) // {"done":true}: both lines were written before it
		if err := p.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Count(out, "[REDACTED]") != 2 || strings.Contains(out, secret[:4]) {
			t.Errorf("Spec.Redact set %v: want both lines redacted, no prefix of the secret:\n%s", withSpec, out)
		}
	}
}

func TestExitErrorCarriesStderr(t *testing.T) {
	t.Parallel()
	const secret = "sk-test-0123456789"
	s := spec(t, "fatal", "STDIO_TEST_SECRET="+secret)
	s.Redact = func(v string) string { return strings.ReplaceAll(v, secret, "[REDACTED]") }
	p := start(t, s, &rec{})
	waitDone(t, p, 5*time.Second)
	err := p.Err()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Err = %v, want exit status 3", err)
	}
	var xe *ExitError
	if !errors.As(err, &xe) {
		t.Fatalf("Err = %T, want *ExitError", err)
	}
	msg := err.Error()
	for _, want := range []string{"exit status 3", "fatal: no API key set", "using key [REDACTED]"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Err = %q, want it to contain %q", msg, want)
		}
	}
	if strings.Contains(msg, secret) {
		t.Errorf("Err = %q leaks the secret", msg)
	}
	b, _ := json.Marshal(xe.Stderr)
	if len(xe.Stderr) != 3 {
		t.Errorf("Stderr = %s, want the 3 lines", b)
	}
}

func TestTailKeepsLastLinesClipped(t *testing.T) {
	var tl tail
	for i := range 12 {
		tl.add([]byte(strings.Repeat(string(rune('a'+i)), 300)))
	}
	got := tl.lines(nil)
	if len(got) == 0 || len(got) > tailLines {
		t.Fatalf("%d lines, want 1..%d", len(got), tailLines)
	}
	total := 0
	for _, l := range got {
		total += len(l)
		if len(l) > tailShow+len("…") {
			t.Errorf("line of %d bytes, want at most %d", len(l), tailShow)
		}
	}
	if total > tailShowAll {
		t.Errorf("%d bytes in all, want at most %d", total, tailShowAll)
	}
	if last := got[len(got)-1]; last[0] != 'l' {
		t.Errorf("last line starts %q, want the newest ('l')", last[:1])
	}
	var empty tail
	if got := empty.lines(nil); len(got) != 0 {
		t.Errorf("empty tail gave %q", got)
	}
}

// A stderr line kept cut (tailKeep) is cut between words: a secret the cut
// went through is not redacted later, and redacting the ones before it
// (each shorter once replaced) would bring its prefix into what is shown.
func TestTailCutKeepsNoSecretPrefix(t *testing.T) {
	secret := "sk-" + strings.Repeat("T", 97) // 100 bytes
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") }
	line := strings.Repeat(secret, 10) + " " + secret // the last one straddles byte 1024
	var tl tail
	tl.add([]byte(line))
	got := tl.lines(redact)
	if len(got) != 1 || strings.Contains(got[0], "sk-") || !strings.HasPrefix(got[0], "[REDACTED]") {
		t.Fatalf("tail shows %q, want the secrets redacted and no prefix of the cut one", got)
	}
	var one tail
	one.add([]byte(strings.Repeat("w", 2*tailKeep)))
	if got := one.lines(nil); len(got) != 1 || got[0] != "…" {
		t.Fatalf("one word longer than tailKeep: %q, want the cut mark", got)
	}
}

func TestLineLimitBudget(t *testing.T) {
	h := newCount()
	log := slog.New(h)
	l := NewLineLimit(1, 10)
	allowed := 0
	for range 1000 {
		if l.allow(streamStderr, log) {
			allowed++
		}
	}
	if !l.allow(streamStdout, log) {
		t.Error("a stderr flood used up stdout's budget")
	}
	if allowed < 10 || allowed > 12 {
		t.Errorf("%d of 1000 lines allowed at once, want the burst (10)", allowed)
	}
	l.flush()
	if _, _, suppressed, _ := h.snapshot(); suppressed != int64(1000-allowed) {
		t.Errorf("summary says %d suppressed, want %d", suppressed, 1000-allowed)
	}
	l.flush() // nothing new: no second summary
	if records, _, _, _ := h.snapshot(); records != 1 {
		t.Errorf("%d summaries, want 1", records)
	}
}

// Any stderr bytes: read to the end, no line kept over its bound, the
// shown lines clipped, and the last line (if any) is the newest kept.
func FuzzStderr(f *testing.F) {
	f.Add([]byte("fatal: no API key set\n"))
	f.Add([]byte(strings.Repeat("L", 70<<10) + "\nafter\n"))
	f.Add([]byte("\n\n \r\nx"))
	f.Add([]byte("\xff\xfe\x00 bad utf8 \xe2\x82\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		h := newCount()
		p := &Process{log: slog.New(h), lines: NewLineLimit(1000, 1000)}
		p.readStderr(bytes.NewReader(in))
		p.tail.mu.Lock()
		for i := range p.tail.n {
			if len(p.tail.slots[i]) > tailKeep {
				t.Fatalf("tail line of %d bytes kept", len(p.tail.slots[i]))
			}
		}
		p.tail.mu.Unlock()
		total := 0
		for _, l := range p.tail.lines(strings.ToUpper) {
			total += len(l)
			if len(l) > tailShow+len("…") {
				t.Fatalf("shown line of %d bytes", len(l))
			}
		}
		if total > tailShowAll+tailShow+len("…") {
			t.Fatalf("%d bytes shown", total)
		}
		_, lines, _, _ := h.snapshot()
		for l := range lines {
			if len(l) > 512+len("…") {
				t.Fatalf("logged line of %d bytes", len(l))
			}
		}
	})
}
