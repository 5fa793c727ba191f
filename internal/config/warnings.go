package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// warn records what may fail at run time although the configuration is
// valid (Config.Warnings): each stdio command that cannot be started from
// here. Secrets are never part of a warning: a command is no secret (its
// env and headers are not looked at).
func (d *decoder) warn(c *Config) {
	for _, name := range d.order["destinations"] {
		dst, p := c.Destinations[name], d.paths["destinations."+name]
		if dst == nil || dst.Type != TypeStdio || len(dst.Command) == 0 || dst.Command[0] == "" {
			continue
		}
		if msg := commandProblem(dst.Command[0], dst.Cwd); msg != "" {
			w := &posError{file: d.file, line: d.line(p + ".command"), msg: "warning: " + p + ": " + msg}
			c.Warnings = append(c.Warnings, w.Error())
		}
	}
}

// commandProblem says why the program name of a stdio command could not be
// started here, or "" when it could. It resolves as the gateway starts it:
// a name without "/" in PATH (exec.LookPath: Switchboard's own PATH, which
// the child inherits; a PATH in the destination's env does not change where
// the program is found); a path relative to cwd when set, else to the
// working directory.
func commandProblem(name, cwd string) string {
	if !strings.ContainsRune(name, '/') {
		if _, err := exec.LookPath(name); err != nil {
			if errors.Is(err, exec.ErrDot) {
				return fmt.Sprintf("command %q is found only in the current directory (PATH has \".\"); write ./%s", name, name)
			}
			return fmt.Sprintf("command %q is not found in PATH; install it, or write its full path", name)
		}
		return ""
	}
	path := name
	if !filepath.IsAbs(path) && cwd != "" {
		path = filepath.Join(cwd, path)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("command %q does not exist", name)
	case err != nil:
		return fmt.Sprintf("command %q: %v", name, errors.Unwrap(err))
	case fi.IsDir():
		return fmt.Sprintf("command %q is a directory, not a program", name)
	case fi.Mode()&0o111 == 0:
		return fmt.Sprintf("command %q is not executable (chmod +x %s)", name, name)
	}
	return ""
}
