//go:build linux

package gateway

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// dirWatchMask is what the config watcher asks inotify for: a file in a
// watched directory written and closed, created, moved in or out, or
// deleted. Not IN_MODIFY: every write to any file of the directory would
// be an event (a log or audit file kept beside the config: one per
// request, each a read and two goroutine wake-ups), where editors and
// config managers close what they wrote or rename it into place. A writer
// that keeps the config open is seen by the checksum poll.
const dirWatchMask = syscall.IN_CLOSE_WRITE | syscall.IN_CREATE | syscall.IN_MOVED_TO |
	syscall.IN_MOVED_FROM | syscall.IN_DELETE

// watchDirs watches dirs and sends the path of each file event on the
// returned channel ("" when the kernel's queue overflowed: anything may
// have changed). A directory that cannot be watched is reported to failed
// and skipped. stop ends the watch and closes the channel.
func watchDirs(dirs []string, failed func(dir string, err error)) (events <-chan string, stop func(), err error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, nil, os.NewSyscallError("inotify_init1", err)
	}
	byWD := map[int32]string{}
	for _, d := range dirs {
		wd, err := syscall.InotifyAddWatch(fd, d, dirWatchMask)
		if err != nil {
			failed(d, &os.PathError{Op: "inotify_add_watch", Path: d, Err: err})
			continue
		}
		byWD[int32(wd)] = d
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: reads park on the poller, Close ends them
	ch := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		buf := make([]byte, 16<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				end := off + syscall.SizeofInotifyEvent + int(ev.Len)
				if end > n {
					break
				}
				name := ""
				if ev.Mask&syscall.IN_Q_OVERFLOW == 0 {
					raw := buf[off+syscall.SizeofInotifyEvent : end]
					if i := bytes.IndexByte(raw, 0); i >= 0 {
						raw = raw[:i]
					}
					dir, ok := byWD[ev.Wd]
					if !ok || len(raw) == 0 {
						off = end
						continue // the directory itself (IN_IGNORED and such)
					}
					name = filepath.Join(dir, string(raw))
				}
				select {
				case ch <- name:
				case <-done:
					return
				}
				off = end
			}
		}
	}()
	return ch, func() { close(done); f.Close() }, nil
}
