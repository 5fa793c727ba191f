//go:build unix && !linux

package stdio

import (
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// pipeWaiting cannot tell here: -1 (see proc_linux.go).
func pipeWaiting(syscall.Conn) int { return -1 }

// growPipe does nothing here: pipes have the system's size (see
// proc_linux.go).
func growPipe(any) {}
