package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// memCollect reads Memory.After's events and cursors, or its error.
func memCollect(m *Memory, session, stream, cursor string) (data, cursors []string, err error) {
	for ev, err := range m.After(context.Background(), session, stream, cursor) {
		if err != nil {
			return data, cursors, err
		}
		data = append(data, string(ev.Data))
		cursors = append(cursors, ev.Cursor)
	}
	return data, cursors, nil
}

// TestMemoryReplay: the in-memory log replays every event after a cursor,
// in order, once, with the cursors Append gave; streams and sessions do
// not mix; trimmed events, foreign or malformed cursors and a stream
// created again give ErrEventsPurged, never a partial replay.
func TestMemoryReplay(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(Options{MaxLen: 4})
	var cursors []string
	for i := range 6 {
		c, err := m.Append(ctx, "s1", "get", []byte(fmt.Sprintf("event %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
	}
	other, _ := m.Append(ctx, "s1", "other", []byte("x"))
	m.Append(ctx, "s2", "get", []byte("y"))

	// Events 2..5 are kept: any cursor from event 1 on replays what follows.
	data, got, err := memCollect(m, "s1", "get", cursors[1])
	if err != nil || strings.Join(data, ",") != "event 2,event 3,event 4,event 5" {
		t.Fatalf("after event 1: %q, %v", data, err)
	}
	if strings.Join(got, " ") != strings.Join(cursors[2:], " ") {
		t.Errorf("cursors %q; Append gave %q", got, cursors[2:])
	}
	if data, _, err := memCollect(m, "s1", "get", cursors[5]); err != nil || len(data) != 0 {
		t.Errorf("after the last event: %q, %v", data, err)
	}
	// Event 1 is trimmed: a replay after event 0 would miss it.
	for _, bad := range []string{cursors[0], other, "", "x", "1.x", "9.1", "1.99", "-1.1"} {
		if _, _, err := memCollect(m, "s1", "get", bad); !errors.Is(err, ErrEventsPurged) {
			t.Errorf("cursor %q: %v, want ErrEventsPurged", bad, err)
		}
	}
	if _, err := m.Append(ctx, "a{b", "get", nil); err == nil {
		t.Error("a session id with a brace was accepted")
	}
	// Closed, then created again: the old cursors are foreign.
	m.SessionClosed(ctx, "s1")
	m.Append(ctx, "s1", "get", []byte("reborn"))
	if _, _, err := memCollect(m, "s1", "get", cursors[4]); !errors.Is(err, ErrEventsPurged) {
		t.Errorf("after SessionClosed: %v, want ErrEventsPurged", err)
	}
	if data, _, err := memCollect(m, "s2", "get", "3.0"); err != nil || strings.Join(data, ",") != "y" {
		t.Errorf("s2 from its start: %q, %v", data, err)
	}
}

// TestMemoryExpires: a stream with no event for MaxAge is dropped by a
// later Append's sweep.
func TestMemoryExpires(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(Options{MaxAge: time.Minute})
	c, _ := m.Append(ctx, "old", "get", []byte("a"))
	m.mu.Lock()
	m.streams["old"]["get"].at = time.Now().Add(-2 * time.Minute) // as if a while ago
	m.swept = time.Time{}
	m.mu.Unlock()
	m.Append(ctx, "new", "get", []byte("b"))
	m.mu.Lock()
	_, kept := m.streams["old"]
	m.mu.Unlock()
	if kept {
		t.Error("a stream idle past MaxAge was kept")
	}
	if _, _, err := memCollect(m, "old", "get", c); !errors.Is(err, ErrEventsPurged) {
		t.Errorf("expired stream: %v, want ErrEventsPurged", err)
	}
}
