// Command switchboard is a single-binary MCP gateway: it serves stdio MCP
// servers over Streamable HTTP and legacy HTTP+SSE, for both protocol eras.
//
//	switchboard serve --config FILE [--listen ADDR]
//	switchboard check --config FILE
//	switchboard relay --url URL [--transport auto|http|sse] [--header 'Name: value']... [--log FILE] [--debug]
//	switchboard version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

const usage = `usage:
  switchboard serve --config FILE [--listen ADDR]   run the gateway
  switchboard check --config FILE                   validate a config (every error at once)
  switchboard relay --url URL [--transport auto|http|sse] [--header 'Name: value']... [--log FILE] [--debug]
                                                    a stdio MCP server that forwards to a remote one
  switchboard version                               print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process exit, so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "relay":
		if relayCmd == nil {
			fmt.Fprintln(stderr, "switchboard: relay is not built in")
			return 2
		}
		return relayCmd(args[1:], os.Stdin, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "switchboard", version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "switchboard: unknown command %q\n%s", args[0], usage)
	return 2
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (YAML)")
	listen := fs.String("listen", "", "listen address, overriding the config's listen")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file (for performance work)")
	stdio := fs.Bool("stdio", false, "serve one MCP server on stdin/stdout aggregating the configured servers (no HTTP listener)")
	namespace := fs.String("namespace", "", "with --stdio: the namespace or group to serve (default: the default view)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "switchboard: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "switchboard: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "switchboard serve: --config is required")
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return 1
	}
	g, err := gateway.New(cfg, gateway.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *stdio {
		if err := g.ServeStdio(ctx, *namespace, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(stderr, "switchboard: %v\n", err)
			return 1
		}
		return 0
	}
	if err := g.Run(ctx, *listen); err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return 1
	}
	return 0
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (YAML)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cfgPath == "" && fs.NArg() == 1 {
		*cfgPath = fs.Arg(0)
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "switchboard check: --config is required")
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintln(stderr, e)
			}
			fmt.Fprintf(stderr, "%s: %d error(s)\n", *cfgPath, len(errs))
		} else {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d destinations)\n", *cfgPath, len(cfg.Destinations))
	return 0
}

// relayCmd runs the relay subcommand (relay.go).
var relayCmd func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
