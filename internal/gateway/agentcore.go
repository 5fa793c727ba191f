package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/front/agentruntime"
)

// AgentCoreServer is the name of the one destination of an AgentCore
// runtime config; its endpoint is /server/mcp behind the front.
const AgentCoreServer = "server"

// AgentCore describes the stdio server `switchboard agentcore` bridges.
type AgentCore struct {
	// Command is the server's argv. Required.
	Command []string
	// Cwd is its working directory; "" is Switchboard's.
	Cwd string
	// Env is added to the child's environment, on top of the allowlist of
	// every stdio child (stdio.AllowedEnv).
	Env map[string]string
	// LogLevel is debug, info, warn or error; "" is info.
	LogLevel string
	// Timeout bounds each forwarded request; zero means 15 minutes (the
	// longest synchronous AgentCore invocation), negative disables it.
	Timeout time.Duration
	// MaxSessions caps the client sessions; zero means 1000.
	MaxSessions int
}

// AgentCoreConfig synthesizes the config `switchboard agentcore` runs: one
// stdio destination with isolation shared (one child, concurrent calls),
// every other setting at its default (restarts supervised with the default
// policy), and allowed_hosts "*": the
// runtime binds 0.0.0.0 inside a container, and behind AgentCore the Host
// header is the platform's, never loopback. Browser Origins stay limited to
// loopback ones. The legacy HTTP+SSE transport is off.
func AgentCoreConfig(a AgentCore) (*config.Config, error) {
	if len(a.Command) == 0 || a.Command[0] == "" {
		return nil, errors.New("agentcore: no server command (set MCP_SERVER_CMD or give it after --)")
	}
	level := a.LogLevel
	if level == "" {
		level = config.DefaultLogLevel
	}
	switch level {
	case "debug", "info", "warn", "error":
	default:
		return nil, fmt.Errorf("agentcore: unknown log level %q: want debug, info, warn or error", a.LogLevel)
	}
	timeout := a.Timeout
	switch {
	case timeout == 0:
		timeout = 15 * time.Minute
	case timeout < 0:
		timeout = 0
	}
	maxSessions := a.MaxSessions
	if maxSessions <= 0 {
		maxSessions = 1000
	}
	cfg := config.Default()
	cfg.Listen = "0.0.0.0:8000"
	cfg.Timeout = timeout
	cfg.MaxSessions = maxSessions
	cfg.AllowedHosts = []string{"*"}
	cfg.Log.Level = level
	cfg.Destinations[AgentCoreServer] = &config.Destination{Name: AgentCoreServer, Type: config.TypeStdio,
		Command: a.Command, Cwd: a.Cwd, Env: a.Env, Isolation: config.IsolationShared}
	cfg.Names = []string{AgentCoreServer}
	return cfg, nil
}

// ServeAgentCore serves the AgentCore contracts until ctx is done: the
// MCP-protocol contract on mcpLn and the HTTP-protocol contract on httpLn
// (either may be nil, not both), each through the audit log and the
// Origin/Host guard, over the destination AgentCoreServer. It shuts down as
// Serve does.
func (g *Gateway) ServeAgentCore(ctx context.Context, mcpLn, httpLn net.Listener) error {
	if g.state().dests[AgentCoreServer] == nil {
		return errors.New("gateway: ServeAgentCore needs the config of AgentCoreConfig")
	}
	front := agentruntime.New(g.Handler(), agentruntime.Options{Endpoint: "/" + AgentCoreServer + "/mcp",
		MaxBindings: 10 * g.static.MaxSessions})
	var lns []listener
	if mcpLn != nil {
		lns = append(lns, listener{ln: mcpLn, h: front.MCP(), name: "agentcore mcp contract"})
	}
	if httpLn != nil {
		lns = append(lns, listener{ln: httpLn, h: front.HTTP(), name: "agentcore http contract"})
	}
	if len(lns) == 0 {
		return errors.New("gateway: ServeAgentCore needs a listener")
	}
	return g.serveAll(ctx, lns)
}
