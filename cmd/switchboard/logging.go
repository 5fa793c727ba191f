package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// logFormat is --log-format, else LOG_FORMAT, else "text".
func logFormat(flagValue string) (string, error) {
	v, from := flagValue, "--log-format"
	if v == "" {
		v, from = os.Getenv("LOG_FORMAT"), "LOG_FORMAT"
	}
	switch f := strings.ToLower(strings.TrimSpace(v)); f {
	case "":
		return "text", nil
	case "text", "json":
		return f, nil
	}
	return "", fmt.Errorf("%s %q: want text or json", from, v)
}

// logLevel maps a validated config level (debug, info, warn, error) to slog's.
func logLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// openLog opens the operational log: stderr for "" or "-", else the file
// for appending (its directory created); f is nil for stderr.
func openLog(path string) (w io.Writer, f *os.File, err error) {
	if path == "" || path == "-" {
		return os.Stderr, nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, err
	}
	if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, nil, err
	}
	return f, f, nil
}

// newLogger is the operational log in format ("text" or "json") at level.
// journal means w is the systemd journal's stream (see onJournal): a text
// log then leaves out the time, which the journal records itself, and
// starts each line with its syslog priority (<3> error … <7> debug) so
// that `journalctl -p warning` works.
func newLogger(w io.Writer, format string, level slog.Level, journal bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	switch {
	case format == "json":
		return slog.New(slog.NewJSONHandler(w, opts))
	case journal:
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}
		var mu sync.Mutex
		h := &journalHandler{level: level}
		for i, p := range []string{"<7>", "<6>", "<4>", "<3>"} {
			h.byLevel[i] = slog.NewTextHandler(&prefixWriter{mu: &mu, prefix: p, w: w}, opts)
		}
		return slog.New(h)
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// onJournal reports whether stderr is the journal's stream: systemd sets
// JOURNAL_STREAM to its "device:inode", and a child whose stderr was
// redirected elsewhere inherits the variable, so both must match.
func onJournal() bool {
	want := os.Getenv("JOURNAL_STREAM")
	if want == "" {
		return false
	}
	got, ok := devIno(os.Stderr)
	return ok && got == want
}

// journalHandler sends each record to the text handler of its priority.
type journalHandler struct {
	level   slog.Level
	byLevel [4]slog.Handler // debug, info, warn, error
}

func (h *journalHandler) pick(l slog.Level) slog.Handler {
	switch {
	case l >= slog.LevelError:
		return h.byLevel[3]
	case l >= slog.LevelWarn:
		return h.byLevel[2]
	case l >= slog.LevelInfo:
		return h.byLevel[1]
	}
	return h.byLevel[0]
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.pick(r.Level).Handle(ctx, r)
}

func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.each(func(sub slog.Handler) slog.Handler { return sub.WithAttrs(attrs) })
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return h.each(func(sub slog.Handler) slog.Handler { return sub.WithGroup(name) })
}

// each returns a journalHandler whose handlers are f of h's.
func (h *journalHandler) each(f func(slog.Handler) slog.Handler) *journalHandler {
	n := &journalHandler{level: h.level}
	for i, sub := range h.byLevel {
		n.byLevel[i] = f(sub)
	}
	return n
}

// prefixWriter writes prefix and then each record (slog handlers write a
// record in one call) as one write, under a lock shared by the levels.
type prefixWriter struct {
	mu     *sync.Mutex
	prefix string
	w      io.Writer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := make([]byte, 0, len(p.prefix)+len(b))
	line = append(append(line, p.prefix...), b...)
	if _, err := p.w.Write(line); err != nil {
		return 0, err
	}
	return len(b), nil
}
