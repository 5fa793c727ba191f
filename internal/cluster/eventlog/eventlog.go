// Package eventlog keeps the SSE events of Streamable HTTP sessions' listen
// streams: Log in Redis, so that a client reconnecting its stream with
// Last-Event-ID to any replica gets every event it missed, in order, once,
// or a clear ErrEventsPurged when some are gone — never a partial replay;
// Memory, the same contract in one process. It follows the go-sdk's
// EventStore contract (Append, After, SessionClosed) with one change:
// positions are opaque cursors, not integers (After yields each event
// with its own), so that a stream recreated after expiry can never be
// mistaken for the old one.
//
// Layout: one Redis Stream per (session, stream) at
// <prefix>{<session>}:ev:<stream>, and a hash <prefix>{<session>}:ev
// holding each stream's birth (its creation time); the {session} hash tag
// keeps a session's keys in one Redis Cluster slot. Entry ids are
// <ms>-<n>: the Redis time of the append (never decreasing) and the
// event's ordinal in its stream (1, 2, …), so XTRIM MINID trims by age
// and a gap in the ordinals shows that events were trimmed. Each append
// is one script: XADD … MAXLEN ~ (count), XTRIM MINID ~ (age) and PEXPIRE
// (idle streams vanish after MaxAge). A cursor is <birth>:<ms>-<n>.
package eventlog

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrEventsPurged is After's error when events after the cursor are no
// longer all kept (trimmed by count or age, or the stream expired or was
// closed), or the cursor is not one of the stream's. Its text is the
// go-sdk's ErrEventsPurged's; the package does not import the go-sdk,
// which would link the whole SDK into the gateway's binary.
var ErrEventsPurged = errors.New("data purged")

// Options bound what the log keeps. The zero Options are usable.
type Options struct {
	// Prefix starts every key ("switchboard:"); "" means no prefix.
	Prefix string
	// MaxLen is how many events a stream keeps, about (Redis trims whole
	// nodes of up to 100 entries); 0 means 1000.
	MaxLen int
	// MaxAge is how long an event is kept, and how long a stream with no
	// new event lives; 0 means one hour. At least a second.
	MaxAge time.Duration
}

// Redis is what the log needs of a Redis client: *redis.Client,
// *redis.ClusterClient and every redis.UniversalClient have it.
type Redis interface {
	redis.Scripter
	HKeys(ctx context.Context, key string) *redis.StringSliceCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Log is an event log in Redis; safe for concurrent use by any number of
// replicas sharing the Redis.
type Log struct {
	rdb    Redis
	prefix string
	maxLen int
	maxAge time.Duration
}

// New returns a log in rdb (a *redis.Client, *redis.ClusterClient or any
// redis.UniversalClient).
func New(rdb Redis, opts Options) *Log {
	l := &Log{rdb: rdb, prefix: opts.Prefix, maxLen: opts.MaxLen, maxAge: opts.MaxAge}
	if l.maxLen <= 0 {
		l.maxLen = 1000
	}
	if l.maxAge <= 0 {
		l.maxAge = time.Hour
	}
	l.maxAge = max(l.maxAge, time.Second)
	return l
}

// keys returns the stream's key and the session's hash key.
func (l *Log) keys(session, stream string) []string {
	base := l.prefix + "{" + session + "}:ev"
	return []string{base + ":" + stream, base}
}

//go:embed open.lua
var openLua string

//go:embed append.lua
var appendLua string

//go:embed after.lua
var afterLua string

var (
	openScript   = redis.NewScript(openLua)
	appendScript = redis.NewScript(appendLua)
	afterScript  = redis.NewScript(afterLua)
)

// Open makes sure the stream exists and returns the cursor of its end:
// After(that cursor) yields the events appended from now on. Opening an
// existing stream changes nothing.
func (l *Log) Open(ctx context.Context, session, stream string) (string, error) {
	if err := checkNames(session, stream); err != nil {
		return "", err
	}
	res, err := openScript.Run(ctx, l.rdb, l.keys(session, stream), stream, l.maxAge.Milliseconds()).Text()
	if err != nil {
		return "", fmt.Errorf("eventlog: open: %w", err)
	}
	return res, nil
}

// Append adds data as the stream's next event and returns its cursor
// (what the client sends back as Last-Event-ID, after the front's stream
// tag). A stream that expired or was never opened is created anew: older
// cursors of it then get ErrEventsPurged.
func (l *Log) Append(ctx context.Context, session, stream string, data []byte) (string, error) {
	if err := checkNames(session, stream); err != nil {
		return "", err
	}
	res, err := appendScript.Run(ctx, l.rdb, l.keys(session, stream), stream, data, l.maxLen, l.maxAge.Milliseconds()).Text()
	if err != nil {
		return "", fmt.Errorf("eventlog: append: %w", err)
	}
	return res, nil
}

// Event is one event of a stream: its cursor (what Append returned for
// it) and its data.
type Event struct {
	Cursor string
	Data   []byte
}

// After yields, in order, the stream's events after cursor. If any of
// them is no longer kept, or cursor is not one of the stream's, it yields
// only ErrEventsPurged. The events are read at once, in one atomic step
// (the stream holds at most about MaxLen), so the iteration never fails
// half way.
func (l *Log) After(ctx context.Context, session, stream, cursor string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if err := checkNames(session, stream); err != nil {
			yield(Event{}, err)
			return
		}
		birth, id, ok := parseCursor(cursor)
		if !ok {
			yield(Event{}, fmt.Errorf("eventlog: cursor %.40q: %w", cursor, ErrEventsPurged))
			return
		}
		res, err := afterScript.Run(ctx, l.rdb, l.keys(session, stream), stream, birth, id).Slice()
		if err != nil {
			yield(Event{}, fmt.Errorf("eventlog: after: %w", err))
			return
		}
		if len(res) == 0 || len(res)%2 != 1 {
			yield(Event{}, ErrEventsPurged)
			return
		}
		for i := 1; i < len(res); i += 2 { // res[0] is the script's 1 for "all there"
			id, ok1 := res[i].(string)
			data, ok2 := res[i+1].(string)
			if !ok1 || !ok2 {
				yield(Event{}, fmt.Errorf("eventlog: after: unexpected reply %T, %T", res[i], res[i+1]))
				return
			}
			if !yield(Event{Cursor: birth + ":" + id, Data: []byte(data)}, nil) {
				return
			}
		}
	}
}

// SessionClosed deletes the session's streams. Streams also expire on
// their own MaxAge after their last event, so a session that never closes
// costs nothing for long.
func (l *Log) SessionClosed(ctx context.Context, session string) error {
	if err := checkNames(session, "x"); err != nil {
		return err
	}
	hash := l.keys(session, "")[1]
	streams, err := l.rdb.HKeys(ctx, hash).Result()
	if err != nil {
		return fmt.Errorf("eventlog: session closed: %w", err)
	}
	keys := []string{hash}
	for _, s := range streams {
		keys = append(keys, l.keys(session, s)[0])
	}
	if err := l.rdb.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("eventlog: session closed: %w", err)
	}
	return nil
}

// checkNames refuses names that would break the key layout: empty ones
// and ones holding braces (which would move the hash tag).
func checkNames(session, stream string) error {
	if session == "" || strings.ContainsAny(session, "{}") {
		return fmt.Errorf("eventlog: bad session id %.40q", session)
	}
	if strings.ContainsAny(stream, "{}") {
		return fmt.Errorf("eventlog: bad stream id %.40q", stream)
	}
	return nil
}

// parseCursor splits <birth>:<ms>-<n> and checks each part is a number.
func parseCursor(c string) (birth, id string, ok bool) {
	birth, id, ok = strings.Cut(c, ":")
	ms, n, ok2 := strings.Cut(id, "-")
	if !ok || !ok2 || !digits(birth) || !digits(ms) || !digits(n) {
		return "", "", false
	}
	return birth, id, true
}

// digits reports whether s is a decimal number that fits in 63 bits.
func digits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 63)
	return err == nil && s != "" && s[0] != '+'
}
