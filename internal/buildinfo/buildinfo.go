// Package buildinfo says which build of Switchboard this is: the version,
// commit and build date that release builds stamp in with the linker, else
// what the go command recorded in the binary. `switchboard version`,
// /health, the status page, the metrics and the serverInfo of merged
// endpoints all read it, so they agree.
//
// Release builds (scripts/release.sh, the Containerfiles, deploy/install.sh)
// set, with Pkg as below:
//
//	go build -ldflags "-X $Pkg.version=v1.2.3 -X $Pkg.commit=abc123 -X $Pkg.date=2026-11-24T13:00:00Z"
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Pkg is this package's import path, the prefix of its -X linker flags.
const Pkg = "github.com/switchboard-mcp/switchboard/internal/buildinfo"

// Set by the linker (-X); "" means not stamped.
var version, commit, date string

// Build describes a binary. Zero fields are unknown.
type Build struct {
	Version  string // "(devel)" when neither stamped nor recorded
	Commit   string // VCS revision
	Date     string // build or commit time, RFC 3339
	Go       string // Go version
	Platform string // GOOS/GOARCH
	Modified bool   // built from a work tree with uncommitted changes
}

// Read returns this binary's build: the linker's values, else the go
// command's build info.
func Read() Build {
	return read(version, commit, date)
}

func read(version, commit, date string) Build {
	b := Build{Version: version, Commit: commit, Date: date,
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			b.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			case "vcs.modified":
				if commit == "" {
					b.Modified = s.Value == "true"
				}
			}
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	return b
}

// Version is Read().Version.
func Version() string { return Read().Version }

// String is the line `switchboard version` prints after "switchboard ":
//
//	v1.2.3 (commit 0123456789ab, built 2026-11-24T13:00:00Z, go1.26.8 linux/arm64)
func (b Build) String() string {
	var parts []string
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if b.Modified {
			c += "-dirty"
		}
		parts = append(parts, "commit "+c)
	}
	if b.Date != "" {
		parts = append(parts, "built "+b.Date)
	}
	parts = append(parts, b.Go+" "+b.Platform)
	return fmt.Sprintf("%s (%s)", b.Version, strings.Join(parts, ", "))
}
