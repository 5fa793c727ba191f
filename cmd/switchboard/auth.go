package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
)

const authUsage = `usage:
  switchboard auth login DEST [--config FILE] [--no-browser]   log in to a destination's OAuth server, store its tokens
  switchboard auth status [DEST...] [--config FILE]            each oauth destination's login: ok or needs_login, expiry
  switchboard auth logout DEST [--config FILE]                 forget a destination's tokens

options:
  --config FILE   the gateway's config (default DESTINATIONS_CONFIG)
  --no-browser    login: only print the authorization URL (default: also open $BROWSER, xdg-open or open)

login sends the destination an unauthenticated request, discovers its authorization server from the 401,
registers (or uses the configured client), prints the authorization URL and waits for the browser's redirect
on a loopback port (oauth.redirect_url). The tokens go to oauth.token_dir/DEST.json (mode 0600), or with
oauth.token_store keyring to the OS keyring, which a running gateway reads again at once: no restart. On a headless server, log in on a machine with a browser and
copy DEST.json to the server's token_dir. With oauth.callback_url the gateway starts logins itself (a
session without a login, a step-up, a new authorization server) and gives the URL to the MCP client.
`

// runAuth is `switchboard auth`.
func runAuth(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, authUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("auth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "")
	noBrowser := fs.Bool("no-browser", false, "")
	fs.Usage = func() { fmt.Fprint(stderr, authUsage) }
	// Flags may come before or after the destination names.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch sub {
	case "login", "logout":
		if len(names) != 1 {
			fmt.Fprintf(stderr, "switchboard auth %s: name one destination\n", sub)
			return 2
		}
	case "status":
	default:
		fmt.Fprintf(stderr, "switchboard auth: unknown command %q: want login, status or logout\n%s", sub, authUsage)
		return 2
	}
	if *cfgPath = configPath("auth", *cfgPath, stderr); *cfgPath == "" {
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard auth: %v\n", err)
		return 1
	}
	var dests []*config.Destination
	if len(names) == 0 {
		for _, n := range cfg.Names {
			if d := cfg.Destinations[n]; d.OAuth != nil {
				dests = append(dests, d)
			}
		}
	}
	for _, n := range names {
		d := cfg.Destinations[n]
		if d == nil {
			fmt.Fprintf(stderr, "switchboard auth: no destination %q in %s\n", n, *cfgPath)
			return 2
		}
		if d.OAuth == nil {
			fmt.Fprintf(stderr, "switchboard auth: destination %q has no oauth block\n", n)
			return 2
		}
		dests = append(dests, d)
	}
	log := slog.New(audit.RedactingHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
		audit.NewRedactor(cfg.SecretValues())))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code := 0
	for _, d := range dests {
		oc, err := gateway.NewOAuthClient(d, log)
		if err != nil {
			fmt.Fprintf(stderr, "switchboard auth: %s: %v\n", d.Name, err)
			code = 1
			continue
		}
		switch sub {
		case "login":
			fmt.Fprintf(stderr, "switchboard: logging in to %s (%s)\n", d.Name, d.URL)
			if err = oc.Login(ctx, browserPrompt(stderr, log, !*noBrowser)); err == nil {
				fmt.Fprintf(stdout, "%s: logged in; %s\n", d.Name, describe(oc.Status()))
			}
		case "logout":
			if err = oc.Logout(); err == nil {
				fmt.Fprintf(stdout, "%s: logged out\n", d.Name)
			}
		case "status":
			fmt.Fprintf(stdout, "%s: %s\n", d.Name, describe(oc.Status()))
		}
		if err != nil {
			fmt.Fprintf(stderr, "switchboard auth %s: %s: %v\n", sub, d.Name, err)
			code = 1
		}
		oc.Close()
	}
	return code
}

// describe is a Status in words, without any token.
func describe(st oauth.Status) string {
	switch st.State {
	case oauth.StateNeedsLogin:
		return "needs_login (" + st.Reason + ")"
	case oauth.StateReady:
	default:
		return "no login needed yet (client credentials)"
	}
	parts := []string{"ok"}
	if !st.Expiry.IsZero() {
		if left := time.Until(st.Expiry).Round(time.Second); left > 0 {
			parts = append(parts, fmt.Sprintf("access token expires %s (in %v)", st.Expiry.UTC().Format(time.RFC3339), left))
		} else {
			parts = append(parts, "access token expired "+st.Expiry.UTC().Format(time.RFC3339))
		}
	}
	if st.Refreshable {
		parts = append(parts, "refresh token held")
	}
	if st.ClientID != "" {
		parts = append(parts, "client "+st.ClientID)
	}
	if len(st.Scopes) > 0 {
		parts = append(parts, "scopes "+strings.Join(st.Scopes, " "))
	}
	return strings.Join(parts, ", ")
}

// oauthNotes prints, for `check`, the login state of each destination
// that uses the authorization code grant.
func oauthNotes(cfg *config.Config, w, warn io.Writer) {
	log := slog.New(slog.DiscardHandler)
	for _, n := range cfg.Names {
		d := cfg.Destinations[n]
		if d.OAuth != nil && d.OAuth.TokenStore == config.TokenStoreKeyring {
			if err := (oauth.KeyringStore{}).Available(); err != nil {
				fmt.Fprintf(warn, "warning: destination %s: oauth.token_store is keyring, but no OS keyring is available here (%v): it will be needs_login\n", n, err)
				continue
			}
		}
		if d.OAuth == nil || d.OAuth.Grant == config.GrantClientCredentials {
			continue
		}
		oc, err := gateway.NewOAuthClient(d, log)
		if err != nil {
			fmt.Fprintf(w, "  %s: oauth: %v\n", n, err)
			continue
		}
		st := oc.Status()
		if st.State == oauth.StateNeedsLogin {
			fmt.Fprintf(w, "  %s: oauth needs_login (%s): run switchboard auth login %s\n", n, st.Reason, n)
		} else {
			fmt.Fprintf(w, "  %s: oauth %s\n", n, describe(st))
		}
	}
}
