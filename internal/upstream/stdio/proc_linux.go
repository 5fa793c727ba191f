package stdio

import (
	"syscall"
	"unsafe"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// pipeWaiting returns how many bytes wait unread in the pipe f is an end
// of (either end), or -1 if that cannot be told (FIONREAD, which Linux
// calls TIOCINQ).
func pipeWaiting(f syscall.Conn) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = rc.Control(func(fd uintptr) {
		var v int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e == 0 {
			n = int(v)
		}
	})
	return n
}

// fSetPipeSz is fcntl's F_SETPIPE_SZ (Linux 2.6.35).
const fSetPipeSz = 1031

// pipeSize is the capacity asked for the child's stdin and stdout pipes:
// a large message then crosses in a few system calls instead of one per
// 64 KiB (the default), each a wake-up of the other side. The kernel
// takes pages only for bytes waiting in the pipe, and caps the size at
// /proc/sys/fs/pipe-max-size (1 MiB by default) for an unprivileged
// process.
const pipeSize = 1 << 20

// growPipe asks for pipeSize bytes of capacity on the pipe f is an end
// of; a refusal (an older kernel, a lower pipe-max-size) leaves it as it
// was.
func growPipe(f any) {
	c, ok := f.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, pipeSize)
	})
}
