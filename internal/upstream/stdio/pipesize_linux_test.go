package stdio

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fGetPipeSz is fcntl's F_GETPIPE_SZ.
const fGetPipeSz = 1032

// pipeCap returns the capacity of the pipe f is an end of.
func pipeCap(t *testing.T, f syscall.Conn) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := -1
	_ = rc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSz, 0)
		if e == 0 {
			n = int(r)
		}
	})
	return n
}

// The child's stdin and stdout pipes hold a large message whole (1 MiB,
// or what /proc/sys/fs/pipe-max-size allows), not the default 64 KiB.
func TestPipeSize(t *testing.T) {
	want := pipeSize
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if m, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && m < want {
			want = m
		}
	}
	r := &rec{}
	p := start(t, spec(t, "echo"), r)
	in, ok := p.stdin.(syscall.Conn)
	if !ok {
		t.Fatalf("stdin %T is not a syscall.Conn", p.stdin)
	}
	if got := pipeCap(t, in); got < want {
		t.Errorf("stdin pipe holds %d bytes, want %d", got, want)
	}
	if got := pipeCap(t, p.stdout); got < want {
		t.Errorf("stdout pipe holds %d bytes, want %d", got, want)
	}
}
