package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

// collect reads After's events, or its error.
func collect(t *testing.T, l *Log, session, stream, cursor string) ([]string, error) {
	t.Helper()
	out, _, err := collectCursors(t, l, session, stream, cursor)
	return out, err
}

// collectCursors reads After's events and their cursors, or its error.
func collectCursors(t *testing.T, l *Log, session, stream, cursor string) (data, cursors []string, err error) {
	t.Helper()
	for ev, err := range l.After(context.Background(), session, stream, cursor) {
		if err != nil {
			return data, cursors, err
		}
		data = append(data, string(ev.Data))
		cursors = append(cursors, ev.Cursor)
	}
	return data, cursors, nil
}

func appendN(t *testing.T, l *Log, session, stream string, from, n int) []string {
	t.Helper()
	var cursors []string
	for i := from; i < from+n; i++ {
		c, err := l.Append(context.Background(), session, stream, []byte(fmt.Sprintf("event %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
	}
	return cursors
}

// TestReplayAcrossReplicas: events appended through one replica's client
// are replayed, in order and once, through another's, from any cursor;
// streams of a session do not mix, nor do sessions.
func TestReplayAcrossReplicas(t *testing.T) {
	r := clustertest.StartRedis(t)
	ctx := context.Background()
	a := New(r.Client(t), Options{Prefix: "sb:"})
	b := New(r.Client(t), Options{Prefix: "sb:"})

	start, err := a.Open(ctx, "s1", "get")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.Open(ctx, "s1", "get"); err != nil || again != start {
		t.Fatalf("reopening gave %q, %v; want %q", again, err, start)
	}
	if _, err := a.Open(ctx, "s1", "post-7"); err != nil {
		t.Fatal(err)
	}
	cursors := appendN(t, a, "s1", "get", 0, 5)
	appendN(t, a, "s1", "post-7", 100, 2)
	appendN(t, a, "s2", "get", 200, 2)

	got, gotCursors, err := collectCursors(t, b, "s1", "get", start)
	if err != nil || strings.Join(got, ",") != "event 0,event 1,event 2,event 3,event 4" {
		t.Fatalf("from the start: %q, %v", got, err)
	}
	// Each replayed event comes with the cursor Append gave it, so that a
	// replay cut short resumes where it stopped.
	if strings.Join(gotCursors, " ") != strings.Join(cursors, " ") {
		t.Errorf("replayed cursors %q; Append gave %q", gotCursors, cursors)
	}
	got, err = collect(t, b, "s1", "get", cursors[2])
	if err != nil || strings.Join(got, ",") != "event 3,event 4" {
		t.Fatalf("after event 2: %q, %v", got, err)
	}
	got, err = collect(t, b, "s1", "get", cursors[4])
	if err != nil || len(got) != 0 {
		t.Fatalf("after the last event: %q, %v; want nothing", got, err)
	}
	// A cursor of another stream of the session, or of another session, is foreign.
	postCursor, _ := a.Append(ctx, "s1", "post-7", []byte("x"))
	if _, err := collect(t, b, "s1", "get", postCursor); !errors.Is(err, ErrEventsPurged) {
		t.Errorf("another stream's cursor: %v, want ErrEventsPurged", err)
	}
	if _, err := collect(t, b, "s9", "get", cursors[0]); !errors.Is(err, ErrEventsPurged) {
		t.Errorf("an unknown session: %v, want ErrEventsPurged", err)
	}
	// Cursors the log never gave, or not cursors at all.
	birth, _, _ := strings.Cut(start, ":")
	for _, bad := range []string{"", "x", "1:2", birth + ":1-99", birth + ":1-x", "-1:1-1", birth + ":99999999999999-1", "1:" + strings.Split(cursors[0], ":")[1]} {
		if _, err := collect(t, b, "s1", "get", bad); !errors.Is(err, ErrEventsPurged) {
			t.Errorf("cursor %q: %v, want ErrEventsPurged", bad, err)
		}
	}
	for _, bad := range [][2]string{{"", "get"}, {"a{b", "get"}, {"s1", "x}"}} {
		if _, err := a.Append(ctx, bad[0], bad[1], nil); err == nil {
			t.Errorf("Append(%q, %q) accepted", bad[0], bad[1])
		}
	}
	// Keys carry the {session} hash tag and the prefix.
	keys, _ := r.Client(t).Keys(ctx, "*").Result()
	for _, k := range keys {
		if !strings.HasPrefix(k, "sb:{s1}:ev") && !strings.HasPrefix(k, "sb:{s2}:ev") {
			t.Errorf("key %q lacks the prefix or the hash tag", k)
		}
	}
	// SessionClosed drops the session's streams and nothing else.
	if err := a.SessionClosed(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, b, "s1", "get", start); !errors.Is(err, ErrEventsPurged) {
		t.Errorf("after SessionClosed: %v, want ErrEventsPurged", err)
	}
	if got, err := collect(t, b, "s2", "get", ""); !errors.Is(err, ErrEventsPurged) || got != nil {
		t.Errorf("empty cursor: %q, %v", got, err)
	}
	if n, _ := r.Client(t).Exists(ctx, "sb:{s2}:ev:get").Result(); n != 1 {
		t.Error("closing s1 dropped s2's stream")
	}
}

// TestTrimmedByCountFails: once events after the cursor are trimmed, After
// fails instead of replaying what is left; cursors past the trim still
// replay fully.
func TestTrimmedByCountFails(t *testing.T) {
	r := clustertest.StartRedis(t)
	ctx := context.Background()
	l := New(r.Client(t), Options{MaxLen: 10})
	start, err := l.Open(ctx, "s", "get")
	if err != nil {
		t.Fatal(err)
	}
	cursors := appendN(t, l, "s", "get", 0, 500)
	n, _ := r.Client(t).XLen(ctx, "{s}:ev:get").Result()
	if n >= 500 || n < 10 {
		t.Fatalf("stream holds %d events after 500 appends with MaxLen 10", n)
	}
	// cursors[i] is event i's; events 500-n … 499 are kept.
	kept := len(cursors) - int(n)
	for _, c := range []string{start, cursors[0], cursors[kept-2]} {
		if got, err := collect(t, l, "s", "get", c); !errors.Is(err, ErrEventsPurged) || len(got) != 0 {
			t.Errorf("cursor %s: %d events, %v; want ErrEventsPurged and none", c, len(got), err)
		}
	}
	// The oldest cursor whose successors are all kept replays them all:
	// that of the last event trimmed.
	got, err := collect(t, l, "s", "get", cursors[kept-1])
	if err != nil || len(got) != int(n) || got[0] != fmt.Sprintf("event %d", kept) || got[len(got)-1] != "event 499" {
		t.Errorf("from the last trimmed: %d events, %v", len(got), err)
	}
}

// TestTrimmedByAgeFails: events older than MaxAge are trimmed (XTRIM
// MINID on Redis time), and the stream expires MaxAge after its last
// event; a stream recreated after expiry never matches an old cursor.
func TestTrimmedByAgeFails(t *testing.T) {
	r := clustertest.StartRedis(t)
	ctx := context.Background()
	rdb := r.Client(t)
	l := New(rdb, Options{MaxAge: time.Second})
	cur, err := l.Open(ctx, "s", "get")
	if err != nil {
		t.Fatal(err)
	}
	old := appendN(t, l, "s", "get", 0, 3)
	if ttl, _ := rdb.PTTL(ctx, "{s}:ev:get").Result(); ttl <= 0 || ttl > time.Second {
		t.Fatalf("stream TTL %v, want (0, 1s]", ttl)
	}
	// Age trimming is by entry id: entries whose ms part is older than
	// the cutoff go. Rewrite the stream as if its events were 2 s old
	// (Redis's clock is not ours to move), one per node (MINID ~ trims
	// whole nodes only), then append one more.
	if err := rdb.Del(ctx, "{s}:ev:get").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "stream-node-max-entries", "1").Err(); err != nil {
		t.Fatal(err)
	}
	now, _ := rdb.Time(ctx).Result()
	past := now.Add(-2 * time.Second).UnixMilli()
	for i := 1; i <= 3; i++ {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "{s}:ev:get", ID: fmt.Sprintf("%d-%d", past, i), Values: []string{"d", "old"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(ctx, "s", "get", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.XLen(ctx, "{s}:ev:get").Result(); n != 1 {
		t.Errorf("%d events left, want the new one only", n)
	}
	if _, err := collect(t, l, "s", "get", old[0]); !errors.Is(err, ErrEventsPurged) {
		t.Errorf("after age trimming: %v, want ErrEventsPurged", err)
	}
	// Expiry: the stream and its birth go; an append makes a new stream.
	if err := rdb.Del(ctx, "{s}:ev:get", "{s}:ev").Err(); err != nil { // as expiry does
		t.Fatal(err)
	}
	fresh, err := l.Append(ctx, "s", "get", []byte("reborn"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{cur, old[2]} {
		if _, err := collect(t, l, "s", "get", c); !errors.Is(err, ErrEventsPurged) {
			t.Errorf("an old cursor %s on the reborn stream: %v, want ErrEventsPurged", c, err)
		}
	}
	if got, err := collect(t, l, "s", "get", fresh); err != nil || len(got) != 0 {
		t.Errorf("the reborn stream's cursor: %q, %v", got, err)
	}
}

// TestConcurrentAppendsKeepOrder: appends from several clients at once get
// distinct, increasing ordinals and replay in the order Redis took them.
func TestConcurrentAppendsKeepOrder(t *testing.T) {
	r := clustertest.StartRedis(t)
	ctx := context.Background()
	start, err := New(r.Client(t), Options{}).Open(ctx, "s", "get")
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 3, 50
	done := make(chan error, writers)
	for w := range writers {
		l := New(r.Client(t), Options{})
		go func() {
			for i := range each {
				if _, err := l.Append(ctx, "s", "get", []byte(fmt.Sprintf("%d/%d", w, i))); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	got, err := collect(t, New(r.Client(t), Options{}), "s", "get", start)
	if err != nil || len(got) != writers*each {
		t.Fatalf("%d events, %v; want %d", len(got), err, writers*each)
	}
	next := make([]int, writers)
	for _, e := range got {
		var w, i int
		fmt.Sscanf(e, "%d/%d", &w, &i)
		if i != next[w] {
			t.Fatalf("writer %d's event %d came where %d was due", w, i, next[w])
		}
		next[w]++
	}
}

func BenchmarkAppend(b *testing.B) {
	r := clustertest.StartRedis(b)
	l := New(r.Client(b), Options{})
	ctx := context.Background()
	data := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":50}}`)
	for b.Loop() {
		if _, err := l.Append(ctx, "s", "get", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAfter100(b *testing.B) {
	r := clustertest.StartRedis(b)
	l := New(r.Client(b), Options{})
	ctx := context.Background()
	start, _ := l.Open(ctx, "s", "get")
	for i := 0; i < 100; i++ {
		l.Append(ctx, "s", "get", []byte(`{"jsonrpc":"2.0","method":"notifications/message"}`))
	}
	for b.Loop() {
		n := 0
		for _, err := range l.After(ctx, "s", "get", start) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 100 {
			b.Fatalf("%d events", n)
		}
	}
}
