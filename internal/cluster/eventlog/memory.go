package eventlog

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is an event log in this process's memory, for a single replica
// (or a cluster without Redis, where a stream resumes only on the replica
// that served it). It has Log's contract: After yields every event after
// a cursor, with its cursor, or only ErrEventsPurged. Each stream keeps
// its last MaxLen events and is dropped MaxAge after its last append (an
// age sweep runs within Append, at most every quarter of MaxAge); safe
// for concurrent use. The zero Memory is not usable: use NewMemory.
type Memory struct {
	maxLen int
	maxAge time.Duration

	mu sync.Mutex
	// streams are the kept streams by session, then stream; guarded by mu.
	streams map[string]map[string]*memStream
	swept   time.Time // guarded by mu: the last age sweep
	gen     uint64    // guarded by mu: the last stream generation given
}

// memStream is one stream: its generation (unique in the process, so
// that a stream dropped and created again never matches an old cursor),
// the ordinal of its last event, and its kept events, oldest first.
type memStream struct {
	gen    uint64
	last   uint64
	events [][]byte // events[i] has ordinal last-len(events)+1+i
	at     time.Time
}

// NewMemory returns an in-memory log bounded by opts (Prefix is unused):
// MaxLen events per stream (0: 1000), each stream dropped MaxAge after
// its last event (0: one hour).
func NewMemory(opts Options) *Memory {
	m := &Memory{maxLen: opts.MaxLen, maxAge: opts.MaxAge, streams: map[string]map[string]*memStream{}}
	if m.maxLen <= 0 {
		m.maxLen = 1000
	}
	if m.maxAge <= 0 {
		m.maxAge = time.Hour
	}
	return m
}

// Append adds data as the stream's next event and returns its cursor,
// <generation>.<ordinal>.
func (m *Memory) Append(_ context.Context, session, stream string, data []byte) (string, error) {
	if err := checkNames(session, stream); err != nil {
		return "", err
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.swept) > m.maxAge/4 {
		m.sweepLocked(now)
	}
	ss := m.streams[session]
	if ss == nil {
		ss = map[string]*memStream{}
		m.streams[session] = ss
	}
	s := ss[stream]
	if s == nil {
		m.gen++
		s = &memStream{gen: m.gen}
		ss[stream] = s
	}
	if len(s.events) == m.maxLen {
		s.events[0] = nil
		s.events = s.events[1:]
	}
	s.events = append(s.events, data)
	s.last++
	s.at = now
	return memCursor(s.gen, s.last), nil
}

// sweepLocked drops the streams whose last event is older than maxAge.
func (m *Memory) sweepLocked(now time.Time) {
	m.swept = now
	for session, ss := range m.streams {
		maps.DeleteFunc(ss, func(_ string, s *memStream) bool { return now.Sub(s.at) > m.maxAge })
		if len(ss) == 0 {
			delete(m.streams, session)
		}
	}
}

// After yields, in order, the stream's events after cursor, with their
// cursors; only ErrEventsPurged when one of them is no longer kept or the
// cursor is not one of the stream's. The events are copied out at once.
func (m *Memory) After(_ context.Context, session, stream, cursor string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if err := checkNames(session, stream); err != nil {
			yield(Event{}, err)
			return
		}
		gen, n, ok := parseMemCursor(cursor)
		if !ok {
			yield(Event{}, fmt.Errorf("eventlog: cursor %.40q: %w", cursor, ErrEventsPurged))
			return
		}
		m.mu.Lock()
		s := m.streams[session][stream]
		var out []Event
		first := uint64(0)
		if s != nil {
			first = s.last - uint64(len(s.events)) + 1
		}
		// The cursor's event itself may be trimmed (first-1 is fine):
		// what matters is that every event after it is kept.
		if s == nil || s.gen != gen || n > s.last || n+1 < first {
			m.mu.Unlock()
			yield(Event{}, ErrEventsPurged)
			return
		}
		for o := n + 1; o <= s.last; o++ {
			out = append(out, Event{Cursor: memCursor(gen, o), Data: s.events[o-first]})
		}
		m.mu.Unlock()
		for _, e := range out {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// SessionClosed drops the session's streams.
func (m *Memory) SessionClosed(_ context.Context, session string) error {
	m.mu.Lock()
	delete(m.streams, session)
	m.mu.Unlock()
	return nil
}

func memCursor(gen, n uint64) string {
	return strconv.FormatUint(gen, 10) + "." + strconv.FormatUint(n, 10)
}

// parseMemCursor splits <generation>.<ordinal>.
func parseMemCursor(c string) (gen, n uint64, ok bool) {
	g, o, ok := strings.Cut(c, ".")
	if !ok || !digits(g) || !digits(o) {
		return 0, 0, false
	}
	gen, _ = strconv.ParseUint(g, 10, 63)
	n, _ = strconv.ParseUint(o, 10, 63)
	return gen, n, true
}
