//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// devIno is f's "device:inode", as systemd writes JOURNAL_STREAM.
func devIno(f *os.File) (string, bool) {
	fi, err := f.Stat()
	if err != nil {
		return "", false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), true
}
