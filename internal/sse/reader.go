package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// DefaultMaxEventBytes is the event size limit of a [Reader] built with a
// limit of zero or less.
const DefaultMaxEventBytes = 1 << 20

// ErrEventTooLarge is returned by [Reader.Next] when an event's data, or any
// single line of the stream, exceeds the reader's limit (see [Reader]). The reader cannot
// find the next event boundary safely after that, so it is unusable: every
// later call to Next returns ErrEventTooLarge again.
var ErrEventTooLarge = errors.New("sse: event too large")

// readBufSize is the size of a Reader's input buffer.
const readBufSize = 16 << 10

// fieldSlack is how far a line may exceed the event limit, so that a line
// whose value fits the limit fits too, with its field name ("data: ").
const fieldSlack = 16

// maxEmptyReads bounds consecutive (0, nil) reads, as bufio does.
const maxEmptyReads = 100

// Event is one dispatched event.
type Event struct {
	// Name is the event type: the last "event:" field of the event, or
	// "message" when it had none (or an empty one).
	Name string
	// ID is the stream's last event ID when the event was dispatched. As the
	// standard specifies, it carries over from earlier events when this event
	// has no "id:" field, and an empty "id:" field resets it to "".
	ID string
	// Data is the event's "data:" lines joined with LF. It is never nil and
	// is owned by the caller.
	Data []byte
	// Retry is the reconnection delay most recently set by a "retry:" field,
	// in this event or an earlier one; zero if the stream has set none.
	Retry time.Duration
}

// Reader parses an event stream, as the WHATWG HTML standard ("Interpreting
// an event stream") specifies: lines end in LF, CRLF or CR; a leading UTF-8
// byte order mark is skipped; lines starting with ":" are comments; fields
// are event, data, id and retry, and others are ignored; a blank line
// dispatches the event. An event with no data lines is not returned, but its
// id and retry fields still take effect.
//
// Memory is bounded by the limit given to [NewReader]: Data is at most that
// many bytes, and no line may be more than 16 bytes longer (room for a field
// name), comment lines included.
//
// A Reader is not safe for concurrent use. The zero Reader is not usable;
// call [NewReader].
type Reader struct {
	src io.Reader
	max int

	// buf[r:w] is read from src but not yet consumed.
	buf  []byte
	r, w int
	// srcErr is the error src returned; reported once buf is drained.
	srcErr error

	line      []byte // a line that spans reads is gathered here
	skipLF    bool   // the last line ended in CR: an LF next is part of it
	bomDone   bool   // the start of the stream has been checked for a BOM
	inEvent   bool   // a field line was seen since the last dispatch
	data      []byte // data buffer: each data line plus LF, per the standard
	hasData   bool   // a data line was seen (data may hold just LF)
	name      string // event type buffer
	prevName  string // last name set, reused to avoid an allocation
	idBuf     string // last event ID buffer
	lastID    string // last event ID string, set at each dispatch
	retry     time.Duration
	err       error // sticky error returned by every later Next
	lineLimit int   // max + fieldSlack
}

// NewReader returns a Reader that parses the stream r. maxEventBytes limits
// the size of an event's data and of any one line; zero or less means
// [DefaultMaxEventBytes].
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &Reader{
		src:       r,
		max:       maxEventBytes,
		buf:       make([]byte, readBufSize),
		lineLimit: maxEventBytes + fieldSlack,
	}
}

// LastEventID returns the stream's last event ID: the value of the most
// recent "id:" field that has been dispatched by a blank line, even if the
// event it belonged to carried no data and so was not returned. A client
// sends it as Last-Event-ID when it reconnects.
func (r *Reader) LastEventID() string { return r.lastID }

// Next returns the next event.
//
// At a clean end of the stream (after a blank line, or with only comments
// since the last one) it returns io.EOF. If the stream ends in the middle of
// an event or of a line, the partial event is discarded and Next returns
// io.ErrUnexpectedEOF. If an event is too large it returns
// [ErrEventTooLarge]. Other read errors are returned wrapped. Every error is
// sticky: later calls return it again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
		r.data = nil
		r.line = nil
	}
	return ev, err
}

func (r *Reader) next() (Event, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment
		}
		r.inEvent = true
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			// Reuse the previous name's string: streams repeat few names.
			if string(value) == r.prevName {
				r.name = r.prevName
			} else {
				r.name = string(value)
				r.prevName = r.name
			}
		case "data":
			if len(r.data)+len(value) > r.max {
				// The trailing LF is dropped at dispatch, so data may
				// reach exactly max bytes.
				return Event{}, ErrEventTooLarge
			}
			r.data = append(r.data, value...)
			r.data = append(r.data, '\n')
			r.hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 && string(value) != r.idBuf {
				r.idBuf = string(value)
			}
		case "retry":
			if d, ok := parseRetry(value); ok {
				r.retry = d
			}
		}
	}
}

// dispatch ends the current event at a blank line. It reports false when the
// event had no data and so is not delivered.
func (r *Reader) dispatch() (Event, bool) {
	r.lastID = r.idBuf
	r.inEvent = false
	name := r.name
	r.name = ""
	if !r.hasData {
		return Event{}, false
	}
	r.hasData = false
	if name == "" {
		name = "message"
	}
	data := make([]byte, len(r.data)-1)
	copy(data, r.data)
	r.data = r.data[:0]
	return Event{Name: name, ID: r.lastID, Data: data, Retry: r.retry}, true
}

// parseRetry parses a retry field: ASCII digits only, in milliseconds.
func parseRetry(v []byte) (time.Duration, bool) {
	ms, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil || ms > math.MaxInt64/uint64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// readLine returns the next line without its terminator. The slice is valid
// until the next call. At the end of the input it returns io.EOF if no
// partial event or line is pending, and io.ErrUnexpectedEOF otherwise.
func (r *Reader) readLine() ([]byte, error) {
	if !r.bomDone {
		r.skipBOM()
	}
	r.line = r.line[:0]
	partial := false
	for {
		if r.skipLF && r.r < r.w {
			if r.buf[r.r] == '\n' {
				r.r++
			}
			r.skipLF = false
		}
		chunk := r.buf[r.r:r.w]
		if i := indexEOL(chunk); i >= 0 {
			r.r += i + 1
			r.skipLF = chunk[i] == '\r'
			line := chunk[:i]
			if partial {
				if len(r.line)+len(line) > r.lineLimit {
					return nil, ErrEventTooLarge
				}
				r.line = append(r.line, line...)
				line = r.line
			} else if len(line) > r.lineLimit {
				return nil, ErrEventTooLarge
			}
			return line, nil
		}
		if len(chunk) > 0 {
			if len(r.line)+len(chunk) > r.lineLimit {
				return nil, ErrEventTooLarge
			}
			r.line = append(r.line, chunk...)
			partial = true
			r.r = r.w
		}
		if r.srcErr != nil {
			return nil, r.endErr(partial)
		}
		r.fill()
	}
}

// endErr is the error for the end of the input.
func (r *Reader) endErr(partial bool) error {
	if r.srcErr != io.EOF {
		return fmt.Errorf("sse: read: %w", r.srcErr)
	}
	if partial || r.inEvent {
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}

// skipBOM drops a UTF-8 byte order mark at the start of the stream.
func (r *Reader) skipBOM() {
	for r.w-r.r < 3 && r.srcErr == nil {
		r.fill()
	}
	r.bomDone = true
	if bytes.HasPrefix(r.buf[r.r:r.w], []byte("\xef\xbb\xbf")) {
		r.r += 3
	}
}

// fill reads more input into buf, recording any error in srcErr.
func (r *Reader) fill() {
	if r.r == r.w {
		r.r, r.w = 0, 0
	} else if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			r.srcErr = errors.New("invalid Read count")
			return
		}
		r.w += n
		if err != nil {
			r.srcErr = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.srcErr = io.ErrNoProgress
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}
