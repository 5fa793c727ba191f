package upstream

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Stall detection: a call must never wait on Switchboard's own path, only
// on its server. A watchdog (one timer per Upstream, armed while calls are
// in flight, every StallAfter/2) looks at the three hand-offs the gateway
// owns and logs and counts ("call stalled", Stalled, the metric
// switchboard_calls_stalled_total{stage}) any that has held a message
// longer than StallAfter, and probes a server that sits in silence:
//
//   - StageWrite: a request queued for the server and not written to it
//     (a lost wake-up of the connection's writer, or a server that stopped
//     reading its input);
//   - StageRead: bytes the server wrote waiting in the connection (the
//     stdout pipe) while the reader took none of them (a reader that was
//     not woken);
//   - StageDeliver: a message read from the server and not handed to its
//     call (the reader stuck between the two);
//   - StageTake: an answer handed to its call and still not taken by the
//     front when the call is given up (a front that missed its wake-up);
//     seen when the call is abandoned, StallAfter or more after the answer
//     came;
//   - StageServer: a server that sat on a request until it was sent
//     something more. When a request has been written and unanswered
//     while nothing went either way for StallAfter, a stdio server is sent
//     a ping (the protocol's liveness check; at most one at a time, the
//     next after twice the wait, up to 32 StallAfters). A call whose
//     answer then arrives at once (within probeWindow) and before the
//     ping's was held by the server until more input came: counted, and
//     recovered without waiting for the call's timeout. A server that is
//     merely slow answers the ping first, or (answering in order) the call
//     whenever it is done, and nothing is counted.
//   - StageCPU: such a held answer, from a server that was waiting for a
//     CPU (CPUWaiter, sampled at every tick): its threads waited on a run
//     queue at least half of the time the call waited, or a tenth of it
//     with a thread of it runnable at a tick meanwhile (a wait in progress
//     is counted only once the thread runs; a thread runnable for a moment
//     in a server that sleeps is not enough). The machine was too busy to run
//     the server, which did not sit on the answer (docs/stall-report.md).
//     Counted apart, so that stage server keeps meaning a server that held
//     an answer while it could run.
//
// A stall is counted once per call (write) or per episode (read, deliver).
// The watchdog never blocks the data path: it reads stamps the writers and
// the reader set (atomics), and takes mu only to look at the calls.
const (
	StageWrite   = "write"
	StageRead    = "read"
	StageDeliver = "deliver"
	StageTake    = "take"
	StageServer  = "server"
	StageCPU     = "cpu"
)

// Stages lists the stall stages, in the order Stalled reports them.
var Stages = []string{StageWrite, StageRead, StageDeliver, StageTake, StageServer, StageCPU}

const (
	stageWrite = iota
	stageRead
	stageDeliver
	stageTake
	stageServer
	stageCPU
	numStages
)

// stalledTotal counts the stalls of every Upstream of the process, by
// stage: what /metrics reports.
var stalledTotal [numStages]atomic.Uint64

// StalledTotal returns how many stalls the Upstreams of this process have
// seen, by stage (see Stages), since it started.
func StalledTotal() map[string]uint64 {
	m := make(map[string]uint64, numStages)
	for i, s := range Stages {
		m[s] = stalledTotal[i].Load()
	}
	return m
}

// Stalled returns how many stalls u has seen at stage (one of Stages).
func (u *Upstream) Stalled(stage string) uint64 {
	if i := slices.Index(Stages, stage); i >= 0 {
		return u.stalled[i].Load()
	}
	return 0
}

// Unreader is implemented by connections that can tell whether the
// server's output waits unread (*stdio.Process): waiting is how many bytes
// wait (-1 when it cannot be told), read how many were read so far.
type Unreader interface {
	Unread() (waiting int, read uint64)
}

// stallWatch is the watchdog's state; guarded by Upstream.mu.
type stallWatch struct {
	timer *time.Timer // nil until the first call
	armed bool        // the timer will fire
	// The read stage: read stood at readAt with bytes waiting since
	// waitSince; reported is set once that episode was counted.
	readAt    uint64
	waitSince time.Time
	reported  bool
	// The probe: probeID is the ping in flight (outstanding while pending
	// holds it), sent at probeAt; probes counts the probes sent while
	// probeFor was the oldest call waiting, which doubles the wait.
	probeID  int64
	probeAt  time.Time
	probes   int
	probeFor int64
	// probeSaw is where the bytes stood when the probe was sent: the
	// server's output waiting unread, the bytes read so far, and its
	// input not yet read (-1: cannot tell). Logged with a server stall:
	// output waiting means the gateway's reader sat on the answer, input
	// waiting that the server had not read the request, neither that the
	// server had read it and not answered.
	probeSaw [3]int64
	// cpu keeps the server's CPU wait as sampled at the last ticks.
	cpu cpuSamples
}

// InputWaiter is implemented by connections that can tell how much of what
// was written to the server it has not read yet (*stdio.Process): -1 when
// it cannot be told.
type InputWaiter interface{ InputWaiting() int }

// maxProbeShift caps the probe's doubling wait: StallAfter << 5.
const maxProbeShift = 5

// watchStalls arms the watchdog if it is not armed; mu held. A call that
// enters pending calls it.
func (u *Upstream) watchStalls() {
	if u.opts.StallAfter < 0 || u.sw.armed || u.state == Closed {
		return
	}
	u.sw.armed = true
	if u.sw.timer == nil {
		u.sw.timer = time.AfterFunc(u.opts.StallAfter/2, u.checkStalls)
		return
	}
	u.sw.timer.Reset(u.opts.StallAfter / 2)
}

// stopStalls stops the watchdog for good (Close); mu held.
func (u *Upstream) stopStalls() {
	if u.sw.timer != nil {
		u.sw.timer.Stop()
	}
	u.sw.armed = false
}

// stall counts and logs one stall.
func (u *Upstream) stall(stage int, age time.Duration, args ...any) {
	u.stalled[stage].Add(1)
	stalledTotal[stage].Add(1)
	u.log.Warn("call stalled", append([]any{"stage", Stages[stage],
		"for", age.Round(time.Millisecond)}, args...)...)
}

// checkStalls is the watchdog's tick (see the top of this file). It runs
// on the timer's goroutine and re-arms itself while calls are in flight.
func (u *Upstream) checkStalls() {
	after := u.opts.StallAfter
	now := time.Now()
	// The reader first, without mu: a reader stuck between reading a
	// message and handing it over may be stuck on mu itself.
	if d := u.dispatching.Load(); d != 0 {
		if age := now.Sub(time.Unix(0, d)); age >= after && u.deliverReported.Swap(d) != d {
			u.stall(stageDeliver, age)
		}
	}
	u.mu.Lock()
	if u.state == Closed {
		u.sw.armed = false
		u.mu.Unlock()
		return
	}
	type overdue struct {
		id     int64
		method string
		age    time.Duration
	}
	var late []overdue
	for _, c := range u.pending {
		if c.stalledWrite || c.wrote.Load() != 0 || c.sent.IsZero() {
			continue
		}
		if age := now.Sub(c.sent); age >= after {
			c.stalledWrite = true
			late = append(late, overdue{c.id, c.method, age})
		}
	}
	conn := u.conn
	readStall := time.Duration(0)
	if ur, ok := conn.(Unreader); ok {
		waiting, read := ur.Unread()
		switch {
		case waiting <= 0 || u.dispatching.Load() != 0:
			// Nothing waits, or the reader is busy with a message (the
			// deliver stage's business).
			u.sw.readAt, u.sw.waitSince, u.sw.reported = read, time.Time{}, false
		case read != u.sw.readAt || u.sw.waitSince.IsZero():
			u.sw.readAt, u.sw.waitSince, u.sw.reported = read, now, false
		case !u.sw.reported && now.Sub(u.sw.waitSince) >= after:
			u.sw.reported = true
			readStall = now.Sub(u.sw.waitSince)
		}
	}
	probe := u.probeDue(now, conn)
	u.sw.armed = len(u.pending) > 0
	if u.sw.armed {
		u.sw.timer.Reset(after / 2)
	}
	u.mu.Unlock()
	if probe != nil {
		if err := u.write(probe); err != nil {
			u.log.Debug("probe not sent", "err", err)
		}
	}
	for _, o := range late {
		u.stall(stageWrite, o.age, "id", o.id, "method", o.method)
	}
	if readStall > 0 {
		u.stall(stageRead, readStall)
	}
	// Last: the probe is not held back by reading the server's CPU wait.
	u.sw.cpu.sample(conn, now)
}

// probeDue decides whether the server is probed now, and if so registers
// the probe and returns the ping to write; mu held. See StageServer.
func (u *Upstream) probeDue(now time.Time, conn Conn) *jsonrpc.Message {
	after := u.opts.StallAfter
	ur, ok := conn.(Unreader)
	if !ok || u.state != Ready {
		return nil
	}
	if p := u.pending[u.sw.probeID]; p != nil {
		if now.Sub(u.sw.probeAt) < 4*after {
			return nil // one probe at a time
		}
		// A server that does not answer pings (or answers them only after
		// the call in progress): forget this one; a late answer is dropped
		// as unknown, at debug level.
		delete(u.pending, p.id)
	}
	var oldest *Call
	for _, c := range u.pending {
		if c.subscription || c.parked.Load() || c.wrote.Load() == 0 {
			continue
		}
		if oldest == nil || c.id < oldest.id {
			oldest = c
		}
	}
	if oldest == nil {
		return nil
	}
	if oldest.id != u.sw.probeFor {
		u.sw.probeFor, u.sw.probes = oldest.id, 0
	}
	quiet := time.Unix(0, max(u.lastWrite.Load(), u.lastHeard.Load(), oldest.wrote.Load()))
	if now.Sub(quiet) < after<<min(u.sw.probes, maxProbeShift) {
		return nil
	}
	u.sw.probes++
	u.nextID++
	p := &Call{u: u, id: u.nextID, method: "ping", internal: true, probe: true}
	p.q.Init(1)
	u.pending[p.id] = p
	u.sw.probeID, u.sw.probeAt = p.id, now
	waiting, read := ur.Unread()
	input := -1
	if iw, ok := conn.(InputWaiter); ok {
		input = iw.InputWaiting()
	}
	u.sw.probeSaw = [3]int64{int64(waiting), int64(read), int64(input)}
	for _, c := range u.pending {
		if c != p && !c.subscription && !c.parked.Load() && c.wrote.Load() != 0 {
			c.probedBy = p.id
		}
	}
	return jsonrpc.NewRequest(jsonrpc.IntID(p.id), "ping", nil)
}

// heldAnswer is a call the server held until it was probed (see probed).
type heldAnswer struct {
	age     time.Duration // since the call was sent
	since   time.Time     // when its request was written
	conn    Conn          // the server's connection then
	logArgs []any         // where the bytes stood
}

// probed is called by the reader when call c is answered: if a probe sent
// while c waited is still unanswered, the server held c until it was sent
// more, and it returns the held answer for heldStall (StageServer or
// StageCPU); its logArgs say where the bytes stood when the probe went
// out. Nil otherwise. mu held.
func (u *Upstream) probed(c *Call, now time.Time) *heldAnswer {
	if c.probedBy == 0 || c.probedBy != u.sw.probeID || u.pending[c.probedBy] == nil {
		return nil
	}
	after := now.Sub(u.sw.probeAt)
	if after > probeWindow {
		// A server that answers in order (the ping queued behind a slow
		// call) also answers the call first, at any time: only an answer
		// that follows the probe at once was released by it.
		return nil
	}
	saw := u.sw.probeSaw
	if saw[2] > 0 {
		// The server had not yet read all its input when the probe went
		// out (a server still starting, or busy): it was slow to read the
		// request, not holding its answer, and the ping released nothing.
		return nil
	}
	readNow := int64(-1)
	if ur, ok := u.conn.(Unreader); ok {
		_, r := ur.Unread()
		readNow = int64(r)
	}
	// output_read_now - output_read is what the reader took from the pipe
	// since the probe: the answer and the ping's if it read them after the
	// probe, less if it had taken the answer from the pipe before.
	return &heldAnswer{age: now.Sub(c.sent), since: time.Unix(0, c.wrote.Load()), conn: u.conn,
		logArgs: []any{"after_probe", after.Round(time.Microsecond),
			"output_unread", saw[0], "output_read", saw[1], "output_read_now", readNow, "input_unread", saw[2]}}
}

// heldStall counts and logs a held answer (see probed), without mu: at
// stage cpu when the server was waiting for a CPU since its request was
// written (as far back as the samples go; see StageCPU); at stage server
// otherwise. The log says how long they waited (cpu_wait)
// over how long (cpu_wait_over), and the most threads seen runnable at
// a tick (runnable), when that can be told.
func (u *Upstream) heldStall(h *heldAnswer, id int64, method string) {
	stage := stageServer
	args := append([]any{"id", id, "method", method}, h.logArgs...)
	if wait, over, runnable, ok := u.sw.cpu.since(h.conn, h.since, time.Now()); ok {
		args = append(args, "cpu_wait", wait.Round(time.Millisecond), "cpu_wait_over", over.Round(time.Millisecond),
			"runnable", runnable)
		if over > 0 && (wait >= over/2 || runnable > 0 && wait >= over/10) {
			stage = stageCPU
		}
	}
	u.stall(stage, h.age, args...)
}

// CPUWaiter is implemented by connections that can tell how the server's
// threads stand with the CPU (*stdio.Process): how long they have waited
// for one, summed, since it started, and how many are runnable now; ok is
// false when that cannot be told.
type CPUWaiter interface {
	CPUWait() (wait time.Duration, runnable int, ok bool)
}

// cpuSamples is a ring of a server's CPU wait, sampled at the watchdog's
// ticks: the last maxCPUSamples ticks (4 s at the default StallAfter).
// Safe for concurrent use (its own mutex, never held with Upstream.mu).
type cpuSamples struct {
	mu   sync.Mutex
	ring [maxCPUSamples]cpuSample // guarded by mu
	n    int                      // guarded by mu: samples taken so far
}

type cpuSample struct {
	conn     Conn // whose: samples of an earlier connection are not compared
	at       time.Time
	wait     time.Duration
	runnable int
}

const maxCPUSamples = 8

// sample records conn's CPU wait at now, if conn can tell it.
func (s *cpuSamples) sample(conn Conn, now time.Time) {
	cw, ok := conn.(CPUWaiter)
	if !ok {
		return
	}
	w, r, ok := cw.CPUWait()
	if !ok {
		return
	}
	s.mu.Lock()
	s.ring[s.n%maxCPUSamples] = cpuSample{conn: conn, at: now, wait: w, runnable: r}
	s.n++
	s.mu.Unlock()
}

// since returns how long conn's threads waited for a CPU from the last
// sample taken at or before from (the oldest kept, if none is that old)
// until now, the time that covers, and the most threads runnable in a
// sample taken after from; ok is false when conn cannot tell or no sample
// of it is kept.
func (s *cpuSamples) since(conn Conn, from, now time.Time) (wait, over time.Duration, runnable int, ok bool) {
	cw, can := conn.(CPUWaiter)
	if !can {
		return 0, 0, 0, false
	}
	w, _, can := cw.CPUWait()
	if !can {
		return 0, 0, 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var base, oldest *cpuSample
	for i := range min(s.n, maxCPUSamples) {
		x := &s.ring[i]
		if x.conn != conn {
			continue
		}
		if oldest == nil || x.at.Before(oldest.at) {
			oldest = x
		}
		if !x.at.After(from) && (base == nil || x.at.After(base.at)) {
			base = x
		}
		if x.at.After(from) {
			runnable = max(runnable, x.runnable)
		}
	}
	if base = cmp.Or(base, oldest); base == nil {
		return 0, 0, 0, false
	}
	return max(0, w-base.wait), now.Sub(base.at), runnable, true
}

// probeWindow is how soon after the probe an answer must come to count as
// released by it (StageServer; docs/stall-report.md).
const probeWindow = 50 * time.Millisecond
