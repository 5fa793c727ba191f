//go:build unix

package stdio

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestUnreadShowsAReaderStandingStill: while the reader is held (here in
// onLine), the bytes the child wrote after the held line wait in the pipe
// and Unread says so (on Linux, where FIONREAD tells), with the bytes read
// standing still; once the reader goes on, nothing waits and read grew.
// This is what upstream's watchdog reads for its stage "read".
func TestUnreadShowsAReaderStandingStill(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	lines := make(chan string, 8)
	first := true
	p, err := Start(spec(t, "echo"), func(b []byte) {
		if first {
			first = false
			close(entered)
			<-release
		}
		lines <- string(b)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.Write([]byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	_, read := p.Unread()
	for i := 2; i <= 4; i++ {
		if err := p.Write([]byte(`{"n":` + strconv.Itoa(i) + `}`)); err != nil {
			t.Fatal(err)
		}
	}
	if runtime.GOOS == "linux" {
		deadline := time.Now().Add(10 * time.Second)
		for {
			waiting, r := p.Unread()
			if r != read {
				t.Fatalf("read moved from %d to %d while the reader was held", read, r)
			}
			if waiting == 3*len(`{"n":1}`+"\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Unread: %d bytes waiting, want 24 (the three lines the child echoed)", waiting)
			}
			time.Sleep(time.Millisecond) // polling the kernel's count, with a deadline
		}
	}
	close(release)
	for range 4 {
		<-lines
	}
	if waiting, r := p.Unread(); (runtime.GOOS == "linux" && waiting != 0) || r != 4*8 {
		t.Fatalf("Unread after the reader went on: waiting %d, read %d; want 0 and 32", waiting, r)
	}
}

// TestRoundTripsUnderStress drives a real child through the writer and the
// reader, one message in flight and sixteen, with GOMAXPROCS 1 and 2 (the
// gateway runs with half the CPUs): every round trip must come back, and
// none may wait for a later message to push it out (the symptom of a lost
// wake-up in either direction: issue 27). A stall fails the test after a
// generous bound; the slowest round trip is logged.
func TestRoundTripsUnderStress(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, conc := range []int{1, 16} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/c%d", procs, conc), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				perWorker := 2000 / conc * 4 // 2000 round trips at c1, 8000 at c16
				if conc == 1 {
					perWorker = 2000
				}
				waiters := make([]chan struct{}, conc)
				for i := range waiters {
					waiters[i] = make(chan struct{}, 1)
				}
				p, err := Start(spec(t, "echo"), func(b []byte) {
					// {"w":N,...}: wake worker N.
					w, _ := strconv.Atoi(string(b[5 : 5+indexByte(b[5:], ',')]))
					waiters[w] <- struct{}{}
				}, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Kill)
				slowest := make(chan time.Duration, conc)
				for w := range conc {
					go func() {
						var worst time.Duration
						defer func() { slowest <- worst }()
						for i := range perWorker {
							t0 := time.Now()
							if err := p.Write(fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)); err != nil {
								t.Error(err)
								return
							}
							select {
							case <-waiters[w]:
							case <-time.After(20 * time.Second):
								t.Errorf("worker %d: round trip %d stalled", w, i)
								return
							}
							worst = max(worst, time.Since(t0))
						}
					}()
				}
				var worst time.Duration
				for range conc {
					worst = max(worst, <-slowest)
				}
				t.Logf("%d round trips, slowest %v", conc*perWorker, worst)
			})
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return len(b)
}
