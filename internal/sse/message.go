package sse

// This file is the MessageReader the upstream HTTP clients (Streamable
// HTTP and legacy SSE) read event streams with.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultMaxMessage is the message size limit of a client whose MaxMessage
// is zero, and of a MessageReader given none.
const DefaultMaxMessage = 16 << 20

// prefixLen is how many bytes of an oversized message are reported.
const prefixLen = 4096

// MessageReader reads an event stream the way an MCP client needs it. It
// wraps a [Reader] with two differences:
//
//   - an event over the size limit does not end the stream: its first bytes
//     are reported to the oversize callback and the event is skipped;
//   - it keeps the stream's retry delay even when set by an event that has
//     no data (a Streamable HTTP server's "close" event), which Reader does
//     not return.
//
// To know the skipped event's first bytes exactly, the source is fed to the
// Reader one line at a time, so everything the Reader has been given since
// the last blank line belongs to the event it is reading.
type MessageReader struct {
	f        *lineFeeder
	r        *Reader
	max      int
	oversize func(prefix []byte)
	replaced bool   // r replaced a Reader that failed on an oversized event
	lastID   string // the last event ID when r was created
}

// NewMessageReader returns a MessageReader over src. maxEventBytes limits the
// data of one event (zero or less: [DefaultMaxMessage]); oversize, if not
// nil, is called with the first bytes of the data of each event over it.
func NewMessageReader(src io.Reader, maxEventBytes int, oversize func(prefix []byte)) *MessageReader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxMessage
	}
	f := &lineFeeder{br: bufio.NewReaderSize(src, readBufSize), atStart: true}
	return &MessageReader{f: f, r: NewReader(f, maxEventBytes), max: maxEventBytes, oversize: oversize}
}

// Next returns the next event with data. Oversized events are reported and
// skipped. Errors are those of [Reader.Next], except ErrEventTooLarge.
func (m *MessageReader) Next() (Event, error) {
	for {
		ev, err := m.r.Next()
		if !errors.Is(err, ErrEventTooLarge) {
			if err == nil && m.replaced && !m.f.sawID {
				ev.ID = m.lastID // the ID carries over, as in one Reader
			}
			return ev, err
		}
		prefix, id, hasID := m.f.eventPrefix()
		if !hasID {
			id = m.LastEventID()
		}
		m.lastID, m.replaced, m.f.sawID = id, true, false
		if len(prefix) > 0 && m.oversize != nil {
			m.oversize(prefix)
		}
		if err := m.f.skipEvent(); err != nil {
			return Event{}, err
		}
		m.r = NewReader(m.f, m.max)
	}
}

// LastEventID returns the stream's last event ID (see [Reader.LastEventID]);
// a client resuming the stream sends it as Last-Event-ID.
func (m *MessageReader) LastEventID() string {
	if m.replaced && !m.f.sawID {
		return m.lastID
	}
	return m.r.LastEventID()
}

// Retry returns the reconnection delay the stream last set, or zero.
func (m *MessageReader) Retry() time.Duration { return m.f.retry }

// lineFeeder hands its source to a Reader at most one line per Read, and
// keeps the raw lines of the current event (up to prefixLen bytes of them).
type lineFeeder struct {
	br       *bufio.Reader
	atStart  bool   // the next byte begins a line
	afterCR  bool   // the last line ended in CR: an LF next belongs to it
	event    []byte // the current event's lines, each ending in LF (truncated)
	head     []byte // the first bytes of the current line
	retry    time.Duration
	sawID    bool // an id field was passed
	boundary bool // a blank line (the end of an event) was passed
}

const headLen = 32

func (f *lineFeeder) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := f.br.Peek(1); err != nil {
		return 0, err
	}
	b, _ := f.br.Peek(min(len(p), f.br.Buffered()))
	n := len(b)
	if i := indexEOL(b); i >= 0 {
		n = i + 1
		if b[i] == '\r' && n < len(b) && b[n] == '\n' {
			n++
		}
	}
	copy(p, b[:n])
	_, _ = f.br.Discard(n)
	f.track(p[:n])
	return n, nil
}

// track follows line and event boundaries in b, which holds at most one
// line terminator, at its end.
func (f *lineFeeder) track(b []byte) {
	if f.afterCR && len(b) > 0 && b[0] == '\n' {
		b = b[1:]
	}
	f.afterCR = false
	if len(b) == 0 {
		return
	}
	content, term := b, false
	switch b[len(b)-1] {
	case '\n':
		term = true
		content = b[:len(b)-1]
		if len(content) > 0 && content[len(content)-1] == '\r' {
			content = content[:len(content)-1]
		}
	case '\r':
		term = true
		content = b[:len(b)-1]
		f.afterCR = true
	}
	if len(content) > 0 {
		f.atStart = false
		f.event = appendUpTo(f.event, content, prefixLen+headLen)
		f.head = appendUpTo(f.head, content, headLen)
	}
	if !term {
		return
	}
	if f.atStart {
		f.event = f.event[:0]
		f.boundary = true
		return
	}
	f.event = appendUpTo(f.event, []byte{'\n'}, prefixLen+headLen+1)
	if bytes.Equal(f.head, []byte("id")) || bytes.HasPrefix(f.head, []byte("id:")) {
		f.sawID = true
	}
	if v, ok := bytes.CutPrefix(f.head, []byte("retry:")); ok {
		v = bytes.TrimPrefix(v, []byte(" "))
		if d, ok := parseRetry(v); ok {
			f.retry = d
		}
	}
	f.head = f.head[:0]
	f.atStart = true
}

func appendUpTo(dst, b []byte, limit int) []byte {
	if room := limit - len(dst); room < len(b) {
		b = b[:max(room, 0)]
	}
	return append(dst, b...)
}

// skipEvent discards the rest of the current event.
func (f *lineFeeder) skipEvent() error {
	f.boundary = false
	var scratch [4096]byte
	for !f.boundary {
		if _, err := f.Read(scratch[:]); err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return fmt.Errorf("sse: read: %w", err)
		}
	}
	return nil
}

// eventPrefix returns the start of the current event's data, and its id
// field if one was seen.
func (f *lineFeeder) eventPrefix() (prefix []byte, id string, hasID bool) {
	for line := range bytes.SplitSeq(f.event, []byte("\n")) {
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if prefix != nil {
				prefix = append(prefix, '\n')
			}
			prefix = append(prefix, value...)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				id, hasID = string(value), true
			}
		}
	}
	if len(prefix) > prefixLen {
		prefix = prefix[:prefixLen]
	}
	return prefix, id, hasID
}
