package gateway

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestWatchDirs: the config watcher hears a file written and closed,
// renamed in, and removed, and (on Linux) not the lines appended to a log
// kept open beside the config: one event per request would wake it.
func TestWatchDirs(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "switchboard.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	events, stop, err := watchDirs([]string{dir, filepath.Join(other, "missing")}, func(d string, err error) {
		if d != filepath.Join(other, "missing") {
			t.Errorf("watch of %s failed: %v", d, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want string) {
		t.Helper()
		for {
			select {
			case got, ok := <-events:
				if !ok {
					t.Fatalf("events closed, want %s", want)
				}
				if got == filepath.Join(dir, "switchboard.log") && runtime.GOOS != "linux" {
					continue // fsnotify reports every write
				}
				if got != want {
					t.Fatalf("event for %q, want %q", got, want)
				}
				return
			case <-time.After(10 * time.Second):
				t.Fatalf("no event for %s", want)
			}
		}
	}
	for i := 0; i < 100; i++ {
		if _, err := logf.WriteString("an audit line\n"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "cfg.yaml")
	if err := os.WriteFile(cfg, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	next(cfg) // created, then closed after writing: the first is enough
	for {     // the rest of the write's events, if any
		if got := <-events; got == cfg {
			break
		}
	}
	tmp := filepath.Join(other, "new.yaml")
	if err := os.WriteFile(tmp, []byte("a: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	next(cfg)
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	next(cfg)
	stop()
	for range events { // closed after stop
	}
}
