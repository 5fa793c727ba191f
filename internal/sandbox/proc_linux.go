package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// workerProcAttr: a worker dies with the gateway (its stdin's EOF ends an
// idle one; this ends a busy one).
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// lowerPriority sets every thread of the process to nice (Linux's
// niceness is per thread; threads started later inherit it from the
// thread that starts them).
func lowerPriority(nice int) {
	for range 2 { // a thread started during the first pass
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, nice)
			return
		}
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
			}
		}
	}
}

// limitSelf bounds the worker for one script: its address space to its
// size now plus addressSpace(l.Memory) (RLIMIT_AS: an allocation past it
// fails, and the Go runtime ends the process), and its CPU time to what it
// used plus cpuSeconds(l.Timeout) (RLIMIT_CPU, soft = hard: SIGKILL).
func limitSelf(l Limits) error {
	size, err := vmSize()
	if err != nil {
		return err
	}
	as := uint64(size + addressSpace(l.Memory))
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
		return fmt.Errorf("RLIMIT_AS: %w", err)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	cpu := uint64((used + cpuSeconds(l.Timeout) + time.Second - 1) / time.Second)
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu}); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	return nil
}

// vmSize is the process's address space in bytes (VmSize).
func vmSize() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmSize in /proc/self/status")
}
