package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"

	"github.com/switchboard-mcp/switchboard/internal/agentcore"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// agentCoreFlags are the relay's AgentCore settings: flags, defaulted from
// the seed's environment (AGENTCORE_AGENT_ARN or AGENT_ARN,
// RUNTIME_SESSION_MODE, AGENTCORE_ASSUME_ROLE_ARN,
// AGENTCORE_ASSUME_ROLE_SESSION_NAME; the timeouts are read by
// agentcore.New from AGENTCORE_CONNECT_TIMEOUT and AGENTCORE_READ_TIMEOUT).
type agentCoreFlags struct {
	arn, qualifier, mode, roleARN, roleSession *string
}

func addAgentCoreFlags(fs *flag.FlagSet) agentCoreFlags {
	arn := os.Getenv("AGENTCORE_AGENT_ARN")
	if arn == "" {
		arn = os.Getenv("AGENT_ARN")
	}
	session := os.Getenv("AGENTCORE_ASSUME_ROLE_SESSION_NAME")
	if session == "" {
		session = "mcpAgentCoreProxy"
	}
	mode := os.Getenv("RUNTIME_SESSION_MODE")
	if mode == "" {
		mode = agentcore.ModeSession
	}
	return agentCoreFlags{
		arn:         fs.String("agentcore-arn", arn, "AgentCore runtime ARN to relay to instead of --url (env AGENTCORE_AGENT_ARN, AGENT_ARN)"),
		qualifier:   fs.String("qualifier", agentcore.DefaultQualifier, "AgentCore runtime endpoint (qualifier)"),
		mode:        fs.String("session-mode", mode, "AgentCore runtime session id: session, identity or request (env RUNTIME_SESSION_MODE)"),
		roleARN:     fs.String("assume-role-arn", os.Getenv("AGENTCORE_ASSUME_ROLE_ARN"), "IAM role to assume for AgentCore calls (env AGENTCORE_ASSUME_ROLE_ARN)"),
		roleSession: fs.String("role-session-name", session, "session name of the assumed role (env AGENTCORE_ASSUME_ROLE_SESSION_NAME)"),
	}
}

// agentCoreDialer resolves the runtime named by the flags.
func agentCoreDialer(ctx context.Context, f agentCoreFlags, log *slog.Logger) (upstream.Dialer, string, error) {
	rt, err := agentcore.Resolve(ctx, agentcore.Options{ARN: *f.arn, Qualifier: *f.qualifier, SessionMode: *f.mode, Logger: log},
		*f.roleARN, *f.roleSession)
	if err != nil {
		return nil, "", err
	}
	hdr := http.Header{}
	for _, k := range []string{"TRACEPARENT", "TRACESTATE"} {
		if v := os.Getenv(k); v != "" {
			hdr.Set(k, v)
		}
	}
	return rt.Dialer(hdr), "agentcore " + *f.arn, nil
}
