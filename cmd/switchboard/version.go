package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by release builds (scripts/release.sh):
//
//	go build -ldflags "-X main.buildVersion=v1.2.3 -X main.buildCommit=abc123 -X main.buildDate=2026-11-24T13:00:00Z"
//
// Without them, what the go command recorded in the binary is used: the
// module version and the VCS revision, time and modified flag.
var buildVersion, buildCommit, buildDate string

// build describes this binary.
type build struct {
	Version, Commit, Date, Go, Platform string
	Modified                            bool
}

// buildInfo is the ldflags values, else the go command's build info.
func buildInfo() build {
	b := build{Version: buildVersion, Commit: buildCommit, Date: buildDate,
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
				if buildCommit == "" {
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

// String is the line `switchboard version` prints after "switchboard ":
//
//	v1.2.3 (commit 0123456789ab, built 2026-11-24T13:00:00Z, go1.26.8 linux/arm64)
func (b build) String() string {
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
