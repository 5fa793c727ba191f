package stdio

import "time"

// CPUWait tells how the child's threads stand with the CPU: wait is how
// long they have waited on a run queue for a CPU, summed over its threads,
// since it started (a wait in progress is counted once the thread runs);
// runnable how many of them are runnable now (waiting for a CPU or on
// one). ok is false where the system cannot tell (Linux tells, in
// /proc/PID/task/*/schedstat and stat) and once the child has exited.
// Only the child itself is counted, not the processes it starts (npx's
// node, a venv's interpreter). Upstream's watchdog samples it to tell a
// server that sat on its answer from one whose threads were runnable and
// got no CPU (an overloaded machine); it reads a few small files per
// thread, so it is meant for a few samples a second, not for every call.
func (p *Process) CPUWait() (wait time.Duration, runnable int, ok bool) {
	if p.exited() {
		return 0, 0, false
	}
	return threadsWaited(p.cmd.Process.Pid)
}
