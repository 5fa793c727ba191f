package buildinfo

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestStampedValuesWin(t *testing.T) {
	b := read("v9.9.9", "feedfacecafebeef0123", "2026-01-02T03:04:05Z")
	want := "v9.9.9 (commit feedfacecafe, built 2026-01-02T03:04:05Z, " + b.Go + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := b.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if b.Modified {
		t.Error("a stamped commit is never marked modified")
	}
}

func TestString(t *testing.T) {
	for _, c := range []struct {
		b    Build
		want string
	}{
		{Build{Version: "v1.2.3", Commit: "0123456789abcdef", Date: "2026-11-24T13:00:00Z", Go: "go1.26.8", Platform: "linux/arm"},
			"v1.2.3 (commit 0123456789ab, built 2026-11-24T13:00:00Z, go1.26.8 linux/arm)"},
		{Build{Version: "(devel)", Commit: "abc", Modified: true, Go: "go1.26.8", Platform: "darwin/arm64"},
			"(devel) (commit abc-dirty, go1.26.8 darwin/arm64)"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

func TestUnstamped(t *testing.T) {
	b := read("", "", "")
	if b.Version == "" {
		t.Error("Version is empty; want the module version or (devel)")
	}
	if !strings.HasPrefix(b.Go, "go") {
		t.Errorf("Go = %q", b.Go)
	}
}

// TestLinkerFlags builds testdata/stamp with the -X flags release builds
// use, so a renamed variable or a wrong Pkg fails here.
func TestLinkerFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "stamp")
	cmd := exec.Command(goCmd, "build", "-o", bin, "-ldflags",
		"-X "+Pkg+".version=v1.2.3 -X "+Pkg+".commit=abc123 -X "+Pkg+".date=2026-11-24T13:00:00Z", "./testdata/stamp")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "v1.2.3 (commit abc123, built 2026-11-24T13:00:00Z, ") {
		t.Errorf("stamped binary says %q", out)
	}
}
