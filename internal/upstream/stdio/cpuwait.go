package stdio

import "time"

// CPUWait returns how long the child's threads have waited on a run queue
// for a CPU, summed over its threads, since it started: ok is false where
// the system cannot tell (Linux tells, in /proc/PID/task/*/schedstat) and
// once the child has exited. Only the child itself is counted, not the
// processes it starts (npx's node, a venv's interpreter). Upstream's
// watchdog compares it over a held call's wait to tell a server that sat
// on its answer from one whose threads were runnable and got no CPU (an
// overloaded machine); it reads a few small files, so it is meant for a
// few samples a second, not for every call.
func (p *Process) CPUWait() (wait time.Duration, ok bool) {
	select {
	case <-p.done:
		return 0, false
	default:
	}
	return threadsWaited(p.cmd.Process.Pid)
}
