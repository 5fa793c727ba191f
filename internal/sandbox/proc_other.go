//go:build !linux

package sandbox

import "syscall"

// Outside Linux a worker still keeps a script's crash out of the gateway,
// and is killed at its timeout; its memory is bounded by the heap
// watchdog alone, and its priority is not lowered.
func workerProcAttr() *syscall.SysProcAttr { return nil }

func lowerPriority(int) {}

func limitSelf(Limits) error { return nil }

func cpuLimitExits() {}
