//go:build unix

package connlimit

import "syscall"

// DefaultMax is min(1024, ¾ of the descriptor limit): the quarter
// left is for children's pipes, upstream connections, log files, and the
// one extra connection accepted at the cap.
func DefaultMax() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<20 {
		return 1024
	}
	return max(8, min(1024, int(rl.Cur*3/4)))
}
