//go:build windows

package stdio

import (
	"sync"
	"syscall"
	"unsafe"
)

// On Windows a child's "process group" is a job object. Start puts each
// child in a job of its own (register), killGroup with SIGKILL terminates
// the job (the child and everything it started that stayed in the job), and
// the job is created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when
// Switchboard exits, however it exits, the kernel closes its handles and
// the jobs' processes die with it. That is what the reaper process does on
// Unix, so there is no reaper here and ReaperMain does nothing.
//
// Windows has no SIGTERM for a process without a console window: killGroup
// ignores it, so Close goes stdin EOF, then (after two grace periods)
// TerminateJobObject. A process the child starts with
// CREATE_BREAKAWAY_FROM_JOB is out of reach, as a setsid grandchild is on
// Unix.

// ReaperMain has nothing to do on Windows (see above); it is here so that
// main is the same on every system.
func ReaperMain() {}

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

var (
	kernel32                     = syscall.NewLazyDLL("kernel32.dll")
	procCreateJobObjectW         = kernel32.NewProc("CreateJobObjectW")
	procSetInformationJobObject  = kernel32.NewProc("SetInformationJobObject")
	procAssignProcessToJobObject = kernel32.NewProc("AssignProcessToJobObject")
	procTerminateJobObject       = kernel32.NewProc("TerminateJobObject")
)

const (
	processSetQuota                   = 0x0100
	processTerminate                  = 0x0001
	jobObjectExtendedLimitInformation = 9
	jobObjectLimitKillOnJobClose      = 0x2000
	exitCodeKilled                    = 1
)

// jobBasicLimit is JOBOBJECT_BASIC_LIMIT_INFORMATION.
type jobBasicLimit struct {
	PerProcessUserTimeLimit int64
	PerJobUserTimeLimit     int64
	LimitFlags              uint32
	MinimumWorkingSetSize   uintptr
	MaximumWorkingSetSize   uintptr
	ActiveProcessLimit      uint32
	Affinity                uintptr
	PriorityClass           uint32
	SchedulingClass         uint32
}

// jobExtendedLimit is JOBOBJECT_EXTENDED_LIMIT_INFORMATION.
type jobExtendedLimit struct {
	BasicLimitInformation jobBasicLimit
	IoInfo                [6]uint64 // IO_COUNTERS
	ProcessMemoryLimit    uintptr
	JobMemoryLimit        uintptr
	PeakProcessMemoryUsed uintptr
	PeakJobMemoryUsed     uintptr
}

// job is one child's job object and a handle on the child itself (held
// until unregister, so its pid cannot be reused by another process while
// killGroup may still name it).
type job struct {
	job  syscall.Handle // 0 when the job could not be set up
	proc syscall.Handle
}

// jobs is this process's side of the children's jobs.
type jobs struct {
	mu   sync.Mutex
	byID map[int]job // guarded by mu, by child pid
}

// reap holds the jobs (the name matches the Unix reaper's client).
var reap jobs

// prepare does nothing: a job is made per child in register, and there is
// no reaper process to start first.
func (j *jobs) prepare() {}

// register puts the new child pid in a job of its own.
func (j *jobs) register(pid int) {
	proc, err := syscall.OpenProcess(processSetQuota|processTerminate, false, uint32(pid))
	if err != nil {
		return // killGroup finds nothing to kill; Close still closes stdin
	}
	e := job{proc: proc}
	if h, _, _ := procCreateJobObjectW.Call(0, 0); h != 0 {
		info := jobExtendedLimit{}
		info.BasicLimitInformation.LimitFlags = jobObjectLimitKillOnJobClose
		ok, _, _ := procSetInformationJobObject.Call(h, jobObjectExtendedLimitInformation,
			uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info))
		if ok != 0 {
			ok, _, _ = procAssignProcessToJobObject.Call(h, uintptr(proc))
		}
		if ok != 0 {
			e.job = syscall.Handle(h)
		} else {
			_ = syscall.CloseHandle(syscall.Handle(h))
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.byID == nil {
		j.byID = map[int]job{}
	}
	j.byID[pid] = e
}

// unregister closes the child's job (ending what is left in it) and its
// handle; the child has been reaped.
func (j *jobs) unregister(pid int) {
	j.mu.Lock() // held while closing: killGroup never uses a closed handle
	defer j.mu.Unlock()
	e, ok := j.byID[pid]
	delete(j.byID, pid)
	if !ok {
		return
	}
	if e.job != 0 {
		_ = syscall.CloseHandle(e.job)
	}
	_ = syscall.CloseHandle(e.proc)
}

// killGroup terminates the child's job on SIGKILL (the child alone if it
// has no job); other signals have no Windows equivalent and are ignored.
func killGroup(pid int, sig syscall.Signal) {
	if sig != syscall.SIGKILL {
		return
	}
	reap.mu.Lock()
	defer reap.mu.Unlock()
	e, ok := reap.byID[pid]
	if !ok {
		return
	}
	if e.job != 0 {
		_, _, _ = procTerminateJobObject.Call(uintptr(e.job), exitCodeKilled)
		return
	}
	_ = syscall.TerminateProcess(e.proc, exitCodeKilled)
}

// pipeWaiting cannot tell here: -1 (see proc_linux.go).
func pipeWaiting(syscall.Conn) int { return -1 }

// growPipe does nothing here: pipes have the system's size (see
// proc_linux.go).
func growPipe(any) {}
