// Package stdio runs one MCP server as a child process and speaks
// newline-delimited JSON-RPC with it over stdin and stdout.
//
// It is mechanism only: start, frame, close. Policy (when to restart, how
// often) belongs to the upstream package. The contracts that make a child
// safe to run on a user's machine live here:
//
//   - no shell: argv is executed directly;
//   - the environment is an allowlist (AllowedEnv) plus what the config adds;
//   - the child leads its own process group, and Close ends the whole group:
//     close stdin, wait, SIGTERM, wait, SIGKILL — so no grandchild (npx's
//     node, a Python venv's interpreter) is ever orphaned; on Linux the child
//     also gets SIGKILL if Switchboard itself dies (Pdeathsig), and with
//     ReaperMain in main the whole group does, even when Switchboard is
//     SIGKILLed (see reaper.go);
//   - stdout lines that are not JSON-RPC objects and stderr lines are handed
//     to the logger, never to a client, within a budget (LineLimit); the
//     last stderr lines are kept, so a child that dies says why (ExitError);
//   - each message is one line on stdin; lines never interleave and keep
//     their order, and a caller's Write returns once its line is in the
//     pipe; no line waits for a wake-up nobody will send (see Process).
package stdio

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// AllowedEnv lists the variables a child inherits from Switchboard's own
// environment. Everything else must be named in the config (env) or come
// from the secrets file.
var AllowedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
	"TMPDIR", "TZ", "NPM_CONFIG_CACHE", "NPM_CONFIG_PREFIX", "XDG_CACHE_HOME",
	"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "GOPATH", "GOCACHE",
	"GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"SYSTEMROOT", "PATHEXT", "COMSPEC", "APPDATA", "LOCALAPPDATA", "PROGRAMFILES", "USERPROFILE",
}

// Env builds a child environment, sorted by name: the allowlisted
// variables of the current process, then extra (config env, then secrets;
// later wins).
func Env(extra ...map[string]string) []string {
	vars := map[string]string{}
	for _, k := range AllowedEnv {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	for _, m := range extra {
		maps.Copy(vars, m)
	}
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// Spec describes a child process.
type Spec struct {
	Argv []string // program and arguments; Argv[0] is looked up in PATH; required
	Env  []string // complete environment (see Env); nil means an empty environment
	Dir  string   // working directory; "" means Switchboard's own
	// MaxLine is the longest stdout line accepted, in bytes; longer lines are
	// reported to OnOversize and skipped. Zero means 16 MiB.
	MaxLine int
	// GracePeriod is how long Close waits after closing stdin, and again
	// after SIGTERM, before escalating. Zero means 2 s.
	GracePeriod time.Duration
	Logger      *slog.Logger // stderr lines and skipped stdout lines; nil discards
	// Lines is the log budget of the stderr and skipped stdout lines; share
	// one between the processes of a destination. Nil means a budget of
	// this process's own with the defaults (NewLineLimit(0, 0)).
	Lines *LineLimit
	// Redact removes secrets from the stderr lines an ExitError carries and
	// from the lines logged (before they are clipped). Nil leaves them as is.
	Redact func(string) string
}

// Process is a running child. Its methods are safe for concurrent use.
//
// Each message is one line on stdin (line breaks in its JSON whitespace
// become spaces). A stdout line that is not a JSON-RPC object, or a stderr
// line, is logged within the LineLimit budget: a flood is counted, not
// logged; a stderr line of any length is read in bounded pieces and logged
// clipped, and later lines still get through.
//
// Wake-ups, who wakes whom and under which lock (a call must never wait
// for a later message to push its own through):
//
//   - Writers (send), all under wmu. A caller appends its line to wbuf and
//     takes the next number (queued). If no write is in progress it becomes
//     the writer: it takes the whole batch, sets writing, releases wmu only
//     for the system call, retakes it, records written (or werr), clears
//     writing and broadcasts wcond, always, error or not. A caller that
//     finds a write in progress waits on wcond until its line is written
//     (written ≥ its number), the pipe broke (werr), or nobody is writing;
//     in the last case its line is still queued and it writes the batch
//     itself. So every queued line is either in the batch a writer holds
//     or owned by a caller that is about to write it: no line waits for a
//     wake-up nobody will send. A caller held back by a full batch (held)
//     waits for the same broadcast. Write returns only once its line is in
//     the pipe: a call's request is written before its caller starts
//     waiting for the answer.
//   - The reader: one goroutine per stream reads the pipe and blocks only
//     in read (the runtime's poller wakes it when the child writes) and in
//     onLine, which must not block: upstream's dispatch hands the message
//     to its call's queue, whose signal wakes the waiter (jsonrpc.Queue).
//     Unread shows a reader that is not woken: bytes waiting in the pipe
//     while the count of bytes read stands still (upstream's watchdog
//     counts it at stage read).
//   - The child: between the line leaving stdin (InputWaiting 0) and its
//     answer reaching stdout, nobody here wakes anybody; CPUWait tells
//     whether the child's threads were waiting for a CPU meanwhile
//     (docs/stall-report.md).
type Process struct {
	spec  Spec
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   *slog.Logger
	lines *LineLimit
	tail  tail // the last stderr lines

	// Writes to stdin are grouped (group commit, see Writers above): under
	// concurrency, fewer writes for the gateway and fewer reads for the
	// child.
	wmu     sync.Mutex
	wcond   sync.Cond // on wmu: a write ended
	wbuf    []byte    // guarded by wmu: lines queued, not yet being written
	spare   []byte    // guarded by wmu: the buffer last written, reused
	queued  uint64    // guarded by wmu: lines queued so far
	written uint64    // guarded by wmu: lines written so far
	writing bool      // guarded by wmu: a write is in progress
	held    int       // guarded by wmu: callers waiting for room in a full batch
	werr    error     // guarded by wmu: the write error that broke stdin

	stdout  *os.File      // the read end of the child's stdout, for Unread
	readOut atomic.Uint64 // bytes read from stdout so far

	done      chan struct{} // closed when the process has exited and been reaped
	waitErr   error         // set before done is closed
	closeOnce sync.Once
}

// Start starts the child. onLine is called from one goroutine, in order, for
// each stdout line that looks like a JSON object (first non-space byte '{'),
// with a slice that is only valid during the call. onOversize is called with
// the line's first bytes when a line exceeds MaxLine. Both run on the reader
// goroutine, which ends when stdout closes; Done is closed after that and
// after the process is reaped.
func Start(spec Spec, onLine func([]byte), onOversize func(prefix []byte)) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("stdio: start: empty command")
	}
	if spec.MaxLine <= 0 {
		spec.MaxLine = 16 << 20
	}
	if spec.GracePeriod <= 0 {
		spec.GracePeriod = 2 * time.Second
	}
	log := cmp.Or(spec.Logger, slog.New(slog.DiscardHandler))
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio: start: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio: start: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio: start: %w", err)
	}
	growPipe(stdin)
	growPipe(stdout)
	reap.prepare()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stdio: start %q: %w", spec.Argv[0], err)
	}
	reap.register(cmd.Process.Pid)
	lines := spec.Lines
	if lines == nil {
		lines = NewLineLimit(0, 0)
	}
	p := &Process{spec: spec, cmd: cmd, stdin: stdin, log: log, lines: lines, done: make(chan struct{})}
	p.wcond.L = &p.wmu
	p.stdout, _ = stdout.(*os.File)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.readStdout(countingReader{stdout, &p.readOut}, onLine, onOversize) }()
	go func() { defer readers.Done(); p.readStderr(stderr) }()
	go p.reap(&readers, stdout, stderr)
	return p, nil
}

// reap waits for the child to exit, then ends whatever is left of its
// process group (no orphans), lets the readers drain what the child wrote,
// and closes done. cmd.Wait is not used: it would close stdout under the
// reader and could lose the child's last lines.
func (p *Process) reap(readers *sync.WaitGroup, stdout, stderr io.Closer) {
	state, err := p.cmd.Process.Wait()
	killGroup(p.cmd.Process.Pid, syscall.SIGKILL)
	reap.unregister(p.cmd.Process.Pid)
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(p.spec.GracePeriod):
		// Something outside the group still holds the pipes open.
		_ = stdout.Close()
		_ = stderr.Close()
		<-drained
	}
	// cmd.Wait, which would close the pipes, is not used: close them here,
	// stdin too (a child that exits by itself may never see Close).
	_ = stdout.Close()
	_ = stderr.Close()
	p.closeOnce.Do(func() { _ = p.stdin.Close() })
	if err == nil && !state.Success() {
		err = &exec.ExitError{ProcessState: state}
	}
	if err != nil {
		if tl := p.tail.lines(p.spec.Redact); len(tl) > 0 {
			err = &ExitError{Err: err, Stderr: tl}
		}
	}
	p.lines.flush() // the count of what was suppressed, before the exit is reported
	p.waitErr = err
	close(p.done)
}

// Unread tells how the stdout path stands: waiting is how many bytes the
// child wrote that are still in the pipe, unread (-1 where the system
// cannot tell, or once the child has exited), and read how many bytes the
// reader has taken from it so far. A reader that is woken as it should be
// never leaves bytes waiting while read stands still (see the package doc).
func (p *Process) Unread() (waiting int, read uint64) {
	read = p.readOut.Load()
	if p.exited() || p.stdout == nil {
		return -1, read
	}
	return pipeWaiting(p.stdout), read
}

// InputWaiting returns how many bytes written to the child's stdin it has
// not read yet (-1 where the system cannot tell, or once it has exited):
// with Unread, where a message that is neither answered nor in flight in
// the gateway sits.
func (p *Process) InputWaiting() int {
	if c, ok := p.stdin.(syscall.Conn); ok && !p.exited() {
		return pipeWaiting(c)
	}
	return -1
}

// countingReader counts the bytes read through it into n.
type countingReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (c countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.n.Add(uint64(k))
	return k, err
}

// exited reports whether the child has exited and been reaped (Done).
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid returns the child's process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the child has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the child exited; valid after Done is closed. It is nil
// for exit status 0; otherwise, if the child wrote to stderr, an
// *ExitError carrying its last lines.
func (p *Process) Err() error { return p.waitErr }

// ErrExited is returned by Write after the child has exited.
var ErrExited = errors.New("stdio: process exited")

// Write sends one message, newline-terminated: one line, whatever JSON
// whitespace msg holds (see appendLine). It returns once the line is in
// the pipe (or failed to get there).
func (p *Process) Write(msg []byte) error {
	return p.send(func(b []byte) []byte { return append(b, msg...) })
}

// Appender is a message that encodes itself (*jsonrpc.Message).
type Appender = interface{ AppendTo([]byte) []byte }

// WriteFrom sends one message as Write does, encoded by m straight into the
// write buffer: no encoded copy of its own is made. A message that can
// hand out a large member (Around, *jsonrpc.Message) has that member
// written to the pipe from its own buffer, not copied at all.
func (p *Process) WriteFrom(m Appender) error {
	if a, ok := m.(Around); ok && a.LargestMember() >= minAround {
		if sent, err := p.sendAround(a); sent {
			return err
		}
	}
	return p.send(m.AppendTo)
}

// Around is a message that encodes itself around its largest member
// (*jsonrpc.Message): see jsonrpc.Message.AppendAround.
type Around = interface {
	LargestMember() int
	AppendAround(dst []byte, min int) (out, big []byte, at int)
}

// minAround is the size from which a message's largest member is written
// from its own buffer rather than copied into the batch: past it the copy
// costs more than the two extra system calls.
const minAround = 32 << 10

// sendAround writes a message with a member of minAround bytes or more
// (big) as three writes, the batch queued before it and the head of its
// line, big, and the rest of its line, taking the writer's turn as send
// does: lines still never interleave and keep their order. sent is false
// when the message has no such member, or one holding a line break (JSON
// whitespace, which must become a space in a copy): send then sends it.
func (p *Process) sendAround(a Around) (sent bool, err error) {
	if p.exited() {
		return true, ErrExited
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for p.writing && p.werr == nil {
		p.wcond.Wait()
	}
	if p.werr != nil {
		return true, p.werr
	}
	queued := len(p.wbuf)
	out, big, at := a.AppendAround(p.wbuf, minAround)
	if big == nil || hasLineBreak(big) {
		p.wbuf = out[:queued]
		return false, nil
	}
	spaceLineBreaks(out[queued:])
	out = append(out, '\n')
	p.queued++
	return true, p.writeBatch(out, out[:at], big, out[at:])
}

// maxBatch is the size past which a batch of queued lines takes no more
// lines while a write is in progress: a pipe's capacity (64 KiB on Linux).
const maxBatch = 64 << 10

// send queues the line add appends and returns once it is written: by
// this caller, together with every line queued before it, or by another
// caller that was writing when it was queued.
func (p *Process) send(add func([]byte) []byte) error {
	if p.exited() {
		return ErrExited
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	// A batch past maxBatch waits for the write in progress before it
	// grows: the child takes a pipe's worth at a time anyway, and a batch
	// of large messages would otherwise grow (and copy) without bound.
	if p.writing && len(p.wbuf) >= maxBatch && p.werr == nil {
		p.held++
		for p.writing && len(p.wbuf) >= maxBatch && p.werr == nil {
			p.wcond.Wait()
		}
		p.held--
	}
	if p.werr != nil {
		return p.werr
	}
	p.wbuf = appendLine(p.wbuf, add)
	p.queued++
	mine := p.queued
	for p.writing && p.written < mine && p.werr == nil {
		p.wcond.Wait()
	}
	switch {
	case p.werr != nil:
		return p.werr
	case p.written >= mine:
		return nil // written by another caller
	}
	// Nobody is writing and this line is still queued: write the lot.
	return p.writeBatch(p.wbuf, p.wbuf)
}

// writeBatch takes the writer's turn (see Process) for the batch out, every
// line queued so far, writing pieces (which make out) in order; wmu held,
// and released for the system calls.
func (p *Process) writeBatch(out []byte, pieces ...[]byte) error {
	upto := p.queued
	p.wbuf, p.spare = p.spare[:0], nil
	p.writing = true
	p.wmu.Unlock()
	var err error
	for _, b := range pieces {
		if _, err = p.stdin.Write(b); err != nil {
			break
		}
	}
	p.wmu.Lock()
	p.writing = false
	if cap(out) <= 256<<10 {
		p.spare = out[:0] // a batch of large messages is not kept
	}
	if err != nil {
		p.werr = fmt.Errorf("stdio: write: %w", err)
	} else {
		p.written = upto
	}
	p.wcond.Broadcast()
	return p.werr
}

// appendLine appends the message add appends to b, and its newline (see
// spaceLineBreaks).
func appendLine(b []byte, add func([]byte) []byte) []byte {
	start := len(b)
	b = add(b)
	spaceLineBreaks(b[start:])
	return append(b, '\n')
}

// spaceLineBreaks turns the line breaks in msg into spaces. A line break
// inside a message can only be JSON whitespace (a JSON string holds none
// unescaped): a client that pretty-prints its request must not split it
// into two lines for the child.
func spaceLineBreaks(msg []byte) {
	if !hasLineBreak(msg) {
		return
	}
	for i, c := range msg {
		if c == '\n' || c == '\r' {
			msg[i] = ' '
		}
	}
}

func hasLineBreak(b []byte) bool {
	return bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0
}

func (p *Process) readStdout(r io.Reader, onLine func([]byte), onOversize func([]byte)) {
	lr := newLineReader(r, p.spec.MaxLine)
	for {
		line, over, err := lr.next()
		if err != nil {
			return
		}
		if over {
			if onOversize != nil {
				onOversize(line)
			}
			p.log.Warn("stdout line exceeds the message size limit; skipped", "limit_bytes", p.spec.MaxLine)
			continue
		}
		// onLine keeps no slice of the line: the reader's buffer holds the
		// next one.
		p.line(bytes.TrimSpace(line), onLine)
	}
}

func (p *Process) line(line []byte, onLine func([]byte)) {
	if len(line) == 0 {
		return // blank lines are common (npx) and harmless
	}
	if line[0] != '{' {
		if p.lines.allow(streamStdout, p.log) {
			p.log.Warn("non-JSON-RPC line on stdout skipped", "line", p.clip(line, false))
		}
		return
	}
	onLine(line)
}

// readStderr logs stderr lines within the budget and keeps the last ones
// for ExitError. A line longer than the read buffer is taken as its first
// 64 KiB (clipped further when logged); the rest is read and dropped, and
// the lines after it are read as usual.
func (p *Process) readStderr(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	skipping := false // inside the dropped rest of a long line
	for {
		frag, err := br.ReadSlice('\n')
		if len(frag) > 0 && !skipping {
			if line := bytes.TrimSpace(frag); len(line) > 0 {
				p.tail.add(line)
				if p.lines.allow(streamStderr, p.log) {
					if err == bufio.ErrBufferFull {
						p.log.Info("stderr", "line", p.clip(line, true), "truncated", true)
					} else {
						p.log.Info("stderr", "line", p.clip(line, false))
					}
				}
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			skipping = true
		case err != nil:
			return
		default:
			skipping = false
		}
	}
}

// clip redacts b (Spec.Redact) and returns it as a log value cut to 512
// bytes. A redacting log handler redacts it again, whole, before the cut
// (audit.Clipped), so no secret is cut in half even without Spec.Redact.
// head says b is the start of a longer line.
func (p *Process) clip(b []byte, head bool) audit.Clipped {
	s := string(b)
	if p.spec.Redact != nil {
		s = p.spec.Redact(s)
	}
	return audit.Clipped{S: s, N: 512, Head: head}
}

// Close ends the child and its process group: close stdin, wait GracePeriod,
// SIGTERM the group, wait GracePeriod, SIGKILL the group. It returns when the
// child has been reaped or ctx is done. It is idempotent.
func (p *Process) Close(ctx context.Context) error {
	// Not under wmu: a Write blocked on a child that stops reading stdin
	// holds it, and closing the pipe is what unblocks that Write.
	p.closeOnce.Do(func() { _ = p.stdin.Close() })
	pgid := p.cmd.Process.Pid
	t := time.NewTimer(p.spec.GracePeriod)
	defer t.Stop()
	select {
	case <-p.done:
		killGroup(pgid, syscall.SIGKILL) // stragglers in the group
		return nil
	case <-ctx.Done():
		killGroup(pgid, syscall.SIGKILL)
		return ctx.Err()
	case <-t.C:
	}
	killGroup(pgid, syscall.SIGTERM)
	t.Reset(p.spec.GracePeriod)
	select {
	case <-p.done:
		killGroup(pgid, syscall.SIGKILL)
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	killGroup(pgid, syscall.SIGKILL)
	<-p.done
	return nil
}

// Kill ends the child's process group at once with SIGKILL and waits.
func (p *Process) Kill() {
	killGroup(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}
