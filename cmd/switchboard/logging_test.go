package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
)

func TestLogFormatFlagAndEnv(t *testing.T) {
	t.Setenv("LOG_FORMAT", "")
	for _, c := range []struct {
		flag, env, want, err string
	}{
		{"", "", "text", ""},
		{"json", "", "json", ""},
		{"", "JSON", "json", ""},
		{"text", "json", "text", ""}, // the flag wins
		{"yaml", "", "", `--log-format "yaml": want text or json`},
		{"", "logfmt", "", `LOG_FORMAT "logfmt": want text or json`},
	} {
		t.Setenv("LOG_FORMAT", c.env)
		got, err := logFormat(c.flag)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("logFormat(%q) with LOG_FORMAT=%q: %q, %v; want %q, %q", c.flag, c.env, got, err, c.want, c.err)
		}
	}
	if code, _, errOut := runCmd("serve", "--config", "x.yaml", "--log-format", "xml"); code != 2 || !strings.Contains(errOut, `--log-format "xml": want text or json`) {
		t.Errorf("serve --log-format xml: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd("agentcore", "--log-format", "xml", "--", "true"); code != 2 || !strings.Contains(errOut, `--log-format "xml": want text or json`) {
		t.Errorf("agentcore --log-format xml: exit %d, %q", code, errOut)
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log := newLogger(&b, "json", slog.LevelInfo, false)
	log.Debug("hidden")
	log.With("destination", "fs").Warn("child exited", "code", 1)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("json log %q: %v", b.String(), err)
	}
	if rec["level"] != "WARN" || rec["msg"] != "child exited" || rec["destination"] != "fs" || rec["code"] != 1.0 || rec["time"] == nil {
		t.Errorf("json record %v", rec)
	}

	// On the journal: no time, a syslog priority first, each level its own.
	b.Reset()
	log = newLogger(&b, "text", slog.LevelDebug, true).With("destination", "fs").WithGroup("g")
	log.Debug("d")
	log.Info("i", "k", "v")
	log.Warn("w")
	log.Error("e")
	want := `<7>level=DEBUG msg=d destination=fs
<6>level=INFO msg=i destination=fs g.k=v
<4>level=WARN msg=w destination=fs
<3>level=ERROR msg=e destination=fs
`
	if b.String() != want {
		t.Errorf("journal log:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	newLogger(&b, "text", slog.LevelWarn, true).Info("hidden")
	if b.Len() != 0 {
		t.Errorf("info logged at level warn: %q", b.String())
	}

	// Not on the journal: slog's text format with the time.
	b.Reset()
	newLogger(&b, "text", slog.LevelInfo, false).Info("hello")
	if !regexp.MustCompile(`^time=\S+ level=INFO msg=hello\n$`).MatchString(b.String()) {
		t.Errorf("text log %q", b.String())
	}
}

// TestServeLogFormats runs the real binary: --log-format json writes JSON
// lines, a stderr that is the journal's stream (JOURNAL_STREAM names its
// device and inode) gets text without the time, and MCProxy's --log sends
// the log to stderr although the config names a file.
func TestServeLogFormats(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "logs", "switchboard.log")
	cfgPath := writeFile(t, "switchboard.yaml", "listen: 127.0.0.1:0\nlog: {file: "+logFile+"}\n"+
		"destinations:\n  quiet:\n    type: stdio\n    command: [sh, -c, 'cat >/dev/null']\n")
	for _, c := range []struct {
		name    string
		args    []string
		journal bool
		want    *regexp.Regexp
	}{
		{"json", []string{"--log-format", "json"}, false, regexp.MustCompile(`^\{"time":"[^"]+","level":"INFO","msg":"switchboard listening","addr":"127\.0\.0\.1:\d+"`)},
		{"journal", nil, true, regexp.MustCompile(`^<6>level=INFO msg="switchboard listening" addr=127\.0\.0\.1:\d+`)},
		{"text", nil, false, regexp.MustCompile(`^time=\S+ level=INFO msg="switchboard listening" addr=127\.0\.0\.1:\d+`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command(bin, append([]string{"serve", "--config", cfgPath, "--log"}, c.args...)...)
			cmd.Env = append(os.Environ(), "LOG_FORMAT=", "JOURNAL_STREAM=")
			if c.journal {
				id, ok := devIno(w)
				if !ok {
					t.Skip("no device and inode for a pipe")
				}
				cmd.Env = append(cmd.Env, "JOURNAL_STREAM="+id)
			}
			cmd.Stderr = w
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
			}()
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(r)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			var got []string
			deadline := time.After(20 * time.Second)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("stderr ended before the listening line:\n%s", strings.Join(got, "\n"))
					}
					got = append(got, l)
					if !strings.Contains(l, "switchboard listening") {
						continue
					}
					if !c.want.MatchString(l) {
						t.Fatalf("listening line %q, want %s", l, c.want)
					}
					if c.name == "json" {
						var rec map[string]any
						if err := json.Unmarshal([]byte(l), &rec); err != nil {
							t.Fatalf("%q: %v", l, err)
						}
					}
					if _, err := os.Stat(logFile); err == nil {
						t.Errorf("--log: the config's log file %s was created", logFile)
					}
					return
				case <-deadline:
					t.Fatalf("no listening line in 20 s:\n%s", strings.Join(got, "\n"))
				}
			}
		})
	}
}

// TestVersionLine: `switchboard version` prints the build as
// internal/buildinfo reads it (its tests cover the format and the linker
// flags).
func TestVersionLine(t *testing.T) {
	code, out, _ := runCmd("version")
	if want := "switchboard " + buildinfo.Read().String() + "\n"; code != 0 || out != want {
		t.Errorf("version: exit %d, %q; want %q", code, out, want)
	}
}
