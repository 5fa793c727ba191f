package sandbox

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bombMargin is the documented margin past a script's bound within which
// it has ended, its worker reaped, on a loaded 2-core machine: a script
// past its timeout is killed at Timeout + KillGrace; the margin covers a
// niced worker waiting for a CPU and the reaping.
const bombMargin = 3 * time.Second

// gatewayOverhead is the documented bound on what running scripts in
// workers adds to the gateway's resident memory (its high-water mark over
// its idle RSS): the frames it reads (at most maxArgs plus MaxOutput a
// script), the pipes' buffers, and the goroutines of four runs.
const gatewayOverhead = 48 << 20

// bombs are scripts that try to take a worker's memory, CPU or stack in
// one native call or a tight loop, with the limits they may end with.
var bombs = []struct {
	name, script string
	limits       []string
}{
	// (1 MB parts: repeat refuses to build more than memory/2 at once)
	{"join", `new Array(1001).join("x".repeat(1e6))`, []string{"memory"}},
	{"stringify", `const s = "x".repeat(1e6); JSON.stringify(new Array(1000).fill(s))`, []string{"memory"}},
	{"replace", `"x".repeat(1e6).replace(/x/g, "y".repeat(1000))`, []string{"memory"}},
	{"concat", `const s = "x".repeat(1e6); s.concat(...new Array(1000).fill(s))`, []string{"memory"}},
	{"+= doubling", `let s = "x"; for (;;) s += s;`, []string{"memory"}},
	{"array growth", `const a = []; for (;;) a.push({n: a.length, s: "item"})`, []string{"memory"}},
	{"typed arrays", `const k = []; for (;;) k.push(new Float64Array(1 << 22))`, []string{"memory"}},
	{"typed array at once", `new Uint8Array(2 ** 31).length`, []string{"memory"}},
	{"Array(n).fill", `Array(1e8).fill(0).length`, []string{"memory"}},
	{"ReDoS", `/^(?=a)(a+)+$/.test("a".repeat(28) + "!")`, []string{"timeout"}},
	{"deep recursion", `function f(n) { return f(n + 1) + 1 } f(0)`, []string{"stack"}},
	{"deep value", `let o = {}; for (let i = 0; i < 1e6; i++) o = {o}; JSON.stringify(o).length`, []string{"stack", "memory"}},
	{"spin", `for (;;) {}`, []string{"timeout"}},
}

// procStatus reads a field of /proc/self/status in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestBombs runs every bomb, four at once, in workers of a Runner hosted
// by this process (the gateway's side): each ends with its limit within
// its bound plus bombMargin, this process's memory high-water mark stays
// under its idle RSS plus gatewayOverhead, and a script after them runs.
func TestBombs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the workers' hard bounds are Linux's rlimits")
	}
	// A bomb whose bound is time runs with a short timeout; the others
	// with a long one, so that the bound that stops them must be theirs
	// (a worker on a loaded machine can take seconds to fill its memory).
	// Nice 1: the bound under test is each script's own, not its share of
	// a CI machine busy with other packages' tests (-race makes the bombs
	// several times slower, too); BenchmarkCallsWhileScriptsSpin in
	// internal/gateway measures what the default niceness buys.
	short := Limits{Timeout: 2 * time.Second, Memory: 16 << 20, MaxCalls: 50, MaxOutput: 64 << 10, Concurrency: 4, Warm: 2, Nice: 1}
	long := short
	long.Timeout = 90 * time.Second
	runners := map[time.Duration]*Runner{}
	for _, l := range []Limits{short, long} {
		r := NewRunner(l)
		t.Cleanup(r.Close)
		runners[l.Timeout] = r
		if res := r.Run(t.Context(), `1`, &fakeCaller{}); res.Status != StatusOK { // workers warm
			t.Fatalf("warm-up: %+v", res)
		}
	}
	timeoutOf := func(limits []string) time.Duration {
		if slices.Contains(limits, "timeout") {
			return short.Timeout
		}
		return long.Timeout
	}
	runtime.GC()
	// Reset the high-water mark to the current RSS (Linux 4.0+).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset VmHWM: %v", err)
	}
	idle := procStatus(t, "VmRSS")

	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	type outcome struct {
		res     *Result
		elapsed time.Duration
	}
	out := make([]outcome, len(bombs))
	for i, b := range bombs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start := time.Now()
			res := runners[timeoutOf(b.limits)].Run(t.Context(), b.script, &fakeCaller{})
			out[i] = outcome{res, time.Since(start)}
		})
	}
	wg.Wait()
	hwm := procStatus(t, "VmHWM")

	for i, b := range bombs {
		res, elapsed := out[i].res, out[i].elapsed
		if res.Status != StatusError || !slices.Contains(b.limits, res.Limit) || !strings.HasPrefix(res.Error, res.Limit+":") ||
			strings.Contains(res.Error, "String.prototype.repeat") { // the bomb, not its setup

			t.Errorf("%s: status %q limit %q error %q; want one of %v", b.name, res.Status, res.Limit, res.Error, b.limits)
		}
		if bound := timeoutOf(b.limits) + KillGrace + bombMargin; elapsed > bound {
			t.Errorf("%s: ended after %s, past %s", b.name, elapsed.Round(time.Millisecond), bound)
		}
		t.Logf("%-20s %-8s %6.0f ms  %s", b.name, res.Limit, res.ExecutionTimeMS, res.Error)
	}
	t.Logf("gateway: idle RSS %d MiB, high-water mark %d MiB during the bombs", idle>>20, hwm>>20)
	if hwm > idle+gatewayOverhead {
		t.Errorf("the gateway's VmHWM reached %d MiB, past its idle RSS %d MiB + %d MiB", hwm>>20, idle>>20, gatewayOverhead>>20)
	}
	if res := runners[short.Timeout].Run(t.Context(), `call_tool("math", "add", {a: 1, b: 2}).sum`, &fakeCaller{}); res.Status != StatusOK || string(res.Result) != "3" {
		t.Errorf("a script after the bombs: %+v", res)
	}
}

// TestWorkerCrash: a worker that dies mid-script (killed here while its
// script waits for a tool call) ends that script with an error naming the
// worker, and the next script gets a new one.
func TestWorkerCrash(t *testing.T) {
	r := NewRunner(limits())
	t.Cleanup(r.Close)
	pids := make(chan *os.Process, 1)
	r.running = func(p *os.Process) { pids <- p }
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	done := make(chan *Result, 1)
	go func() {
		done <- r.Run(t.Context(), `call_tool("text", "block")`, &blockingCaller{started: started, release: release})
	}()
	p := <-pids
	<-started
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Status != StatusError || res.Limit != "worker" || !strings.Contains(res.Error, "worker died") {
		t.Errorf("a killed worker: %+v", res)
	}
	r.running = nil
	if res := r.Run(t.Context(), `1 + 1`, &fakeCaller{}); res.Status != StatusOK || string(res.Result) != "2" {
		t.Errorf("the next script: %+v", res)
	}
}

// TestWorkerReuse: a worker whose script ended cleanly (an error thrown
// by the script included) takes the next script; one whose script hit a
// bound is replaced.
func TestWorkerReuse(t *testing.T) {
	l := limits()
	l.Warm = 2
	r := NewRunner(l)
	t.Cleanup(r.Close)
	var pids []int
	r.running = func(p *os.Process) { pids = append(pids, p.Pid) }
	for _, script := range []string{`1`, `throw new Error("x")`, `while (true) {}`, `2`} {
		l := r.limits
		if script == `while (true) {}` {
			r.limits.Timeout = 200 * time.Millisecond
		}
		r.Run(t.Context(), script, &fakeCaller{})
		r.limits = l
	}
	if len(pids) != 4 || pids[0] != pids[1] || pids[1] != pids[2] || pids[3] == pids[2] {
		t.Errorf("workers of four scripts (the third timing out): %v; want the first three alike, the fourth another", pids)
	}
}
