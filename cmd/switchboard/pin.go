package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/guard"
)

// pin lists, per destination with pinning on, its tools' standing against
// the pin file (approved, changed with the diff, new, removed), and with
// --approve records what the servers list now as approved (all, or the
// tools named). A running gateway watches the pin file and applies it.
func pin(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (YAML)")
	dest := fs.String("destination", "", "only this destination (default: every destination with pinning on)")
	approve := fs.Bool("approve", false, "approve what the servers list now: every tool and the instructions, or only the tools named after the flags (\"instructions\" names the instructions)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for each server's listing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tools := fs.Args()
	if len(tools) > 0 && !*approve {
		fmt.Fprintf(stderr, "switchboard pin: tool names go with --approve (got %q)\n", tools[0])
		return 2
	}
	if len(tools) > 0 && *dest == "" {
		fmt.Fprintln(stderr, "switchboard pin: approving named tools needs --destination")
		return 2
	}
	if *cfgPath = configPath("pin", *cfgPath, stderr); *cfgPath == "" {
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return 1
	}
	path := guard.PinPath(*cfgPath)
	if cfg.Guards != nil && cfg.Guards.Pins != "" {
		path = cfg.Guards.Pins
	}
	var names []string
	for _, n := range cfg.Names {
		if n == *dest || *dest == "" && cfg.Guards.For(n).Pinning != config.GuardOff {
			names = append(names, n)
		}
	}
	if *dest != "" && len(names) == 0 {
		fmt.Fprintf(stderr, "switchboard pin: no destination named %q\n", *dest)
		return 2
	}
	if len(names) == 0 {
		fmt.Fprintln(stdout, "no destination has pinning on (guards.defaults.pinning or guards.destinations.NAME.pinning)")
		return 0
	}
	pf, err := guard.LoadPins(path)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard pin: %v\n", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	failed := false
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		l, err := gateway.ListTools(ctx, cfg, name, log)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "%s: cannot list its tools: %v\n", name, err)
			failed = true
			continue
		}
		var defs []guard.Definition
		for _, t := range l.Tools {
			d, err := guard.Define(t)
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v (left out)\n", name, err)
				continue
			}
			defs = append(defs, d)
		}
		sp := pf.Server(name)
		c := guard.Compare(defs, l.Instructions, *sp)
		printComparison(stdout, name, c)
		if *approve {
			guard.Approve(sp, defs, l.Instructions, time.Now(), tools...)
			fmt.Fprintf(stdout, "%s: approved %d tool(s)\n", name, cmp.Or(len(tools), len(defs)))
		}
	}
	if *approve {
		if err := guard.SavePins(path, pf); err != nil {
			fmt.Fprintf(stderr, "switchboard pin: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	if failed {
		return 1
	}
	return 0
}

// printComparison prints one destination's standing: a summary line, then
// each tool that is not approved, with its diff.
func printComparison(w io.Writer, name string, c guard.Comparison) {
	count := map[guard.Status]int{}
	for _, t := range c.Tools {
		count[t.Status]++
	}
	fmt.Fprintf(w, "%s: %d approved, %d changed, %d new, %d removed", name,
		count[guard.Approved], count[guard.Changed], count[guard.New], count[guard.Removed])
	if c.Instructions != "" && c.Instructions != guard.Approved {
		fmt.Fprintf(w, "; instructions %s", c.Instructions)
	}
	fmt.Fprintln(w)
	for _, t := range c.Tools {
		if t.Status == guard.Approved {
			continue
		}
		fmt.Fprintf(w, "  %-8s %s\n", t.Status, t.Name)
		printDiff(w, t.Diff)
	}
	if c.Instructions == guard.Changed {
		printDiff(w, c.InstructionsDiff)
	}
}

// printDiff prints the non-empty lines of diff, indented under the tool.
func printDiff(w io.Writer, diff string) {
	for l := range strings.Lines(diff) {
		if l = strings.TrimSuffix(l, "\n"); l != "" {
			fmt.Fprintf(w, "           %s\n", l)
		}
	}
}
