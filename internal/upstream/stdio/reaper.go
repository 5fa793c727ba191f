//go:build unix

package stdio

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
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
// leads its own process group, so only EOF ends it.
//
// A descendant that leaves its group (setsid, a daemon's double fork) is
// tracked on Linux: ReaperMain makes Switchboard a child subreaper
// (PR_SET_CHILD_SUBREAPER), so orphaned descendants are re-parented to it
// instead of init, and while children run a scan of /proc every
// trackInterval finds the process groups of their descendants (and of
// re-parented orphans that started a session of their own) and registers
// them with the reaper too. A SIGKILLed Switchboard's reaper ends them with
// the children's groups; a child's end (its reap) ends those found under
// it. What the scan cannot see: a descendant that leaves its group and
// Switchboard's tree within one interval of its start, and an orphan that
// only changed its group (not its session) before it was ever scanned.
// The scan also waits for re-parented orphans that exit (zombies), among
// those it tracked or that have a session of their own.

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
	if trackDescendants && setSubreaper() == nil {
		reap.track = true
	}
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

	track    bool             // guarded by mu: track descendants that leave their group (Linux, subreaper set)
	tracking bool             // guarded by mu: the tracker goroutine runs
	extra    map[int]int      // guarded by mu: groups found by the tracker → the child group they were found under (0: an adopted orphan's)
	seen     map[int]struct{} // guarded by mu: pids the tracker found among the children's descendants
}

// trackInterval is how often the tracker scans for descendants.
const trackInterval = 500 * time.Millisecond

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
	if c.track && !c.tracking {
		c.tracking = true
		go c.trackLoop() // ends when no group is left
	}
}

// trackLoop scans for descendants every trackInterval while groups are
// registered.
func (c *reaperClient) trackLoop() {
	t := time.NewTicker(trackInterval)
	defer t.Stop()
	for range t.C {
		if !c.scan() {
			return
		}
	}
}

// scan registers the groups of the children's descendants that left their
// group, forgets tracked groups that are gone and waits for exited adopted
// orphans. It returns false, having marked the tracker stopped, when there
// is nothing to track.
func (c *reaperClient) scan() bool {
	procs, err := scanProcs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.groups) == 0 && len(c.extra) == 0 {
		c.tracking = false
		return false
	}
	if err != nil || procs == nil {
		return true
	}
	self := os.Getpid()
	me := procs[self]
	if c.extra == nil {
		c.extra, c.seen = map[int]int{}, map[int]struct{}{}
	}
	// rootOf is the child group a process descends from, 0 for an orphan
	// re-parented here with a session of its own, -1 for neither.
	rootOf := func(pid int) int {
		for q, depth := pid, 0; depth < 64; depth++ {
			p, ok := procs[q]
			if !ok {
				return -1
			}
			if _, ok := c.groups[p.pgid]; ok {
				return p.pgid
			}
			if r, ok := c.extra[p.pgid]; ok {
				return r
			}
			if p.ppid == self {
				if p.sid != me.sid {
					return 0
				}
				return -1
			}
			if p.ppid <= 1 {
				return -1
			}
			q = p.ppid
		}
		return -1
	}
	groupsAlive := map[int]bool{}
	for pid, p := range procs {
		groupsAlive[p.pgid] = true
		if pid == self {
			continue
		}
		root := rootOf(pid)
		if root < 0 {
			continue
		}
		c.seen[pid] = struct{}{}
		if p.zombie && p.ppid == self {
			if _, child := c.groups[pid]; !child { // children are waited for by their Process
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
				delete(c.seen, pid)
			}
			continue
		}
		_, inGroup := c.groups[p.pgid]
		_, inExtra := c.extra[p.pgid]
		if inGroup || inExtra || p.pgid <= 1 || p.pgid == me.pgid {
			continue
		}
		c.extra[p.pgid] = root
		c.send('+', p.pgid)
		slog.Info("stdio: a child's descendant left its process group; tracked, to be stopped with the child",
			"pgid", p.pgid, "child_pgid", root)
	}
	for pgid := range c.extra {
		if !groupsAlive[pgid] {
			delete(c.extra, pgid)
			c.send('-', pgid)
		}
	}
	for pid := range c.seen {
		if _, ok := procs[pid]; !ok {
			delete(c.seen, pid)
		}
	}
	return true
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
	// The groups that left this child's are ended with it.
	for g, root := range c.extra {
		if root == pgid {
			_ = syscall.Kill(-g, syscall.SIGKILL)
			delete(c.extra, g)
			if c.w != nil {
				c.send('-', g)
			}
		}
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
	var lines []byte
	for pgid := range c.groups {
		lines = fmt.Appendf(lines, "+%d\n", pgid)
	}
	for pgid := range c.extra {
		lines = fmt.Appendf(lines, "+%d\n", pgid)
	}
	if _, err := w.Write(lines); err != nil {
		_ = w.Close()
		return err
	}
	c.w = w
	return nil
}
