package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/switchboard-mcp/switchboard/internal/front/agentruntime"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

const agentcoreUsage = `usage: switchboard agentcore [--contract mcp|http|both] [--mcp-listen ADDR] [--http-listen ADDR]
                           [--cwd DIR] [--pass-env NAME]... [--log-level LEVEL] [--log-format text|json]
                           [--timeout D] [-- argv...]
Runs inside an Amazon Bedrock AgentCore Runtime container and serves one stdio
MCP server (the argv after --, else MCP_SERVER_CMD split like a shell would,
without running one) on the MCP-protocol contract (POST /mcp, 0.0.0.0:8000)
and the HTTP-protocol contract (POST /invocations and GET /ping, 0.0.0.0:8080,
or SERVER_HOST/SERVER_PORT).
Environment: MCP_SERVER_CMD, MCP_SERVER_CWD, LOG_LEVEL (or MCP_PROXY_DEBUG=1),
LOG_FORMAT, SERVER_HOST, SERVER_PORT, MCP_SERVER_PASS_ENV (comma-separated
names passed to the child besides the usual allowlist and every AWS_* variable).
`

// runAgentCore is `switchboard agentcore`.
func runAgentCore(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agentcore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, agentcoreUsage); fs.PrintDefaults() }
	contract := fs.String("contract", "both", "which contract to serve: mcp, http or both")
	mcpListen := fs.String("mcp-listen", "0.0.0.0:8000", "listen address of the MCP-protocol contract (/mcp)")
	httpListen := fs.String("http-listen", "", "listen address of the HTTP-protocol contract (/invocations, /ping); default SERVER_HOST:SERVER_PORT, else 0.0.0.0:8080")
	cwd := fs.String("cwd", os.Getenv("MCP_SERVER_CWD"), "working directory of the server (default MCP_SERVER_CWD)")
	logLevelFlag := fs.String("log-level", "", "debug, info, warn or error (default LOG_LEVEL, else info)")
	logFormatFlag := fs.String("log-format", "", "text or json (default LOG_FORMAT, else text)")
	timeout := fs.Duration("timeout", 0, "bound on each forwarded request (default 15m; negative: none)")
	var passEnv headerFlags
	fs.Var(&passEnv, "pass-env", "an environment variable the server inherits besides the allowlist and AWS_* (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "switchboard agentcore: "+format+"\n", a...)
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		line := os.Getenv("MCP_SERVER_CMD")
		if strings.TrimSpace(line) == "" {
			return fail(2, "no server command: set MCP_SERVER_CMD or give the argv after --")
		}
		var err error
		if argv, err = agentruntime.SplitCommand(line); err != nil {
			return fail(2, "MCP_SERVER_CMD: %v", err)
		}
	}
	if !slices.Contains([]string{"mcp", "http", "both"}, *contract) {
		return fail(2, "--contract %q: want mcp, http or both", *contract)
	}
	serveMCP, serveHTTP := *contract != "http", *contract != "mcp"
	*httpListen = cmp.Or(*httpListen, net.JoinHostPort(cmp.Or(os.Getenv("SERVER_HOST"), "0.0.0.0"), cmp.Or(os.Getenv("SERVER_PORT"), "8080")))
	level, err := agentcoreLogLevel(*logLevelFlag)
	if err != nil {
		return fail(2, "%v", err)
	}
	format, err := logFormat(*logFormatFlag)
	if err != nil {
		return fail(2, "%v", err)
	}
	names := append([]string(nil), passEnv...)
	for _, n := range strings.Split(os.Getenv("MCP_SERVER_PASS_ENV"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	cfg, err := gateway.AgentCoreConfig(gateway.AgentCore{Command: argv, Cwd: *cwd, Env: agentcoreEnv(os.Environ(), names),
		LogLevel: level, Timeout: *timeout})
	if err != nil {
		return fail(2, "%v", err)
	}
	var mcpLn, httpLn net.Listener
	if serveMCP {
		if mcpLn, err = net.Listen("tcp", *mcpListen); err != nil {
			return fail(1, "%v", err)
		}
		defer mcpLn.Close()
	}
	if serveHTTP {
		if httpLn, err = net.Listen("tcp", *httpListen); err != nil {
			return fail(1, "%v", err)
		}
		defer httpLn.Close()
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: newLogger(os.Stderr, format, logLevel(cfg.Log.Level), onJournal())})
	if err != nil {
		return fail(1, "%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := g.ServeAgentCore(ctx, mcpLn, httpLn); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

// agentcoreLogLevel maps --log-level, else LOG_LEVEL (Python's names too:
// DEBUG, WARNING, CRITICAL), else MCP_PROXY_DEBUG=1, to a gateway level.
func agentcoreLogLevel(flagValue string) (string, error) {
	v, from := flagValue, "--log-level"
	if v == "" {
		v, from = os.Getenv("LOG_LEVEL"), "LOG_LEVEL"
	}
	if v == "" && os.Getenv("MCP_PROXY_DEBUG") == "1" {
		return "debug", nil
	}
	if l, ok := agentcoreLevels[strings.ToLower(strings.TrimSpace(v))]; ok {
		return l, nil
	}
	return "", fmt.Errorf("%s %q: want debug, info, warn or error", from, v)
}

// agentcoreLevels maps the level names taken, lower-cased, to the gateway's.
var agentcoreLevels = map[string]string{"": "info", "debug": "debug", "trace": "debug", "info": "info",
	"warn": "warn", "warning": "warn", "error": "error", "critical": "error", "fatal": "error"}

// agentcoreEnv picks what the child gets on top of the stdio allowlist:
// every AWS_* variable (the runtime role's credentials and region, which a
// server in an AgentCore container needs to reach AWS) and the named ones.
func agentcoreEnv(environ, names []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && (strings.HasPrefix(k, "AWS_") || slices.Contains(names, k)) {
			env[k] = v
		}
	}
	return env
}
