package stdio

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// threadsWaited sums the run-queue wait of process pid's threads (the
// second field of /proc/PID/task/TID/schedstat, nanoseconds) and counts
// those in state R (/proc/PID/task/TID/stat). A thread that ended takes
// its share with it, so the sum can go down; ok is false when no thread
// could be read.
func threadsWaited(pid int) (wait time.Duration, runnable int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, false
	}
	for _, e := range ents {
		b, err := os.ReadFile(dir + e.Name() + "/schedstat")
		if err != nil {
			continue // a thread that just ended
		}
		f := bytes.Fields(b)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		wait += time.Duration(v)
		ok = true
		// "TID (comm) S ...": the state follows the last ')'.
		if st, err := os.ReadFile(dir + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && st[i+2] == 'R' {
				runnable++
			}
		}
	}
	return wait, runnable, ok
}
