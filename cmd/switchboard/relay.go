package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/relay"
)

func init() { relayCmd = runRelay }

// headerFlags collects repeated --header values.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

func runRelay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "remote MCP endpoint (required)")
	transport := fs.String("transport", "auto", "auto, http (Streamable HTTP) or sse (legacy HTTP+SSE)")
	logFile := fs.String("log", "", "log file (default: stderr; never stdout)")
	debug := fs.Bool("debug", false, "log debug detail")
	reconnect := fs.Duration("reconnect", 5*time.Second, "wait before re-dialling a dropped connection")
	ac := addAgentCoreFlags(fs)
	var headers headerFlags
	fs.Var(&headers, "header", "upstream header 'Name: value' (repeatable; ${VAR} is expanded from the environment)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *url != "" && *ac.arn != "" {
		fmt.Fprintln(stderr, "switchboard relay: give --url or --agentcore-arn, not both")
		return 2
	}
	if *url == "" && *ac.arn == "" {
		fmt.Fprintln(stderr, "switchboard relay: --url is required (or --agentcore-arn)")
		return 2
	}
	var logW io.Writer = stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "switchboard relay: %v\n", err)
			return 1
		}
		defer f.Close()
		logW = f
	}
	level := slog.LevelWarn
	if *debug || os.Getenv("MCP_PROXY_DEBUG") == "1" {
		level = slog.LevelDebug
	}
	hdr := http.Header{}
	var secrets []string
	for _, h := range headers {
		name, value, err := relay.ParseHeader(h)
		if err == nil {
			value, err = expandEnv(value)
		}
		if err != nil {
			fmt.Fprintf(stderr, "switchboard relay: --header: %v\n", err)
			return 2
		}
		hdr.Add(name, value)
		secrets = append(secrets, value)
	}
	red := audit.NewRedactor(secrets)
	log := slog.New(audit.RedactingHandler(slog.NewTextHandler(logW, &slog.HandlerOptions{Level: level}), red))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := relay.Options{URL: *url, Transport: *transport, Header: hdr, ReconnectDelay: *reconnect, Logger: log}
	if *ac.arn != "" {
		dial, name, err := agentCoreDialer(ctx, ac, log)
		if err != nil {
			fmt.Fprintf(stderr, "switchboard relay: %v\n", err)
			return 2
		}
		opts.Dial, opts.Name = dial, name
	}
	err := relay.Run(ctx, opts, stdin, stdout)
	if err != nil {
		log.Error("relay failed", "err", err)
		fmt.Fprintf(stderr, "switchboard relay: %v\n", err)
		return 1
	}
	return 0
}

// expandEnv replaces ${VAR} with the environment's value; an unset
// variable is an error, and $${ escapes a literal ${.
func expandEnv(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		name := s[i+2 : i+j]
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("${%s} is not set", name)
		}
		b.WriteString(s[:i] + v)
		s = s[i+j+1:]
	}
}
