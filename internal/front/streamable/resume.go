package streamable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/cluster/eventlog"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// EventLog keeps the events of the listen (GET) streams, so that a client
// reconnecting with Last-Event-ID gets the ones it missed
// (*eventlog.Log in Redis for a cluster, *eventlog.Memory for one
// replica). Sessions are named by Session.LogName (the 16-character id in
// a cluster, the same on every replica); streams by their tag.
type EventLog interface {
	// Append adds data as the stream's next event and returns its cursor.
	Append(ctx context.Context, session, stream string, data []byte) (cursor string, err error)
	// After yields every event after cursor, in order, with its cursor;
	// or only an error (eventlog.ErrEventsPurged: some are gone, or the
	// cursor is not the stream's), never a partial replay.
	After(ctx context.Context, session, stream, cursor string) iter.Seq2[eventlog.Event, error]
	// SessionClosed drops the session's streams (DELETE).
	SessionClosed(ctx context.Context, session string) error
}

// appendTimeout bounds one Append: a log that does not answer costs the
// event its id (it is still sent), not the stream.
const appendTimeout = 2 * time.Second

// takeoverWait bounds the wait for the stream a resumption replaces to
// end (it is cancelled; only a write blocked on a dead connection lasts).
const takeoverWait = 5 * time.Second

// listener is a listen stream being served with event ids: the stream a
// resumption of its tag takes over.
type listener struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream has ended
}

// listeners are the listen streams served with ids, by session and tag.
type listeners struct {
	mu sync.Mutex
	m  map[string]*listener // guarded by mu; key: session name "\x00" tag
}

// take registers l under key and returns the stream it replaces (nil:
// none).
func (ls *listeners) take(key string, l *listener) (old *listener) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[string]*listener{}
	}
	old = ls.m[key]
	ls.m[key] = l
	return old
}

// drop unregisters l if key is still its.
func (ls *listeners) drop(key string, l *listener) {
	ls.mu.Lock()
	if ls.m[key] == l {
		delete(ls.m, key)
	}
	ls.mu.Unlock()
}

// newStreamTag returns a random stream tag: 12 lowercase hex characters
// (48 bits; a tag only has to be unique within its session). Hex, not
// base64url: the tag ends at the first '_' of an event id.
func newStreamTag() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// parseEventID splits a Last-Event-ID of this front, <tag>_<cursor>;
// false for anything else.
func parseEventID(id string) (tag, cursor string, ok bool) {
	tag, cursor, ok = strings.Cut(id, "_")
	if !ok || len(tag) != 12 || strings.Trim(tag, "0123456789abcdef") != "" || cursor == "" || len(id) > 128 {
		return "", "", false
	}
	return tag, cursor, true
}

// listenLogged serves s's listen queue on ev with event ids from the
// log: <tag>_<cursor>. With a Last-Event-ID of this front (lastID), it
// first ends the stream of that tag if it is still served here, replays
// the events after it, in order, then continues that stream live; an
// unknown or purged Last-Event-ID starts a new stream without replay (the
// spec lets a server not replay). A message whose write failed and that
// the log does not keep goes back to the session's queue.
func (h *Handler) listenLogged(ctx context.Context, ev *sse.Writer, s *session.Session, lastID string) {
	log := h.opts.Events
	name := s.LogName()
	tag, cursor, resume := parseEventID(lastID)
	if !resume {
		tag = newStreamTag()
		if lastID != "" {
			h.log.Info("listen stream: Last-Event-ID not of this gateway; a new stream, without replay", "session", name)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	me := &listener{cancel: cancel, done: make(chan struct{})}
	defer close(me.done)
	key := name + "\x00" + tag
	if old := h.listening.take(key, me); old != nil {
		old.cancel() // the client left it: this one takes its place
		select {
		case <-old.done:
		case <-time.After(takeoverWait):
		case <-ctx.Done():
		}
	}
	defer func() { h.listening.drop(key, me) }() // key may change below
	if resume {
		n := 0
		var err error
		for e, ferr := range log.After(ctx, name, tag, cursor) {
			if err = ferr; err != nil {
				break
			}
			if err = ev.EventNoFlush("message", tag+"_"+e.Cursor, e.Data); err != nil {
				return // the log still has them
			}
			n++
		}
		switch {
		case errors.Is(err, eventlog.ErrEventsPurged):
			h.log.Info("listen stream: the events after Last-Event-ID are no longer all kept; a new stream, without replay", "session", name)
		case err != nil:
			h.log.Warn("listen stream: the event log failed; a new stream, without replay", "session", name, "err", err)
		}
		if err != nil {
			h.listening.drop(key, me)
			tag = newStreamTag()
			key = name + "\x00" + tag
			h.listening.take(key, me)
		} else if n > 0 {
			if ev.Flush() != nil {
				return
			}
		}
	}
	var warned bool
	id := func(data []byte) string {
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
		defer acancel()
		c, err := log.Append(actx, name, tag, data)
		if err != nil {
			if !warned {
				warned = true
				h.log.Warn("listen stream: the event log failed; events go out without ids (not resumable)", "session", name, "err", err)
			}
			return ""
		}
		return tag + "_" + c
	}
	if m := ev.Messages(ctx, s.Listen(), h.opts.KeepAlive, s.Ended(), h.opts.Done, id); m != nil {
		s.Deliver(m) // the stream broke: keep the message for another
	}
}
