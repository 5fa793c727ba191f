// Command switchboard is a single-binary MCP gateway: it serves stdio MCP
// servers over Streamable HTTP and legacy HTTP+SSE, for both protocol eras.
//
//	switchboard serve --config FILE [--listen ADDR]
//	switchboard check --config FILE
//	switchboard relay --url URL [--transport auto|http|sse] [--header 'Name: value']... [--log FILE] [--debug]
//	switchboard agentcore [--contract mcp|http|both] [--mcp-listen ADDR] [--http-listen ADDR] [-- argv...]
//	switchboard auth login|status|logout [DEST] [--config FILE]
//	switchboard pin [--config FILE] [--destination NAME] [--approve [tool...]]
//	switchboard health [--url URL]
//	switchboard version
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/router"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/upstream/stdio"
)

const usage = `usage:
  switchboard serve --config FILE [--listen ADDR]   run the gateway
        [--host HOST] [--port N] [--stdio [--namespace NAME] [--client NAME]] [--no-reload] [--reload-interval D]
        [--log] [--log-format text|json] [--cpuprofile FILE]
  switchboard check --config FILE [--explain-access]
                                                    validate a config (every error at once); warn about
                                                    grants wider or narrower than written; print what
                                                    each client can reach
  switchboard relay --url URL | --agentcore-arn ARN a stdio MCP server that forwards to a remote one
        [--transport auto|http|sse] [--header 'Name: value']... [--log FILE] [--debug] [--reconnect D]
        [--sigv4] [--aws-service NAME] [--aws-region REGION] [--aws-profile NAME]
        [--assume-role-arn ARN] [--role-session-name NAME] [--qualifier NAME] [--session-mode MODE]
        [--oauth] [--login] [--oauth-grant GRANT] [--oauth-client-id ID] [--oauth-client-secret S]
        [--oauth-client-key FILE] [--oauth-client-metadata-url URL] [--oauth-redirect-url URL] [--oauth-state-dir DIR]
        [--oauth-token-store file|keyring]
  switchboard agentcore [-- argv...]                inside an AgentCore Runtime container: serve a stdio
                                                    server (argv or MCP_SERVER_CMD) on /mcp and /invocations
        [--contract mcp|http|both] [--mcp-listen ADDR] [--http-listen ADDR] [--cwd DIR]
        [--pass-env NAME]... [--log-level LEVEL] [--log-format text|json] [--timeout D]
  switchboard auth login DEST [--config FILE] [--no-browser]
                                                    log in to an oauth destination's server, store its tokens
  switchboard auth status [DEST...] | logout DEST   [--config FILE] its login's state / forget its tokens
  switchboard pin --config FILE [--destination NAME] [--timeout D]
                                                    list each pinned destination's tools that changed
                                                    or are new since approved (guards), with the diff
        [--approve [TOOL...]]                       approve what the servers list now (all, or TOOLs)
  switchboard health [--url URL] [--timeout D]      exit 0 if the gateway answers /health (container health checks)
  switchboard version                               print the version, commit, build date and Go version
  switchboard COMMAND -h                            what each flag of COMMAND means

environment (a flag wins over its variable, a variable over the config file):
  DESTINATIONS_CONFIG=FILE          the config file when --config is not given
  SECRETS_CONFIG=FILE               the secrets file (instead of secrets_file / secrets.yml beside the config)
  LOG_FILE=FILE                     the log file (log.file); --log logs to stderr instead
  LOG_FORMAT=text|json              the log's format (--log-format); text leaves out the time on the journal
  STDIO_RESPONSE_TIMEOUT_SECS=N     per-request timeout in seconds (timeout); 0 disables it
  MAX_STDIO_CONNECTIONS=N           sessions per destination (max_sessions)
  AUDIT_LOG_BODIES=1                log request and response bodies in the audit log (audit.log_bodies)
  GOMAXPROCS=N                      CPUs Switchboard's Go runtime uses at once (default: half of them, at least one)
`

func main() {
	// First: in the reaper process (see internal/upstream/stdio) this runs it and
	// exits; here it lets children be killed even if Switchboard is SIGKILLed.
	stdio.ReaperMain()
	// In a code-mode worker (internal/sandbox starts them) this runs the
	// worker and exits. Workers are marked by their environment, not by a
	// command, so none shows in the usage.
	sandbox.WorkerMain()
	setMaxProcs()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// setMaxProcs leaves half the CPUs Go would use (at least one) to the
// processes beside Switchboard, unless GOMAXPROCS is set. Switchboard
// shares its machine with the MCP servers it runs, and often with the
// client: with a processor per CPU the runtime wakes idle threads to look
// for work on every hand-off, CPU the servers and the client then lack
// (measured in docs/performance.md).
func setMaxProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)/2))
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
		return runRelay(args[1:], os.Stdin, stdout, stderr)
	case "agentcore":
		return runAgentCore(args[1:], stderr)
	case "health":
		return health(args[1:], stdout, stderr)
	case "auth":
		return runAuth(args[1:], stdout, stderr)
	case "pin":
		return pin(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fs := flag.NewFlagSet("version", flag.ContinueOnError)
		fs.SetOutput(stderr)
		if err := fs.Parse(args[1:]); err != nil || noArgs(fs, stderr) != nil {
			return 2
		}
		fmt.Fprintln(stdout, "switchboard", buildinfo.Read())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "switchboard: unknown command %q\n%s", args[0], usage)
	return 2
}

// noArgs reports (and returns an error for) arguments left after a
// subcommand's flags: the flag package stops at the first one, so a flag
// written after it ("serve x --bogus") would otherwise go unnoticed.
func noArgs(fs *flag.FlagSet, stderr io.Writer) error {
	if fs.NArg() == 0 {
		return nil
	}
	err := fmt.Errorf("switchboard %s: unexpected argument %q", fs.Name(), fs.Arg(0))
	fmt.Fprintln(stderr, err)
	return err
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (YAML)")
	listen := fs.String("listen", "", "listen address, overriding the config's listen")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file (for performance work)")
	stdio := fs.Bool("stdio", false, "serve one MCP server on stdin/stdout aggregating the configured servers (no HTTP listener)")
	namespace := fs.String("namespace", "", "with --stdio: the namespace or group to serve (default: the default view)")
	client := fs.String("client", "", "with --stdio: serve as this configured client (its grants, tool rules and rate limit apply)")
	noReload := fs.Bool("no-reload", false, "do not watch the config file (SIGHUP still reloads)")
	reloadInterval := time.Second
	fs.Func("reload-interval", "how often the config file is checked for changes: a duration (1s) or seconds (1.0, as MCProxy took it)", func(v string) error {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			reloadInterval = d
			return nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return fmt.Errorf("want a positive duration or number of seconds, not %q", v)
		}
		reloadInterval = time.Duration(f * float64(time.Second))
		return nil
	})
	port := fs.Int("port", 0, "listen port, replacing the port of listen (MCProxy alias)")
	host := fs.String("host", "", "listen host, replacing the host of listen (MCProxy alias)")
	logConsole := fs.Bool("log", false, "log to stderr even if the config names a log file (MCProxy alias)")
	logFormatFlag := fs.String("log-format", "", "text or json (default LOG_FORMAT, else text)")
	if err := fs.Parse(args); err != nil || noArgs(fs, stderr) != nil {
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return code
	}
	format, err := logFormat(*logFormatFlag)
	if err != nil {
		return fail(2, err)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fail(1, err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(1, err)
		}
		defer pprof.StopCPUProfile()
	}
	if *cfgPath = configPath("serve", *cfgPath, stderr); *cfgPath == "" {
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return fail(1, err)
	}
	if *logConsole {
		cfg.Log.File = ""
	}
	addr, err := listenAddr(cfg.Listen, *listen, *host, *port)
	if err != nil {
		return fail(2, err)
	}
	logW, logFile, err := openLog(cfg.Log.File)
	if err != nil {
		return fail(1, fmt.Errorf("log file: %w", err))
	}
	if logFile != nil {
		defer logFile.Close()
	}
	log := newLogger(logW, format, logLevel(cfg.Log.Level), logFile == nil && onJournal())
	slog.SetDefault(log) // for the packages that log without a logger of their own (internal/upstream/stdio's reaper)
	g, err := gateway.New(cfg, gateway.Options{Logger: log, ConfigPath: *cfgPath, NoReload: *noReload, ReloadInterval: reloadInterval, StdioClient: *client})
	if err != nil {
		return fail(1, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				_ = g.ReloadFile() // errors are logged; the old config keeps serving
			case <-ctx.Done():
				return
			}
		}
	}()
	if *stdio {
		err = g.ServeStdio(ctx, *namespace, os.Stdin, os.Stdout)
	} else {
		err = g.Run(ctx, addr)
	}
	if err != nil {
		return fail(1, err)
	}
	return 0
}

// configPath is the --config flag's path, else DESTINATIONS_CONFIG
// (mithril-proxy's variable); "" after telling stderr that neither is set.
func configPath(cmd, path string, stderr io.Writer) string {
	if path = cmp.Or(path, os.Getenv("DESTINATIONS_CONFIG")); path == "" {
		fmt.Fprintf(stderr, "switchboard %s: --config is required (or set DESTINATIONS_CONFIG)\n", cmd)
	}
	return path
}

// listenAddr applies --listen, then --host and --port, to the config's
// listen address.
func listenAddr(cfgListen, listen, host string, port int) (string, error) {
	addr := cmp.Or(listen, cfgListen)
	if host == "" && port == 0 {
		return addr, nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host != "" {
		h = host
	}
	if port != 0 {
		if port < 1 || port > 65535 {
			return "", fmt.Errorf("--port %d is out of range", port)
		}
		p = strconv.Itoa(port)
	}
	return net.JoinHostPort(h, p), nil
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (YAML)")
	explain := fs.Bool("explain-access", false, "print, per client, what it can reach (destinations, views, tool rules, rate limit)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 || (fs.NArg() == 1 && *cfgPath != "") {
		fmt.Fprintf(stderr, "switchboard check: unexpected argument %q\n", fs.Arg(fs.NArg()-1))
		return 2
	}
	if *cfgPath == "" && fs.NArg() == 1 {
		*cfgPath = fs.Arg(0)
	}
	if *cfgPath = configPath("check", *cfgPath, stderr); *cfgPath == "" {
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err) // config.Errors: one line per error
		var errs config.Errors
		if errors.As(err, &errs) {
			fmt.Fprintf(stderr, "%s: %d error(s)\n", *cfgPath, len(errs))
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d destinations)\n", *cfgPath, len(cfg.Destinations))
	for _, w := range cfg.Warnings { // file:line: warning: …
		fmt.Fprintln(stderr, w)
	}
	members := router.Members(gateway.RouterLayout(cfg))
	for _, w := range policy.Warnings(gateway.PolicySetup(cfg), members) {
		fmt.Fprintf(stderr, "%s: warning: %s\n", *cfgPath, w)
	}
	oauthNotes(cfg, stdout, stderr)
	if *explain {
		fmt.Fprintln(stdout)
		policy.Explain(stdout, gateway.PolicySetup(cfg), members)
	}
	return 0
}
