package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
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

// lowerPriority adds nice to the niceness of every thread of the process
// (at most 19; Linux's niceness is per thread, and threads started later
// inherit it from the thread that starts them). The worker starts with the
// gateway's niceness, so it always runs below the gateway.
func lowerPriority(nice int) {
	if raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil {
		nice += 20 - raw // the system call answers 20 - niceness
	}
	nice = min(nice, 19)
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
// used plus cpuSeconds(l.Timeout) (RLIMIT_CPU: SIGXCPU, see
// cpuLimitExits). Only the soft limits are set, so that the next script's
// can be higher.
func limitSelf(l Limits) error {
	size, err := vmSize()
	if err != nil {
		return err
	}
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &cur); err != nil {
		return fmt.Errorf("RLIMIT_AS: %w", err)
	}
	as := min(uint64(size+addressSpace(l.Memory)), cur.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: cur.Max}); err != nil {
		return fmt.Errorf("RLIMIT_AS: %w", err)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if err := syscall.Getrlimit(syscall.RLIMIT_CPU, &cur); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	cpu := min(uint64((used+cpuSeconds(l.Timeout)+time.Second-1)/time.Second), cur.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cur.Max}); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	return nil
}

// cpuLimitExits ends the worker at its CPU time limit (SIGXCPU, which the
// Go runtime otherwise ignores), saying so for the gateway.
func cpuLimitExits() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGXCPU)
	go func() { // ends with the process
		<-ch
		fmt.Fprintln(os.Stderr, cpuLimitText)
		os.Exit(3)
	}()
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
