package gateway

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/destination"
	"github.com/switchboard-mcp/switchboard/internal/era"
	"github.com/switchboard-mcp/switchboard/internal/front/sse"
	stdiofront "github.com/switchboard-mcp/switchboard/internal/front/stdio"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/policy"
	"github.com/switchboard-mcp/switchboard/internal/router"
	"github.com/switchboard-mcp/switchboard/internal/sigv4"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
	"github.com/switchboard-mcp/switchboard/internal/upstream/stdio"
)

// newDestination makes destination dc of cfg (package destination runs
// it; this is only the translation of its config).
func (g *Gateway) newDestination(dc *config.Destination, cfg *config.Config) *destination.Destination {
	opts := destination.Options{Name: dc.Name, Timeout: timeoutOf(dc, cfg), ListTimeout: dc.Timeout,
		MaxMessage: int(cfg.MaxMessageBytes), RestartDelays: restartDelays(cfg.Restart),
		RetryFailedAfter: cfg.Restart.RetryAfter, RetryFailedMax: cfg.Restart.RetryMax,
		Limits: destinationLimits(cfg), Traced: g.tracer != nil, Logger: g.log}
	if g.cluster.replica != nil {
		opts.States = g.cluster.replica // a retry reaching another replica is forwarded here
	}
	switch dc.Protocol {
	case config.ProtocolLegacy:
		opts.Era = era.Legacy
	case config.ProtocolModern:
		opts.Era = era.Modern
	}
	switch dc.Type {
	case config.TypeStdio:
		// The stderr lines an exit error carries to clients are redacted.
		opts.Stdio = &stdio.Spec{Argv: append(append([]string{}, dc.Command...), dc.Args...),
			Env: stdio.Env(dc.Env, dc.Secrets), Dir: dc.Cwd, Redact: audit.NewRedactor(cfg.SecretValues()).String}
		opts.PerSession = dc.Isolation == config.IsolationSession
	case config.TypeStreamableHTTP, config.TypeSSE:
		h := &destination.HTTP{URL: dc.URL, SSE: dc.Type == config.TypeSSE, Header: http.Header{},
			ForwardHeaders: dc.ForwardHeaders, IdentityHeader: cfg.Auth.IdentityHeader}
		for k, v := range dc.Headers {
			h.Header.Set(k, v)
		}
		if dc.AWS != nil {
			o := sigv4Options(dc.AWS)
			h.AWS = &o
		}
		if dc.OAuth != nil {
			h.OAuth = func(log *slog.Logger) (*oauth.Client, error) { return NewOAuthClient(dc, log) }
		}
		opts.HTTP = h
	case config.TypeAgentCore:
		// The aws block's profile and role (nil: the default chain); the
		// region is the ARN's, the service bedrock-agentcore.
		opts.AgentCore = &agentcore.Options{ARN: dc.ARN, Qualifier: dc.Qualifier, SessionMode: dc.SessionMode,
			AWS: sigv4Options(dc.AWS)}
	}
	return destination.New(opts)
}

// destinationLimits are the global settings of a destination that a
// reload changes in place.
func destinationLimits(cfg *config.Config) destination.Limits {
	maxChildren := cfg.MaxChildren
	if maxChildren == 0 {
		maxChildren = cfg.MaxSessions
	}
	return destination.Limits{ChildIdle: cfg.SessionChildIdleTimeout, ChildOrphan: cfg.SessionOrphanTimeout, MaxChildren: maxChildren}
}

// restartDelays expands the policy into one delay per attempt.
func restartDelays(r config.Restart) []time.Duration {
	out := make([]time.Duration, r.MaxAttempts)
	for i := range out {
		if n := len(r.Delays); n > 0 {
			out[i] = r.Delays[min(i, n-1)] // the last delay repeats
		}
	}
	return out
}

// sigv4Options translates an aws block; nil is the default chain, with
// everything inferred. The destination sets the logger.
func sigv4Options(a *config.AWS) sigv4.Options {
	if a == nil {
		return sigv4.Options{}
	}
	return sigv4.Options{Service: a.Service, Region: a.Region, Profile: a.Profile,
		AssumeRoleARN: a.AssumeRoleARN, RoleSessionName: a.RoleSessionName}
}

// NewOAuthClient returns the OAuth client of a destination with an oauth
// block, its tokens in TokenDir/NAME.json, or under NAME in the OS keyring
// with token_store keyring (`switchboard auth` uses it too). A keyring that
// cannot be reached is an error (the destination is needs_login with it):
// the tokens never go to a file instead.
func NewOAuthClient(cfg *config.Destination, log *slog.Logger) (*oauth.Client, error) {
	o := cfg.OAuth
	var store oauth.Store
	if o.TokenStore == config.TokenStoreKeyring {
		ks := oauth.KeyringStore{}
		if err := ks.Available(); err != nil {
			return nil, fmt.Errorf("oauth.token_store keyring: %v (tokens are never kept in a file instead)", err)
		}
		store = ks
	} else {
		dir := o.TokenDir
		if dir == "" {
			var err error
			if dir, err = oauth.DefaultDir(); err != nil {
				return nil, err
			}
		}
		store = oauth.FileStore{Dir: dir}
	}
	var key []byte
	if o.ClientKeyFile != "" {
		var err error
		if key, err = os.ReadFile(o.ClientKeyFile); err != nil {
			return nil, fmt.Errorf("oauth.client_key_file: %v", err)
		}
	}
	return oauth.New(oauth.Options{URL: cfg.URL, Grant: o.Grant, ClientID: o.ClientID, ClientSecret: o.ClientSecret, ClientKey: key,
		ClientMetadataURL: o.ClientMetadataURL, RedirectURL: o.RedirectURL, CallbackURL: o.CallbackURL,
		Store: store, Key: cfg.Name, SSE: cfg.Type == config.TypeSSE,
		LoginHint: "switchboard auth login " + cfg.Name, Logger: log})
}

// Interface guards: what the fronts and the router ask of a destination,
// and of a view's router, is what package destination and package router
// provide.
var (
	_ streamable.Destination = (*destination.Destination)(nil)
	_ sse.Destination        = (*destination.Destination)(nil)
	_ stdiofront.Destination = (*destination.Destination)(nil)
	_ policy.Destination     = (*destination.Destination)(nil)
	_ router.Server          = (*destination.Destination)(nil)
	_ router.StatelessServer = (*destination.Destination)(nil)
	_ era.StatelessServer    = (*destination.Destination)(nil)
	_ streamable.Destination = (*router.Router)(nil)
	_ sse.Destination        = (*router.Router)(nil)
	_ stdiofront.Destination = (*router.Router)(nil)
	_ policy.Destination     = (*router.Router)(nil)
)
