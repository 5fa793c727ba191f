package stdio

import (
	"bytes"
	"io"

	"github.com/switchboard-mcp/switchboard/internal/bigbuf"
)

// baseRead is the size of a line reader's own buffer, which it keeps: one
// read takes up to a pipe's capacity (64 KiB on Linux).
const baseRead = 64 << 10

// lineReader splits a child's output into lines. A line is handed out as a
// slice of the reader's buffer, valid until the next call: bytes are copied
// once, by the read system call, and a line longer than the buffer moves
// to a larger one (from bigbuf, sized as the last long line needed) as it
// arrives, not once per read. The larger buffer goes back to bigbuf as
// soon as it holds no unread byte: a child answering one large message
// after another reuses one buffer, and one waiting for its next request
// holds none.
type lineReader struct {
	r       io.Reader
	own     []byte // the reader's own buffer, baseRead bytes
	buf     []byte // own, or a buffer from bigbuf while a long line needs one
	start   int    // buf[start:end] is read and not handed out yet
	end     int
	scanned int   // buf[start:scanned] holds no '\n'
	max     int   // the longest line taken, without its '\n'
	want    int   // the size of the buffer the last long line needed
	err     error // the read error, returned once the buffer is empty
	// skipping is set while the rest of an oversize line is dropped.
	skipping bool
}

func newLineReader(r io.Reader, maxLine int) *lineReader {
	own := make([]byte, baseRead)
	return &lineReader{r: r, own: own, buf: own, max: maxLine}
}

// next returns the next line without its '\n' (the last line of the
// stream may have none). A line longer than max is not returned: next
// returns its first bytes (up to 4 KiB) as prefix with over set, and drops
// the rest of it as it arrives. err is set, with no line, once the stream
// ended or failed and everything before that was handed out.
func (l *lineReader) next() (line []byte, over bool, err error) {
	for {
		if i := bytes.IndexByte(l.buf[l.scanned:l.end], '\n'); i >= 0 {
			nl := l.scanned + i
			line = l.buf[l.start:nl]
			l.start, l.scanned = nl+1, nl+1
			if l.skipping {
				l.skipping = false
				continue
			}
			if len(line) > l.max {
				return prefix(line), true, nil
			}
			return line, false, nil
		}
		l.scanned = l.end
		if l.skipping {
			l.start, l.scanned, l.end = 0, 0, 0 // dropped
		} else if l.end-l.start > l.max {
			line = l.buf[l.start:l.end]
			l.skipping = true
			// The prefix is handed out now, and what follows it is read
			// into the same buffer: keep it, and drop the rest.
			l.start, l.scanned = l.end, l.end
			return prefix(line), true, nil
		}
		if l.start == l.end {
			l.start, l.scanned, l.end = 0, 0, 0
			l.release()
		}
		if l.err != nil {
			if l.end > l.start && !l.skipping {
				line = l.buf[l.start:l.end]
				l.start, l.scanned = l.end, l.end
				if len(line) > l.max {
					return prefix(line), true, nil
				}
				return line, false, nil
			}
			return nil, false, l.err
		}
		if l.end == len(l.buf) {
			l.room()
		}
		n, err := l.r.Read(l.buf[l.end:])
		l.end += n
		l.err = err
	}
}

// prefix is the first bytes of an oversize line, for OnOversize.
func prefix(line []byte) []byte {
	return line[:min(len(line), 4096)]
}

// room makes space after buf[end] for the next read: the unread bytes move
// to the start of the buffer, or, when they fill it, to a larger one.
func (l *lineReader) room() {
	n := l.end - l.start
	if n < len(l.buf)/2 {
		copy(l.buf, l.buf[l.start:l.end])
	} else {
		size := max(2*len(l.buf), l.want)
		for size < n+baseRead {
			size *= 2
		}
		l.want = size
		nb := bigbuf.Get(size)
		copy(nb, l.buf[l.start:l.end])
		l.release()
		l.buf = nb
	}
	l.start, l.scanned, l.end = 0, l.scanned-l.start, n
}

// release gives a large buffer back to bigbuf (its unread bytes, if any,
// were copied out) and goes back to the reader's own.
func (l *lineReader) release() {
	if &l.buf[0] == &l.own[0] {
		return
	}
	bigbuf.Put(l.buf)
	l.buf = l.own
}
