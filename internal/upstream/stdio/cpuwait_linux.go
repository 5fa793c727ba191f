package stdio

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// threadsWaited sums the run-queue wait of process pid's threads: the
// second field of /proc/PID/task/TID/schedstat (nanoseconds). A thread
// that ended takes its share with it, so the sum can go down; ok is false
// when no thread could be read.
func threadsWaited(pid int) (time.Duration, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var sum int64
	read := false
	for _, e := range ents {
		b, err := os.ReadFile(dir + e.Name() + "/schedstat")
		if err != nil {
			continue // a thread that just ended
		}
		f := bytes.Fields(b)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
			sum += v
			read = true
		}
	}
	return time.Duration(sum), read
}
