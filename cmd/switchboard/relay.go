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
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

const relayUsage = `usage:
  switchboard relay --url URL [options]             a stdio MCP server forwarding to a remote one
  switchboard relay --agentcore-arn ARN [options]   ... to an Amazon Bedrock AgentCore runtime (SigV4-signed)

options:
  --transport auto|http|sse   auto (default): Streamable HTTP, legacy HTTP+SSE when the server wants it
  --header 'Name: value'      upstream header, repeatable; ${VAR} is expanded from the environment
  --log FILE                  log file (default stderr; never stdout)
  --debug                     log debug detail (also MCP_PROXY_DEBUG=1)
  --reconnect DURATION        wait before re-dialling a dropped connection (default 5s)

SigV4 for --url (any of these but --sigv4 implies --sigv4; https only, except to a loopback host):
  --sigv4                     sign every request, service and region inferred from the URL's host
  --aws-service NAME          signing name (default: bedrock-agentcore for *.bedrock-agentcore.REGION.amazonaws.com,
                              SVC for SVC.REGION.api.aws, else the host's first label)
  --aws-region REGION         (default: from the host, then AWS_REGION / the profile's region)
  --aws-profile NAME          shared-config profile (default AWS_PROFILE, else the default credential chain)
  --assume-role-arn ARN       sign with this role's credentials (sts:AssumeRole, refreshed as they expire)
  --role-session-name NAME    the assumed role's session name (default switchboard)

AgentCore (--agentcore-arn ARN, env AGENTCORE_AGENT_ARN or AGENT_ARN; always signed for bedrock-agentcore):
  --qualifier NAME            runtime endpoint (default DEFAULT)
  --session-mode MODE         session (one runtime session per relay), identity (from sts:GetCallerIdentity
                              of the base credentials) or request (one per request); env RUNTIME_SESSION_MODE
  --aws-region REGION         signing region: the ARN's (any other is an error)
  --aws-profile NAME          shared-config profile (default AWS_PROFILE, else the default credential chain)
  --assume-role-arn ARN       role to assume (env AGENTCORE_ASSUME_ROLE_ARN)
  --role-session-name NAME    (env AGENTCORE_ASSUME_ROLE_SESSION_NAME, default mcpAgentCoreProxy)
  Timeouts: AGENTCORE_CONNECT_TIMEOUT (10) and AGENTCORE_READ_TIMEOUT (300), seconds.
  Endpoint: AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, else AWS_ENDPOINT_URL, else bedrock-agentcore.REGION.amazonaws.com.

Credentials come from the AWS SDK's standard chain (environment, profiles, SSO, web identity, ECS, IMDS).

OAuth 2.1 for --url (any of these implies --oauth; the relay's own tokens, never the stdio client's):
  --oauth                     authorize with the server's OAuth (discovery from its 401, PKCE, resource indicators)
  --login                     when no usable token is stored, log in: print the authorization URL on stderr, open
                              $BROWSER (or xdg-open / open), receive the redirect on a loopback port
  --oauth-grant GRANT         authorization_code (default) or client_credentials (needs the client id and secret)
  --oauth-client-id ID        a pre-registered client (default: a client-ID metadata document, else dynamic registration)
  --oauth-client-secret S     its secret; ${VAR} is expanded from the environment
  --oauth-client-key FILE     client_credentials: authenticate with a JWT signed by this PEM key (private_key_jwt),
                              not a secret
  --oauth-client-metadata-url URL  this client's metadata document (https), used where the server supports them
  --oauth-redirect-url URL    the loopback redirect (default http://127.0.0.1:<free port>/callback)
  --oauth-state-dir DIR       where tokens are kept, mode 0600 (default $SWITCHBOARD_STATE_DIR/oauth, else
                              $XDG_STATE_HOME/switchboard/oauth, else ~/.local/state/switchboard/oauth)
  --oauth-token-store STORE   file (default: a file under --oauth-state-dir) or keyring (the OS keyring: Secret
                              Service, Keychain, Credential Manager; an error where there is none, never a file)
`

// headerFlags collects repeated --header values.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

func runRelay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "")
	transport := fs.String("transport", "auto", "")
	logFile := fs.String("log", "", "")
	debug := fs.Bool("debug", false, "")
	reconnect := fs.Duration("reconnect", 5*time.Second, "")
	ac := addAWSFlags(fs)
	of := addOAuthFlags(fs)
	var headers headerFlags
	fs.Var(&headers, "header", "")
	fs.Usage = func() { fmt.Fprint(stderr, relayUsage) }
	if err := fs.Parse(args); err != nil || noArgs(fs, stderr) != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "switchboard relay: "+format+"\n", a...)
		return code
	}
	if *url != "" && ac.arn != "" {
		return fail(2, "give --url or --agentcore-arn, not both")
	}
	if *url == "" && ac.arn == "" {
		return fail(2, "--url is required (or --agentcore-arn)")
	}
	if err := checkRelayURL(*url); *url != "" && err != nil {
		return fail(2, "%v", err)
	}
	if err := ac.check(set); err != nil {
		return fail(2, "%v", err)
	}
	useOAuth := of.enabled(set)
	if useOAuth && *url == "" {
		return fail(2, "the --oauth flags need --url")
	}
	var logW io.Writer = stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fail(1, "%v", err)
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
			return fail(2, "--header: %v", err)
		}
		hdr.Add(name, value)
		secrets = append(secrets, value)
	}
	if useOAuth {
		secret, err := expandEnv(of.clientSecret)
		if err != nil {
			return fail(2, "--oauth-client-secret: %v", err)
		}
		if secret != "" {
			secrets = append(secrets, secret)
		}
	}
	red := audit.NewRedactor(secrets)
	log := slog.New(audit.RedactingHandler(slog.NewTextHandler(logW, &slog.HandlerOptions{Level: level}), red))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := relay.Options{URL: *url, Transport: *transport, Header: hdr, ReconnectDelay: *reconnect, Logger: log}
	if ac.arn != "" {
		dial, name, err := agentCoreDialer(ctx, ac, log)
		if err != nil {
			return fail(2, "%v", err)
		}
		opts.Dial, opts.Name = dial, name
	} else {
		client, err := signedClient(ctx, *url, ac, set, log)
		if err != nil {
			return fail(2, "%v", err)
		}
		if useOAuth {
			oc, err := relayOAuthClient(*url, of, stderr, log)
			if err != nil {
				return fail(2, "%v", err)
			}
			defer oc.Close()
			if client == nil {
				client = upstream.NewHTTPClient()
			}
			client.Transport = oc.Transport(client.Transport)
		}
		opts.HTTPClient = client
	}
	if err := relay.Run(ctx, opts, stdin, stdout); err != nil {
		log.Error("relay failed", "err", err)
		return fail(1, "%v", err)
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
