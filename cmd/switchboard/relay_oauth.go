package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth"
)

// oauthFlags are the --oauth* flags of `switchboard relay --url`.
type oauthFlags struct {
	grant, clientID, clientSecret, clientKey       string
	metadataURL, redirectURL, stateDir, tokenStore string

	login bool
}

func addOAuthFlags(fs *flag.FlagSet) *oauthFlags {
	f := &oauthFlags{}
	fs.Bool("oauth", false, "")
	fs.StringVar(&f.grant, "oauth-grant", "", "")
	fs.StringVar(&f.clientID, "oauth-client-id", "", "")
	fs.StringVar(&f.clientSecret, "oauth-client-secret", "", "")
	fs.StringVar(&f.clientKey, "oauth-client-key", "", "")
	fs.StringVar(&f.metadataURL, "oauth-client-metadata-url", "", "")
	fs.StringVar(&f.redirectURL, "oauth-redirect-url", "", "")
	fs.StringVar(&f.stateDir, "oauth-state-dir", "", "")
	fs.StringVar(&f.tokenStore, "oauth-token-store", "", "")
	fs.BoolVar(&f.login, "login", false, "")
	return f
}

// enabled reports whether OAuth is asked for: --oauth, --login or any
// --oauth-* flag given.
func (f *oauthFlags) enabled(set map[string]bool) bool {
	for name := range set {
		if name == "login" || strings.HasPrefix(name, "oauth") {
			return true
		}
	}
	return false
}

// relayOAuthClient returns the OAuth client of a --url relay, its tokens
// kept under --oauth-state-dir (default oauth.DefaultDir) in a file named
// for the URL. stderr gets the authorization URL of a --login.
func relayOAuthClient(url string, f *oauthFlags, stderr io.Writer, log *slog.Logger) (*oauth.Client, error) {
	secret, err := expandEnv(f.clientSecret)
	if err != nil {
		return nil, fmt.Errorf("--oauth-client-secret: %v", err)
	}
	var store oauth.Store
	switch f.tokenStore {
	case "", config.TokenStoreFile:
		dir := f.stateDir
		if dir == "" {
			if dir, err = oauth.DefaultDir(); err != nil {
				return nil, err
			}
		}
		store = oauth.FileStore{Dir: dir}
	case config.TokenStoreKeyring:
		ks := oauth.KeyringStore{}
		if err := ks.Available(); err != nil {
			return nil, fmt.Errorf("--oauth-token-store keyring: %v (tokens are never kept in a file instead)", err)
		}
		store = ks
	default:
		return nil, fmt.Errorf("--oauth-token-store: want file or keyring, not %q", f.tokenStore)
	}
	var key []byte
	if f.clientKey != "" {
		if key, err = os.ReadFile(f.clientKey); err != nil {
			return nil, fmt.Errorf("--oauth-client-key: %v", err)
		}
	}
	sum := sha256.Sum256([]byte(url))
	opts := oauth.Options{URL: url, Grant: f.grant, ClientID: f.clientID, ClientSecret: secret, ClientKey: key,
		ClientMetadataURL: f.metadataURL, RedirectURL: f.redirectURL,
		Store: store, Key: "relay-" + hex.EncodeToString(sum[:8]),
		LoginHint: "switchboard relay --url " + url + " --login", Logger: log}
	if f.login {
		opts.Prompt = browserPrompt(stderr, log, true)
	}
	return oauth.New(opts)
}

// browserPrompt shows an authorization URL: on w always, and with open
// in a browser when there is one: $BROWSER (a program, run with the URL as
// its one argument, never through a shell), else xdg-open with a display,
// else open on macOS. The browser is started, not waited for, beyond its
// exit (reaped by the goroutine that waits for it).
func browserPrompt(w io.Writer, log *slog.Logger, open bool) oauth.Prompt {
	return func(ctx context.Context, authURL string) error {
		fmt.Fprintf(w, "switchboard: to authorize, open this URL in a browser:\n\n    %s\n\n", authURL)
		if !open {
			return nil
		}
		prog := os.Getenv("BROWSER")
		if prog == "" {
			switch {
			case runtime.GOOS == "darwin":
				prog = "open"
			case os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "":
				prog = "xdg-open"
			}
		}
		if prog == "" {
			return nil
		}
		path, err := exec.LookPath(prog)
		if err != nil {
			log.Debug("oauth: no browser to open", "browser", prog, "err", err)
			return nil
		}
		cmd := exec.Command(path, authURL)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			log.Debug("oauth: the browser did not start", "browser", prog, "err", err)
			return nil
		}
		go func() { _ = cmd.Wait() }() // ends when the browser launcher exits
		return nil
	}
}
