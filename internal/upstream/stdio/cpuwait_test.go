package stdio

import (
	"runtime"
	"testing"
	"time"
)

// TestCPUWaitCountsRunQueueWait: a child keeping four times as many
// threads busy as there are CPUs has threads waiting for a CPU all the
// time, and CPUWait (on Linux) sees that wait grow and threads runnable;
// once the child has exited it cannot tell. Upstream's watchdog reads this to tell an
// overloaded machine from a server that sat on its answer.
func TestCPUWaitCountsRunQueueWait(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("run-queue wait is read from /proc (Linux)")
	}
	lines := make(chan string, 1)
	p, err := Start(spec(t, "spin"), func(b []byte) { lines <- string(b) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	select {
	case <-lines:
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not start spinning")
	}
	w0, _, ok := p.CPUWait()
	if !ok {
		t.Fatal("CPUWait cannot tell on Linux")
	}
	// Bounded by the event (the wait grew), 20 s only as the failure bound.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		w, runnable, ok := p.CPUWait()
		if !ok {
			t.Fatal("CPUWait stopped telling while the child runs")
		}
		if w-w0 >= 50*time.Millisecond && runnable > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run-queue wait grew by %v in 20 s, %d threads runnable, with %d threads spinning on %d CPUs", w-w0, runnable, 4*runtime.NumCPU(), runtime.NumCPU())
		}
		<-tick.C
	}
	p.Kill()
	if _, _, ok := p.CPUWait(); ok {
		t.Fatal("CPUWait tells after the child exited")
	}
}
