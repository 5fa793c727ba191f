package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// fakeBackend counts Leave calls.
type fakeBackend struct {
	mu     sync.Mutex
	leaves int
}

func (b *fakeBackend) Call(context.Context, *jsonrpc.Message) (Call, error) { return nil, nil }
func (b *fakeBackend) Notify(context.Context, *jsonrpc.Message) error       { return nil }
func (b *fakeBackend) Respond(context.Context, *jsonrpc.Message) error      { return nil }
func (b *fakeBackend) Leave() {
	b.mu.Lock()
	b.leaves++
	b.mu.Unlock()
}

func (b *fakeBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leaves
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"7C9E6679-7425-40DE-944B-E07FC1F90AE7", true},  // upper case
		{"7c9e6679-7425-40de-844b-e07fc1f90ae7", true},  // variant 8
		{"7c9e6679-7425-40de-944b-e07fc1f90ae7", true},  // variant 9
		{"7c9e6679-7425-40de-b44b-e07fc1f90ae7", true},  // variant b
		{"7c9e6679-7425-40de-c44b-e07fc1f90ae7", false}, // variant c
		{"7c9e6679-7425-40de-744b-e07fc1f90ae7", false}, // variant 7
		{"7c9e6679-7425-10de-944b-e07fc1f90ae7", false}, // version 1
		{"7c9e6679-7425-50de-944b-e07fc1f90ae7", false}, // version 5
		{"7c9e6679-7425-40de-944b-e07fc1f90ae", false},  // short
		{"7c9e6679-7425-40de-944b-e07fc1f90ae77", false},
		{"7c9e667907425-40de-944b-e07fc1f90ae7", false}, // hyphen missing
		{"7c9e6679-742540de--944b-e07fc1f90ae7", false}, // hyphen moved
		{"7c9e6679-7425-40de-944b-e07fc1f90aeg", false}, // not hex
		{"7c9e6679-7425-40de-944b-e07fc1f90a-7", false}, // hyphen in a group
		{"{c9e6679-7425-40de-944b-e07fc1f90ae7", false},
		{"7c9e6679742540de944be07fc1f90ae7", false}, // no hyphens
		{"", false},
		{"not-a-uuid", false},
		{strings.Repeat("-", 36), false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if got := ValidID(tt.id); got != tt.want {
				t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newUUID()
		if !ValidID(id) {
			t.Fatalf("newUUID() = %q is not a valid UUIDv4", id)
		}
		if strings.ToLower(id) != id {
			t.Fatalf("newUUID() = %q is not lower case", id)
		}
		if seen[id] {
			t.Fatalf("newUUID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestNewGetCountCap(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		make  int // sessions made for "a"
		wantA int // sessions of "a" that succeed
	}{
		{"no cap", 0, 5, 5},
		{"under the cap", 3, 2, 2},
		{"at the cap", 3, 3, 3},
		{"over the cap", 2, 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := &Table{Max: tt.max}
			var live []*Session
			for i := range tt.make {
				s, err := tbl.New("a")
				if i < tt.wantA {
					if err != nil {
						t.Fatalf("New %d: %v", i, err)
					}
					live = append(live, s)
					continue
				}
				if !errors.Is(err, ErrTooMany) || s != nil {
					t.Fatalf("New %d over the cap: %v, %v; want ErrTooMany", i, s, err)
				}
			}
			if got := tbl.Count("a"); got != tt.wantA {
				t.Fatalf("Count(a) = %d, want %d", got, tt.wantA)
			}
			// The cap is per destination.
			b, err := tbl.New("b")
			if err != nil {
				t.Fatalf("New(b): %v", err)
			}
			if tbl.Count("b") != 1 || tbl.Count("c") != 0 {
				t.Fatalf("Count(b) = %d, Count(c) = %d", tbl.Count("b"), tbl.Count("c"))
			}
			ids := map[string]bool{}
			for _, s := range append(live, b) {
				if !ValidID(s.ID) {
					t.Errorf("id %q is not a UUIDv4", s.ID)
				}
				if ids[s.ID] {
					t.Errorf("id %q repeated", s.ID)
				}
				ids[s.ID] = true
				if tbl.Get(s.ID) != s {
					t.Errorf("Get(%q) did not return the session", s.ID)
				}
			}
			if s := live[0]; s.Dest != "a" || b.Dest != "b" {
				t.Errorf("Dest = %q, %q", s.Dest, b.Dest)
			}
			if tbl.Get(newUUID()) != nil || tbl.Get("") != nil {
				t.Error("Get of an unknown id returned a session")
			}
			if n := len(tbl.All()); n != tt.wantA+1 {
				t.Errorf("All() has %d sessions, want %d", n, tt.wantA+1)
			}
			// Ending one makes room under the cap.
			live[0].End(nil)
			if _, err := tbl.New("a"); err != nil {
				t.Fatalf("New after End: %v", err)
			}
		})
	}
}

func TestSetLimits(t *testing.T) {
	tbl := &Table{Max: 3}
	for range 3 {
		if _, err := tbl.New("a"); err != nil {
			t.Fatal(err)
		}
	}
	tbl.SetLimits(1, time.Minute)
	if tbl.Count("a") != 3 {
		t.Fatal("live sessions were dropped by SetLimits")
	}
	if _, err := tbl.New("a"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("New over the lowered cap: %v", err)
	}
	if tbl.Idle != time.Minute {
		t.Fatalf("Idle = %v", tbl.Idle)
	}
	tbl.SetLimits(0, 0)
	if _, err := tbl.New("a"); err != nil {
		t.Fatalf("New without a cap: %v", err)
	}
}

func TestEnd(t *testing.T) {
	tests := []struct {
		name    string
		backend bool
		ends    int
	}{
		{"once with a backend", true, 1},
		{"twice with a backend", true, 2},
		{"three times, concurrently", true, 3},
		{"without a backend", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tbl := &Table{}
				s, _ := tbl.New("d")
				other, _ := tbl.New("d")
				b := &fakeBackend{}
				if tt.backend {
					s.SetBackend(b)
					if s.Backend() != b {
						t.Fatal("Backend() did not return the backend")
					}
				} else if s.Backend() != nil {
					t.Fatal("Backend() before SetBackend is not nil")
				}
				s.Deliver(jsonrpc.NewNotification("n/1", nil))
				first := errors.New("first")
				var wg sync.WaitGroup
				for i := range tt.ends {
					err := first
					if i > 0 {
						err = errors.New("later")
					}
					if i == 0 {
						s.End(err) // the first one wins
						continue
					}
					wg.Go(func() { s.End(err) })
				}
				wg.Wait()
				synctest.Wait() // Leave runs on its own goroutine
				select {
				case <-s.Ended():
				default:
					t.Fatal("Ended() not closed")
				}
				s.mu.Lock()
				endErr := s.endErr
				s.mu.Unlock()
				if endErr != first {
					t.Errorf("endErr = %v, want the first End's", endErr)
				}
				if tt.backend && b.count() != 1 {
					t.Errorf("Leave called %d times, want once", b.count())
				}
				if tbl.Get(s.ID) != nil {
					t.Error("an ended session is still found")
				}
				if tbl.Count("d") != 1 || tbl.Get(other.ID) != other {
					t.Errorf("Count = %d; the other session must stay", tbl.Count("d"))
				}
				// The listen queue drains, then reports the end.
				if m, err := s.Listen().Pop(t.Context()); err != nil || m.Method != "n/1" {
					t.Fatalf("Pop = %v, %v; want the queued message", m, err)
				}
				if _, err := s.Listen().Pop(t.Context()); err != io.EOF {
					t.Fatalf("Pop after the end = %v, want io.EOF", err)
				}
			})
		})
	}
}

func TestEndAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl := &Table{}
		var bs []*fakeBackend
		for _, d := range []string{"a", "a", "b"} {
			s, _ := tbl.New(d)
			b := &fakeBackend{}
			s.SetBackend(b)
			bs = append(bs, b)
		}
		tbl.EndAll(errors.New("shutdown"))
		synctest.Wait()
		if len(tbl.All()) != 0 || tbl.Count("a") != 0 || tbl.Count("b") != 0 {
			t.Fatal("sessions left after EndAll")
		}
		for i, b := range bs {
			if b.count() != 1 {
				t.Errorf("backend %d left %d times", i, b.count())
			}
		}
	})
}

func TestExpire(t *testing.T) {
	const idle = 10 * time.Minute
	tests := []struct {
		name     string
		idle     time.Duration // Table.Idle
		age      time.Duration // since the session was last seen
		busy     bool          // a request or stream is open
		released bool          // it was busy and released age ago
		want     bool          // expired
	}{
		{"fresh", idle, time.Minute, false, false, false},
		{"exactly the idle time", idle, idle, false, false, false},
		{"just past the idle time", idle, idle + time.Nanosecond, false, false, true},
		{"long idle", idle, 10 * idle, false, false, true},
		{"busy for long", idle, 10 * idle, true, false, false},
		{"released recently", idle, time.Minute, false, true, false},
		{"released long ago", idle, idle + time.Second, false, true, true},
		{"no idle limit", 0, 1000 * time.Hour, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tbl := &Table{Idle: tt.idle}
				s, _ := tbl.New("d")
				keep, _ := tbl.New("d") // always fresh
				b := &fakeBackend{}
				s.SetBackend(b)
				if tt.busy || tt.released {
					release := s.Acquire()
					time.Sleep(3 * idle) // busy for a long time
					if tt.released {
						release()
						release() // releasing twice counts once
					}
				}
				time.Sleep(tt.age)
				keep.Acquire()()
				n := tbl.Expire(time.Now())
				synctest.Wait()
				if got := n == 1; got != tt.want {
					t.Fatalf("Expire ended %d sessions, want expired=%v", n, tt.want)
				}
				if tbl.Get(keep.ID) != keep {
					t.Fatal("the fresh session expired")
				}
				if got := tbl.Get(s.ID) == nil; got != tt.want {
					t.Fatalf("session gone = %v, want %v", got, tt.want)
				}
				if tt.want && b.count() != 1 {
					t.Fatalf("expired session's backend left %d times", b.count())
				}
			})
		})
	}
}

func TestExpireExplicitNow(t *testing.T) {
	tbl := &Table{Idle: time.Minute}
	s, _ := tbl.New("d")
	s.SetBackend(&fakeBackend{})
	if n := tbl.Expire(time.Now()); n != 0 {
		t.Fatalf("expired a fresh session")
	}
	if n := tbl.Expire(time.Now().Add(2 * time.Minute)); n != 1 || tbl.Get(s.ID) != nil {
		t.Fatalf("Expire in two minutes ended %d", n)
	}
	if n := tbl.Expire(time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("an ended session expired again")
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		idle    time.Duration
		endedBy time.Duration // when the idle session ends; 0 never
	}{
		// Run wakes just past the deadline: the session ends then, not
		// up to a check interval later.
		{"short idle", 10 * time.Second, 10*time.Second + time.Nanosecond},
		{"long idle", 5 * time.Minute, 5*time.Minute + time.Nanosecond},
		{"no expiry", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tbl := &Table{Idle: tt.idle}
				s, _ := tbl.New("d")
				s.SetBackend(&fakeBackend{})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { tbl.Run(ctx); close(done) }()
				start := time.Now()
				select {
				case <-s.Ended():
					if tt.endedBy == 0 {
						t.Fatal("session expired with no idle limit")
					}
					if got := time.Since(start); got != tt.endedBy {
						t.Fatalf("expired after %v, want %v", got, tt.endedBy)
					}
				case <-time.After(24 * time.Hour):
					if tt.endedBy != 0 {
						t.Fatal("session never expired")
					}
				}
				cancel()
				<-done
			})
		})
	}
}

func TestDeliverQueueLimit(t *testing.T) {
	tests := []struct {
		name      string
		limit     int // Table.QueueLimit
		deliver   int
		wantDrops int
	}{
		{"under the limit", 3, 2, 0},
		{"at the limit", 3, 3, 0},
		{"beyond the limit", 3, 5, 2},
		{"default limit", 0, 1025, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var drops []*Session
			tbl := &Table{QueueLimit: tt.limit, OnDrop: func(s *Session) {
				mu.Lock()
				drops = append(drops, s)
				mu.Unlock()
			}}
			s, _ := tbl.New("d")
			for i := range tt.deliver {
				s.Deliver(jsonrpc.NewNotification("n", jsonrpc.Marshal(map[string]int{"i": i})))
			}
			if len(drops) != tt.wantDrops {
				t.Fatalf("OnDrop called %d times, want %d", len(drops), tt.wantDrops)
			}
			for _, d := range drops {
				if d != s {
					t.Fatal("OnDrop got another session")
				}
			}
			if got, want := s.Listen().Len(), tt.deliver-tt.wantDrops; got != want {
				t.Fatalf("%d queued, want %d", got, want)
			}
			// The oldest are kept, in order.
			if m := s.Listen().TryPop(); string(jsonrpc.Member(m.Params, "i")) != "0" {
				t.Fatalf("first queued %s", m)
			}
		})
	}
}

// TestDeliverAfterEnd: a message for a session that has ended is not a
// queue overflow.
func TestDeliverAfterEnd(t *testing.T) {
	drops := 0
	tbl := &Table{QueueLimit: 1, OnDrop: func(*Session) { drops++ }}
	s, _ := tbl.New("d")
	s.End(nil)
	s.Deliver(jsonrpc.NewNotification("n", nil))
	if drops != 0 {
		t.Fatalf("OnDrop called %d times for an ended session", drops)
	}
	// Without OnDrop an overflow is simply dropped.
	tbl.OnDrop = nil
	s2, _ := tbl.New("d")
	s2.Deliver(jsonrpc.NewNotification("n", nil))
	s2.Deliver(jsonrpc.NewNotification("n", nil))
	if s2.Listen().Len() != 1 {
		t.Fatal("overflow queued")
	}
}

func TestAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl := &Table{Idle: time.Minute}
		s, _ := tbl.New("d")
		s.SetBackend(&fakeBackend{})
		r1 := s.Acquire()
		r2 := s.Acquire()
		time.Sleep(time.Hour)
		r1()
		r1()
		if n := tbl.Expire(time.Now().Add(time.Hour)); n != 0 {
			t.Fatal("expired while a second acquisition is open")
		}
		r2()
		s.mu.Lock()
		busy := s.busy
		s.mu.Unlock()
		if busy != 0 {
			t.Fatalf("busy = %d after releasing both", busy)
		}
		if n := tbl.Expire(time.Now().Add(time.Hour)); n != 1 {
			t.Fatal("did not expire once released and idle")
		}
	})
}

// TestHold: Hold and Release count like Acquire and its release, and do
// not allocate (they are on every request's path).
func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl := &Table{Idle: time.Minute}
		s, _ := tbl.New("d")
		s.SetBackend(&fakeBackend{})
		s.Hold()
		release := s.Acquire()
		time.Sleep(time.Hour)
		release()
		if n := tbl.Expire(time.Now().Add(time.Hour)); n != 0 {
			t.Fatal("expired while held")
		}
		s.Release()
		if n := tbl.Expire(time.Now().Add(time.Hour)); n != 1 {
			t.Fatal("did not expire once released and idle")
		}
	})
	s := &Session{}
	if n := testing.AllocsPerRun(100, func() { s.Hold(); s.Release() }); n != 0 {
		t.Errorf("Hold and Release: %v allocations", n)
	}
}

// TestEvictAtCap: at the cap New ends the least recently used idle session
// (and reports it), never a busy or not yet set up one; ErrTooMany only when
// none is evictable.
func TestEvictAtCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type evicted struct {
			s         *Session
			age, idle time.Duration
		}
		var got []evicted
		tbl := &Table{Max: 3, OnEvict: func(s *Session, age, idle time.Duration) {
			got = append(got, evicted{s, age, idle})
		}}
		var ss []*Session
		var backends []*fakeBackend
		for range 3 {
			s, err := tbl.New("a")
			if err != nil {
				t.Fatal(err)
			}
			b := &fakeBackend{}
			s.SetBackend(b)
			ss = append(ss, s)
			backends = append(backends, b)
			time.Sleep(time.Second) // fake clock: distinct last-use times
		}
		// ss[0] is the oldest but busy (a stream open); ss[1] was used
		// last of all; so ss[2] is the least recently used idle one.
		release0 := ss[0].Acquire()
		ss[1].Acquire()()
		time.Sleep(time.Second)
		other, err := tbl.New("b") // another destination does not count
		if err != nil {
			t.Fatal(err)
		}
		other.SetBackend(&fakeBackend{})
		n, err := tbl.New("a")
		if err != nil {
			t.Fatalf("New at the cap with idle sessions: %v", err)
		}
		if len(got) != 1 || got[0].s != ss[2] {
			t.Fatalf("evicted %v, want the least recently used idle session", got)
		}
		if got[0].age != 2*time.Second || got[0].idle != 2*time.Second {
			t.Errorf("evicted age %v idle %v, want 2s and 2s", got[0].age, got[0].idle)
		}
		select {
		case <-ss[2].Ended():
		default:
			t.Fatal("evicted session not ended")
		}
		if tbl.Get(ss[2].ID) != nil || tbl.Count("a") != 3 || tbl.Get(other.ID) != other {
			t.Fatalf("after eviction: Get=%v Count=%d", tbl.Get(ss[2].ID), tbl.Count("a"))
		}
		synctest.Wait()
		if backends[2].count() != 1 {
			t.Errorf("evicted session's backend left %d times, want 1", backends[2].count())
		}
		// n is not set up yet: not evictable. ss[1] is idle: evicted next.
		if _, err := tbl.New("a"); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].s != ss[1] {
			t.Fatalf("second eviction took %v, want ss[1]", got[len(got)-1].s)
		}
		// Now: ss[0] busy, n and the last one not set up: 503.
		if _, err := tbl.New("a"); !errors.Is(err, ErrTooMany) {
			t.Fatalf("New with every session busy: %v, want ErrTooMany", err)
		}
		n.SetBackend(&fakeBackend{})
		release := n.Acquire() // busy: a call in flight
		if _, err := tbl.New("a"); !errors.Is(err, ErrTooMany) {
			t.Fatalf("New with every session busy: %v, want ErrTooMany", err)
		}
		release0()
		time.Sleep(time.Second)
		release()
		if _, err := tbl.New("a"); err != nil {
			t.Fatalf("New after the calls ended: %v", err)
		}
		if len(got) != 3 || got[2].s != ss[0] {
			t.Fatalf("third eviction took %v, want ss[0], released before n", got[2].s.ID)
		}
	})
}

// TestEvictConcurrent: concurrent New calls at the cap never overshoot it.
func TestEvictConcurrent(t *testing.T) {
	tbl := &Table{Max: 5}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := tbl.New("a")
			if err == nil {
				s.SetBackend(&fakeBackend{})
			}
		}()
	}
	wg.Wait()
	if n := tbl.Count("a"); n != 5 || len(tbl.All()) != 5 {
		t.Fatalf("Count = %d, All = %d; want 5", n, len(tbl.All()))
	}
}

// TestSessionIdle: a session's own shorter idle timeout ends it sooner, and
// Run checks often enough for it; a session being set up (no backend yet)
// never expires, and its idle time counts from SetBackend.
func TestSessionIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl := &Table{Idle: time.Hour}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go tbl.Run(ctx) // waits a minute for now
		synctest.Wait()
		short, _ := tbl.New("a")
		short.OwnChild(10*time.Second, 0) // Run now wakes at its deadline
		short.SetBackend(&fakeBackend{})
		long, _ := tbl.New("a")
		long.SetBackend(&fakeBackend{})
		time.Sleep(16 * time.Second)
		synctest.Wait()
		select {
		case <-short.Ended():
		default:
			t.Fatal("session with a 10s idle timeout alive after 16s")
		}
		select {
		case <-long.Ended():
			t.Fatal("session with the table's 1h idle timeout ended after 2m")
		default:
		}
	})
}

// TestOrphanedChildren is issue 21's case: 30 clients of a destination
// with isolation: session open a session and its GET stream, make a call,
// then leave without DELETE. Every session (its backend: the child
// process) ends exactly session_orphan_timeout after its stream closed, not
// at the 5 min idle timeout; a client still streaming, one that never
// opened a stream, and one active again in time are kept.
func TestOrphanedChildren(t *testing.T) {
	const orphan = 30 * time.Second
	synctest.Test(t, func(t *testing.T) {
		tbl := &Table{Idle: 30 * time.Minute}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go tbl.Run(ctx)
		newChild := func() (*Session, *fakeBackend) {
			s, err := tbl.New("d")
			if err != nil {
				t.Fatal(err)
			}
			b := &fakeBackend{}
			s.SetBackend(b)
			s.OwnChild(5*time.Minute, orphan)
			return s, b
		}
		var gone []*fakeBackend
		for range 30 {
			s, b := newChild()
			gone = append(gone, b)
			closeStream := s.Stream()
			s.Hold() // a tools/call
			s.Release()
			closeStream() // the client left: no DELETE
		}
		streaming, _ := newChild()
		defer streaming.Stream()()
		silent, _ := newChild() // never opened a stream: the idle timeout only
		back, _ := newChild()
		back.Stream()()

		time.Sleep(orphan - time.Second)
		back.Hold() // active again before its deadline
		back.Release()
		synctest.Wait()
		for i, b := range gone {
			if b.count() != 0 {
				t.Fatalf("client %d's child left %s before session_orphan_timeout", i, orphan-time.Second)
			}
		}
		time.Sleep(time.Second + time.Nanosecond) // just past the deadline
		synctest.Wait()
		for i, b := range gone {
			if b.count() != 1 {
				t.Fatalf("client %d's child: left %d times at session_orphan_timeout, want 1", i, b.count())
			}
		}
		if n := tbl.Count("d"); n != 3 {
			t.Fatalf("%d sessions left, want 3 (streaming, silent, back)", n)
		}
		for _, s := range []*Session{streaming, silent, back} {
			select {
			case <-s.Ended():
				t.Fatalf("session ended at session_orphan_timeout: %v", s.endErr)
			default:
			}
		}
		time.Sleep(orphan - time.Second) // back's own deadline
		synctest.Wait()
		select {
		case <-back.Ended():
			if !errors.Is(back.endErr, ErrOrphaned) {
				t.Errorf("end error %v, want ErrOrphaned", back.endErr)
			}
		default:
			t.Fatal("session active again, then gone: alive session_orphan_timeout after its last request")
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		select {
		case <-silent.Ended():
		default:
			t.Fatal("session without a stream alive after its idle timeout")
		}
		select {
		case <-streaming.Ended():
			t.Fatal("session with its stream open ended")
		default:
		}
	})
}

// An Answer hands out its messages in order, then ends; one of none has
// ended already.
func TestAnswer(t *testing.T) {
	a, b := jsonrpc.NewNotification("notifications/progress", nil), jsonrpc.NewResult(json.RawMessage("1"), nil)
	c := NewAnswer(a, b)
	for _, want := range []*jsonrpc.Message{a, b} {
		if m, ended := c.Poll(); m != want || ended {
			t.Fatalf("Poll = %v, %v; want %v", m, ended, want)
		}
	}
	if m, ended := c.Poll(); m != nil || !ended {
		t.Fatalf("after the response: %v, %v", m, ended)
	}
	if m, ended := NewAnswer().Poll(); m != nil || !ended {
		t.Fatalf("an empty answer: %v, %v", m, ended)
	}
}

// TestSetUpNeverExpires: a session whose initialize is still in flight (no
// backend: a process starting on a loaded machine) does not expire, and
// its idle time counts from SetBackend.
func TestSetUpNeverExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl := &Table{Idle: time.Hour}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go tbl.Run(ctx)
		s, _ := tbl.New("a")
		s.OwnChild(time.Second, time.Second)
		time.Sleep(time.Minute) // a slow start
		synctest.Wait()
		if tbl.Get(s.ID) == nil {
			t.Fatal("a session being set up expired")
		}
		s.SetBackend(&fakeBackend{})
		time.Sleep(time.Second)
		synctest.Wait()
		if tbl.Get(s.ID) == nil {
			t.Fatal("expired at its idle timeout, not just past it")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if tbl.Get(s.ID) != nil {
			t.Fatal("alive past its idle timeout counted from SetBackend")
		}
	})
}
