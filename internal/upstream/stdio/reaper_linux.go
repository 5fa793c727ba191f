package stdio

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// trackDescendants: Linux lists every process's parent, group and session
// in /proc, so descendants that leave their group can be found.
const trackDescendants = true

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// setSubreaper makes this process the reaper of its orphaned descendants:
// a process whose parent dies is re-parented here instead of to init, so
// a daemon's double fork stays among this process's descendants.
func setSubreaper() error {
	_, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if e != 0 {
		return e
	}
	return nil
}

// procInfo is what scanProcs reads of a process.
type procInfo struct {
	ppid, pgid, sid int
	zombie          bool
}

// scanProcs reads /proc/*/stat: every process's parent, group, session and
// whether it is a zombie. Processes that end during the scan are left out.
func scanProcs() (map[int]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil, err
	}
	out := make(map[int]procInfo, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces
		// and parentheses: the fields follow the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		sid, _ := strconv.Atoi(f[3])
		out[pid] = procInfo{ppid: ppid, pgid: pgid, sid: sid, zombie: f[0] == "Z"}
	}
	return out, nil
}
