package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/sigv4"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
)

// awsFlags are the relay's AWS settings: the AgentCore target (flags,
// defaulted from the environment: AGENTCORE_AGENT_ARN or AGENT_ARN,
// RUNTIME_SESSION_MODE, AGENTCORE_ASSUME_ROLE_ARN,
// AGENTCORE_ASSUME_ROLE_SESSION_NAME; the timeouts are read by
// agentcore.New from AGENTCORE_CONNECT_TIMEOUT and AGENTCORE_READ_TIMEOUT)
// and the SigV4 signing of a --url upstream.
type awsFlags struct {
	arn, qualifier, mode, roleARN, roleSession string
	service, profile, region                   string
}

// agentCoreOnly and urlOnly are the flags that make sense with one target
// kind only; signing names the flags that turn SigV4 on for --url.
var (
	agentCoreOnly = []string{"qualifier", "session-mode"}
	urlOnly       = []string{"aws-service"}
	signing       = []string{"sigv4", "aws-service", "aws-profile", "aws-region", "assume-role-arn", "role-session-name"}
)

func addAWSFlags(fs *flag.FlagSet) *awsFlags {
	f := &awsFlags{}
	fs.StringVar(&f.arn, "agentcore-arn", cmp.Or(os.Getenv("AGENTCORE_AGENT_ARN"), os.Getenv("AGENT_ARN")), "")
	fs.StringVar(&f.qualifier, "qualifier", agentcore.DefaultQualifier, "")
	fs.StringVar(&f.mode, "session-mode", cmp.Or(os.Getenv("RUNTIME_SESSION_MODE"), agentcore.ModeSession), "")
	fs.StringVar(&f.roleARN, "assume-role-arn", os.Getenv("AGENTCORE_ASSUME_ROLE_ARN"), "")
	fs.StringVar(&f.roleSession, "role-session-name", cmp.Or(os.Getenv("AGENTCORE_ASSUME_ROLE_SESSION_NAME"), "mcpAgentCoreProxy"), "")
	fs.Bool("sigv4", false, "")
	fs.StringVar(&f.service, "aws-service", "", "")
	fs.StringVar(&f.profile, "aws-profile", "", "")
	fs.StringVar(&f.region, "aws-region", "", "")
	return f
}

// check rejects flags given for the other kind of target; set holds the
// flags given on the command line.
func (f *awsFlags) check(set map[string]bool) error {
	wrong, kind := agentCoreOnly, "--agentcore-arn"
	if f.arn != "" {
		wrong, kind = urlOnly, "--url"
	}
	for _, name := range wrong {
		if set[name] {
			if name == "aws-service" {
				return fmt.Errorf("--aws-service applies to --url only: AgentCore calls are always signed for %s", agentcore.Service)
			}
			return fmt.Errorf("--%s applies to %s only", name, kind)
		}
	}
	return nil
}

// agentCoreDialer resolves the runtime named by the flags.
func agentCoreDialer(ctx context.Context, f *awsFlags, log *slog.Logger) (upstream.Dialer, string, error) {
	rt, err := agentcore.Resolve(ctx, agentcore.Options{ARN: f.arn, Qualifier: f.qualifier, SessionMode: f.mode, Logger: log,
		AWS: sigv4.Options{Profile: f.profile, Region: f.region, AssumeRoleARN: f.roleARN, RoleSessionName: f.roleSession}})
	if err != nil {
		return nil, "", err
	}
	hdr := http.Header{}
	for _, k := range []string{"TRACEPARENT", "TRACESTATE"} {
		if v := os.Getenv(k); v != "" {
			hdr.Set(k, v)
		}
	}
	return rt.Dialer(hdr), "agentcore " + f.arn, nil
}

// signedClient returns the HTTP client of a --url relay that signs with
// SigV4 (--sigv4, or any --aws-* or role flag in set), or nil when it does
// not sign. Only flags given on the command line count: the AgentCore
// environment variables do not turn signing on for --url. Signing needs
// https, except to a loopback host.
func signedClient(ctx context.Context, rawURL string, f *awsFlags, set map[string]bool, log *slog.Logger) (*http.Client, error) {
	if !slices.ContainsFunc(signing, func(name string) bool { return set[name] }) {
		return nil, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--url %q is not a URL", rawURL)
	}
	if u.Scheme != "https" && !oauth.IsLoopback(u.Hostname()) {
		return nil, fmt.Errorf("SigV4 signing needs an https --url (or a loopback host), not %s", upstream.Origin(u))
	}
	opts := sigv4.Options{Service: f.service, Profile: f.profile, Region: f.region, Logger: log}
	if set["assume-role-arn"] {
		opts.AssumeRoleARN = f.roleARN
	}
	if set["role-session-name"] {
		opts.RoleSessionName = f.roleSession
	}
	signer, err := sigv4.New(ctx, rawURL, opts)
	if err != nil {
		return nil, err
	}
	log.Debug("relay: signing with SigV4", "service", signer.Service(), "region", signer.Region())
	client := upstream.NewHTTPClient()
	client.Transport = sigv4.ErrorStatus(signer.Transport(client.Transport))
	return client, nil
}
