//go:build unix

package stdio

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// The reaper ends the children's process groups when Switchboard dies,
// even by SIGKILL, when nothing in Switchboard runs any more.
//
// Pdeathsig reaches only the direct child: npx's node, uvx's python or the
// sleep of `sh -c 'sleep 300 & wait'` would outlive a killed Switchboard.
// So Switchboard starts one reaper (a re-exec of its own binary, see
// ReaperMain) whose stdin is a pipe Switchboard alone holds open. Start
// registers each child's process group on it ("+pgid"), the reap
// unregisters it ("-pgid"). When the pipe reaches EOF — Switchboard exited,
// however it exited, since the kernel closes a dead process's descriptors
// — the reaper sends SIGKILL to every group still registered and exits.
//
// One reaper serves all children (started at the first child), so a child
// costs no extra process; it ignores terminal and termination signals and
// leads its own process group, so only EOF ends it. A grandchild that
// leaves its group (setsid, a daemon's double fork) is out of reach, as it
// is of Close.

// reaperEnv marks the reaper process (its whole environment). Children
// never inherit it: their environment is an allowlist.
const (
	reaperEnvName = "SWITCHBOARD_STDIO_REAPER"
	reaperEnv     = reaperEnvName + "=1"
)

// ReaperMain must be the first thing main does in a binary that starts
// children (cmd/switchboard). In the reaper process it runs the reaper and
// exits; in any other it enables the reaper for the children started
// after it. Without it children are still ended by Close, and the direct
// child by Pdeathsig (Linux), but grandchildren outlive a SIGKILL.
func ReaperMain() {
	if os.Getenv(reaperEnvName) == "1" {
		os.Exit(runReaper(os.Stdin))
	}
	reap.mu.Lock()
	reap.enabled = true
	reap.mu.Unlock()
}

// runReaper reads "+pgid" and "-pgid" lines until EOF, then kills every
// group still registered.
func runReaper(in *os.File) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	groups := map[int]struct{}{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch op, pgid, ok := reaperLine(sc.Text()); {
		case !ok:
		case op == '+':
			groups[pgid] = struct{}{}
		default:
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// reaperLine parses "+pgid" or "-pgid"; a group id must be over 1 (never
// -1, "every process", nor init's group).
func reaperLine(line string) (op byte, pgid int, ok bool) {
	if len(line) < 2 || (line[0] != '+' && line[0] != '-') || line[1] < '0' || line[1] > '9' {
		return 0, 0, false
	}
	pgid, err := strconv.Atoi(line[1:])
	if err != nil || pgid <= 1 || strconv.Itoa(pgid) != line[1:] {
		return 0, 0, false
	}
	return line[0], pgid, true
}

// reap is this process's side of the reaper.
var reap reaperClient

type reaperClient struct {
	mu      sync.Mutex
	enabled bool                     // guarded by mu: ReaperMain was called
	w       *os.File                 // guarded by mu: the pipe to the running reaper; nil before it starts
	groups  map[int]struct{}         // guarded by mu: groups registered, replayed to a restarted reaper
	started func(pid int, err error) // guarded by mu: test hook, called after each reaper start
}

// prepare starts the reaper, if it is enabled and not running, before a
// child is: register then needs one write right after the fork, instead
// of a re-exec of the binary during which a child (and its children)
// would already run unregistered, out of reach of a SIGKILL of
// Switchboard.
func (c *reaperClient) prepare() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.enabled && c.w == nil {
		_ = c.start() // on failure register tries again; Close and Pdeathsig still apply
	}
}

// register tells the reaper about a new child's process group.
func (c *reaperClient) register(pgid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled {
		return
	}
	if c.groups == nil {
		c.groups = map[int]struct{}{}
	}
	c.groups[pgid] = struct{}{}
	c.send('+', pgid)
}

// unregister forgets a group whose leader has been reaped and killed.
func (c *reaperClient) unregister(pgid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled {
		return
	}
	delete(c.groups, pgid)
	if c.w != nil {
		c.send('-', pgid)
	}
}

// send writes one line to the reaper, (re)starting it when it is not
// running (a reaper that died is replaced, and told every group). mu held.
func (c *reaperClient) send(op byte, pgid int) {
	line := fmt.Appendf(nil, "%c%d\n", op, pgid)
	for range 2 {
		if c.w == nil && c.start() != nil {
			return // no reaper: Close and Pdeathsig still apply
		}
		if _, err := c.w.Write(line); err == nil {
			return
		}
		_ = c.w.Close() // the reaper is gone (EPIPE): start another
		c.w = nil
		if op == '-' {
			return // the new one is told only the groups still registered
		}
	}
}

// start starts the reaper and tells it every registered group. mu held.
func (c *reaperClient) start() error {
	exe := "/proc/self/exe" // the running binary even if the file was replaced
	if runtime.GOOS != "linux" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{reaperEnv}
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close()
	if c.started != nil {
		pid := 0
		if err == nil {
			pid = cmd.Process.Pid
		}
		c.started(pid, err)
	}
	if err != nil {
		_ = w.Close()
		return err
	}
	// The reaper lives as long as this process (it ends at EOF on w, or
	// if killed); this goroutine reaps it then.
	go func() { _ = cmd.Wait() }()
	for pgid := range c.groups {
		if _, err := fmt.Fprintf(w, "+%d\n", pgid); err != nil {
			_ = w.Close()
			return err
		}
	}
	c.w = w
	return nil
}
