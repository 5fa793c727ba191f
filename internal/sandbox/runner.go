package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// KillGrace is how long past its timeout a script's worker is given to
// stop by itself (the interrupt, a regular expression's match timeout)
// before it is killed: every script ends within Limits.Timeout + KillGrace
// (plus the time to reap a process), whatever it runs.
const KillGrace = time.Second

// DefaultNice is the workers' scheduling niceness when Limits.Nice is 0.
const DefaultNice = 10

// maxArgs bounds the JSON arguments of one tool call a script makes: the
// gateway holds them while the call runs.
const maxArgs = 4 << 20

// Runner runs scripts within limits in worker processes. Its methods are
// safe for concurrent use.
//
// A worker is the gateway's binary re-executed (WorkerMain), with an empty
// environment but its marks, at a lower scheduling priority (Limits.Nice),
// a few kept started (Limits.Warm). A worker runs one script at a time,
// each in a fresh interpreter, and takes the next only after one that
// ended cleanly (at most 100). The script's tool calls come back over the
// worker's pipes and are made by the Runner's process through the Caller.
// A worker that crashed, ran out of memory or ran away is gone when Run
// returns, and the next script gets another.
type Runner struct {
	limits Limits
	slots  chan struct{}
	exe    string // the worker binary: this one
	exeErr error

	mu     sync.Mutex // guards idle, closed, and wg's Add
	idle   []*worker  // started workers waiting for a script, at most limits.Warm (the last is taken first)
	spawns int        // workers being started for idle
	closed bool
	wg     sync.WaitGroup // the goroutines starting workers for idle

	running func(*os.Process) // test hook: a worker is given a script (nil: none)
}

// NewRunner returns a Runner; zero limits take the defaults of
// config.Sandbox (10 s, 64 MiB, 1000 calls, 64 KiB, 4 at once) and of
// Nice (DefaultNice) and Warm (2, at most Concurrency). No worker starts
// before the first Run.
func NewRunner(l Limits) *Runner {
	if l.Timeout <= 0 {
		l.Timeout = 10 * time.Second
	}
	if l.Memory <= 0 {
		l.Memory = 64 << 20
	}
	if l.MaxCalls <= 0 {
		l.MaxCalls = 1000
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = 64 << 10
	}
	if l.Concurrency <= 0 {
		l.Concurrency = 4
	}
	if l.Nice <= 0 || l.Nice > 19 {
		l.Nice = DefaultNice
	}
	if l.Warm <= 0 {
		l.Warm = min(2, l.Concurrency)
	}
	exe, err := os.Executable()
	if err == nil && os.Getenv(workerEnvName) != "" {
		err = errors.New("a worker cannot start workers")
	}
	return &Runner{limits: l, slots: make(chan struct{}, l.Concurrency), exe: exe, exeErr: err}
}

// Close stops the idle workers; scripts running finish in theirs. Later
// runs start a worker each and keep none.
func (r *Runner) Close() {
	r.mu.Lock()
	r.closed = true
	idle := r.idle
	r.idle = nil
	r.mu.Unlock()
	for _, w := range idle {
		w.kill()
		w.wait()
	}
	r.wg.Wait() // a worker started meanwhile sees closed and stops
}

// Run runs script, calling tools through c, and returns its result. It
// returns when the script ended or was stopped, with its worker gone and
// every call it started ended.
func (r *Runner) Run(ctx context.Context, script string, c Caller) *Result {
	start := time.Now()
	wait := time.NewTimer(r.limits.Timeout)
	select {
	case r.slots <- struct{}{}:
		wait.Stop()
	case <-ctx.Done():
		return failed("concurrency", fmt.Sprintf("no script slot free (%d scripts already running): %v", r.limits.Concurrency, ctx.Err()))
	case <-wait.C:
		return failed("concurrency", fmt.Sprintf("no script slot free (%d scripts already running) within %s", r.limits.Concurrency, r.limits.Timeout))
	}
	defer func() { <-r.slots }()
	res := r.runInWorker(ctx, script, c)
	res.ExecutionTimeMS = float64(time.Since(start).Microseconds()) / 1000
	return res
}

// take returns an idle worker (the last one back), or starts one; when it
// takes the last idle one it starts another in the background, so that a
// burst of scripts finds one started and a steady stream starts none.
func (r *Runner) take() (*worker, error) {
	r.mu.Lock()
	var w *worker
	if n := len(r.idle); n > 0 {
		w = r.idle[n-1]
		r.idle = r.idle[:n-1]
	}
	if !r.closed && len(r.idle) == 0 && r.spawns == 0 && r.limits.Warm > 0 {
		r.spawns++
		r.wg.Go(r.spawnIdle)
	}
	r.mu.Unlock()
	if w != nil {
		return w, nil
	}
	return r.start()
}

// spawnIdle starts one worker for the idle list.
func (r *Runner) spawnIdle() {
	w, err := r.start()
	r.mu.Lock()
	r.spawns--
	if err == nil && !r.closed && len(r.idle) < r.limits.Warm {
		r.idle = append(r.idle, w)
		w = nil
	}
	r.mu.Unlock()
	if w != nil {
		w.kill()
		w.wait()
	}
}

// putBack keeps a worker that finished a script for the next one, or
// stops it when enough are idle or the runner is closed.
func (r *Runner) putBack(w *worker) {
	r.mu.Lock()
	keep := !r.closed && len(r.idle) < r.limits.Warm
	if keep {
		r.idle = append(r.idle, w)
	}
	r.mu.Unlock()
	if !keep {
		w.kill()
		_ = w.wait()
	}
}

// worker is one worker process: it runs scripts one at a time, until one
// hits a bound or it has run maxScripts.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	frames frameWriter // frames to in, one at a time
	out    *bufio.Reader
	stderr *head

	waitOnce sync.Once
	waitErr  error
}

// start starts a worker process: this binary, with an environment of its
// own (nothing of the gateway's: GOMAXPROCS=1 and the worker mark).
func (r *Runner) start() (*worker, error) {
	if r.exeErr != nil {
		return nil, fmt.Errorf("cannot start a script worker: %w", r.exeErr)
	}
	cmd := exec.Command(r.exe)
	// MALLOC_ARENA_MAX: in a binary built with cgo, glibc would reserve
	// 64 MiB of address space per thread for malloc, out of the bound.
	cmd.Env = []string{workerEnvName + "=1", "GOMAXPROCS=1", "MALLOC_ARENA_MAX=1", fmt.Sprintf("%s=%d", niceEnvName, r.limits.Nice)}
	cmd.SysProcAttr = workerProcAttr()
	w := &worker{cmd: cmd, stderr: &head{max: 8 << 10}}
	cmd.Stderr = w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start a script worker: %w", err)
	}
	w.in, w.out = in, bufio.NewReaderSize(out, 64<<10)
	w.frames.w = in
	return w, nil
}

func (w *worker) kill() { _ = w.cmd.Process.Kill() }

// wait reaps the process (once) and returns how it ended.
func (w *worker) wait() error {
	w.waitOnce.Do(func() {
		_ = w.in.Close()
		w.waitErr = w.cmd.Wait()
	})
	return w.waitErr
}

// maxFrame is the longest frame the gateway reads from a worker: a call's
// arguments, or the result with its stdout.
func (r *Runner) maxFrame() int {
	return int(max(maxArgs, 2*r.limits.MaxOutput)) + 64<<10
}

// runInWorker runs one script in a worker and reaps the worker.
func (r *Runner) runInWorker(ctx context.Context, script string, c Caller) *Result {
	w, err := r.take()
	if err != nil {
		return failed("worker", err.Error())
	}
	if r.running != nil {
		r.running(w.cmd.Process)
	}
	// The worker's frames, read on their own goroutine (it ends when the
	// worker's stdout does: at its exit or kill).
	frames := make(chan *frame)
	readErr := make(chan error, 1)
	readDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			f, err := readFrame(w.out, r.maxFrame())
			if err != nil {
				readErr <- err
				return
			}
			select {
			case frames <- f:
			case <-stop: // the run ended; drain until the kill
			}
			if f.T == "done" {
				return // the worker waits for its next script, or exits
			}
		}
	}()
	callCtx, cancelCalls := context.WithCancel(ctx)
	var calls sync.WaitGroup
	reuse := false // the worker answered and takes another script
	defer func() {
		close(stop)
		if !reuse {
			w.kill() // it may be exiting already
		}
		cancelCalls()
		calls.Wait()
		<-readDone
		if reuse {
			r.putBack(w)
		} else {
			_ = w.wait()
		}
	}()

	hard := time.NewTimer(r.limits.Timeout + KillGrace)
	defer hard.Stop()
	l := r.limits
	if err := w.frames.send(&frame{T: "run", Script: script, Limits: &l}); err != nil {
		return r.died(w, err)
	}
	nCalls := 0
	for {
		select {
		case f := <-frames:
			switch f.T {
			case "call":
				nCalls++
				if nCalls > r.limits.MaxCalls+maxParallel { // the worker counts; this only bounds a broken one
					return failed("max_calls", fmt.Sprintf("max_calls: the script made more than %d tool calls", r.limits.MaxCalls))
				}
				calls.Go(func() {
					res, err := c.CallTool(callCtx, f.Server, f.Tool, f.Args)
					reply := &frame{T: "reply", ID: f.ID, Result: res}
					if err != nil {
						reply.Result = nil
						reply.Err = &frameErr{Kind: "tool", Msg: err.Error()}
						var pe *PermissionError
						if errors.As(err, &pe) {
							reply.Err.Kind = "permission"
						}
					}
					_ = w.frames.send(reply) // a worker gone is seen by the reader
				})
			case "done":
				if f.Res == nil {
					return failed("worker", "the script's worker answered no result")
				}
				reuse = f.Again
				return f.Res
			}
		case err := <-readErr:
			return r.died(w, err)
		case <-hard.C: // the deferred kill ends the worker
			return failed("timeout", fmt.Sprintf("timeout: the script ran longer than %s (its worker was killed)", r.limits.Timeout))
		case <-ctx.Done():
			return failed("cancelled", "cancelled: the call was abandoned")
		}
	}
}

// died describes a worker that stopped without a result: its memory or
// CPU bound, a crash, or a broken frame.
func (r *Runner) died(w *worker, readErr error) *Result {
	var fe *frameTooLong
	if errors.As(readErr, &fe) {
		w.kill()
		_ = w.wait()
		return failed("max_output", fmt.Sprintf("max_output: the script's worker sent a message longer than %s", SizeText(int64(fe.max))))
	}
	err := w.wait()
	stderr := w.stderr.String()
	switch {
	case strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		// the race detector's shadow memory, under the same bound
		strings.Contains(stderr, "ThreadSanitizer failed to allocate") || strings.Contains(stderr, "address space collisions"):
		return failed("memory", fmt.Sprintf("memory: the script's worker ran out of memory (its address space is bounded to its idle size + %s)", SizeText(addressSpace(r.limits.Memory))))
	case strings.Contains(stderr, "stack exceeds"):
		return failed("stack", "stack: the script's native calls nested too deep")
	case strings.Contains(stderr, cpuLimitText):
		return failed("cpu", fmt.Sprintf("cpu: the script used more than %s of CPU time", cpuSeconds(r.limits.Timeout)))
	}
	msg := fmt.Sprintf("the script's worker died (%v)", err)
	if line := lastLine(stderr); line != "" {
		msg += ": " + line
	}
	return failed("worker", msg)
}

// head keeps the first max bytes written to it (a worker's stderr: a Go
// runtime's fatal error comes first, its goroutines' traces after).
type head struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (h *head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *head) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}

// lastLine is the first line of a Go runtime's fatal error or panic if
// there is one, else the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "runtime:") {
			return l
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// cpuSeconds is the CPU time a worker may use for a timeout
// (RLIMIT_CPU): the timeout and KillGrace rounded up to whole seconds, plus
// a second.
func cpuSeconds(timeout time.Duration) time.Duration {
	return (timeout + KillGrace + time.Second - 1).Truncate(time.Second) + time.Second
}

// addressSpace is the address space a worker may add, past its own size
// when it takes a script, for a memory bound: the heap may reach twice the
// bound before a collection confirms it, the Go runtime reserves heap
// address space in 64 MiB arenas, and each thread it starts may reserve a
// stack of 8 MiB.
func addressSpace(memory int64) int64 { return 2*memory + 256<<20 }
