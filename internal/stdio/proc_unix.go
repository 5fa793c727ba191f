//go:build unix && !linux

package stdio

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// pipeWaiting cannot tell here: -1 (see proc_linux.go).
func pipeWaiting(*os.File) int { return -1 }
