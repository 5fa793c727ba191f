package main

// End to end with a real Secret Service: a private D-Bus session bus and
// gnome-keyring-daemon (Debian's dbus-daemon and gnome-keyring), each
// started and stopped by PID. With oauth.token_store keyring, `auth login`
// leaves nothing on disk, the gateway calls through with the token from the
// keyring, and `auth logout` removes it. (The test reads the keyring only
// through the binary: go-keyring's provider is global to a process, and
// TestRelayOAuthTokenStore mocks it.)

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/zalando/go-keyring"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
	"github.com/switchboard-mcp/switchboard/internal/upstream/oauth/oauthtest"
)

// startSecretService starts a session bus and an unlocked gnome-keyring
// on it, in the test's temporary directory, and sets
// DBUS_SESSION_BUS_ADDRESS for the test and its children. A missing
// program skips the test, or fails it under SWITCHBOARD_REQUIRE_PEERS=1
// (.ci/run installs them).
func startSecretService(t *testing.T) {
	t.Helper()
	for _, p := range []string{"dbus-daemon", "gnome-keyring-daemon"} {
		if _, err := exec.LookPath(p); err != nil {
			msg := p + " not found (apt-get install --no-install-recommends dbus-daemon gnome-keyring)"
			if peertest.Required() {
				t.Fatal(msg + " (SWITCHBOARD_REQUIRE_PEERS=1)")
			}
			t.Skip(msg)
		}
	}
	dir := t.TempDir()
	stop := func(cmd *exec.Cmd) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	bus := exec.Command("dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1",
		"--address=unix:path="+filepath.Join(dir, "bus"))
	out, err := bus.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	bus.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := bus.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(bus) })
	addr, err := bufio.NewReader(out).ReadString('\n') // printed once it listens
	if err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", strings.TrimSpace(addr))

	// Watch for the Secret Service's name before starting it: its
	// NameOwnerChanged is the event that it is ready.
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.AddMatchSignal(dbus.WithMatchInterface("org.freedesktop.DBus"), dbus.WithMatchMember("NameOwnerChanged"),
		dbus.WithMatchArg(0, "org.freedesktop.secrets")); err != nil {
		t.Fatal(err)
	}
	signals := make(chan *dbus.Signal, 8)
	conn.Signal(signals)

	gk := exec.Command("gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets")
	gk.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_RUNTIME_DIR="+dir)
	gk.Stdin = strings.NewReader("test-password") // the new login keyring's password, read from stdin by --unlock
	var gkLog peertest.Buffer
	gk.Stdout, gk.Stderr = &gkLog, &gkLog
	gk.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := gk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(gk) })
	select {
	case <-signals:
	case <-time.After(30 * time.Second):
		t.Fatalf("gnome-keyring-daemon did not take org.freedesktop.secrets in 30 s:\n%s", gkLog.String())
	}
}

func TestGatewayOAuthKeyringE2E(t *testing.T) {
	startSecretService(t)
	bin := buildBinary(t)
	as := oauthtest.Start(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	cfg := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\ndestinations:\n  remote:\n    type: streamable_http\n    url: "+as.MCPURL+
		"\n    protocol: legacy\n    oauth:\n      token_store: keyring\n      token_dir: "+tokens+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs peertest.Buffer
	runSB := func(args ...string) (int, string) {
		t.Helper()
		return runBrowsing(t, bin, &logs, args...)
	}

	base := startServe(t, bin, cfg, &logs)
	if st, msg := destState(t, base, "remote"); st != "needs_login" {
		t.Fatalf("/healthz before a login: %q %q; want needs_login", st, msg)
	}
	if code, out := runSB("auth", "login", "remote", "--config", cfg); code != 0 || !strings.Contains(out, "remote: logged in; ok") {
		t.Fatalf("auth login: exit %d\n%s", code, out)
	}
	if entries, err := os.ReadDir(tokens); err == nil && len(entries) > 0 || err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("token_dir after a keyring login: %v %v; want nothing on disk", entries, err)
	}
	if st, msg := destState(t, base, "remote"); st != "ready" {
		t.Fatalf("/healthz after the login: %q %q; want ready", st, msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/remote/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect through the gateway: %v\n%s", err, logs.String())
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("echo through the gateway: %v %+v\n%s", err, res, logs.String())
	}

	if code, out := runSB("auth", "logout", "remote", "--config", cfg); code != 0 || !strings.Contains(out, "remote: logged out") {
		t.Fatalf("auth logout: exit %d\n%s", code, out)
	}
	// The gateway sees the secret gone (its hash changed): needs_login.
	if st, msg := destState(t, base, "remote"); st != "needs_login" {
		t.Fatalf("/healthz after logout: %q %q; want needs_login", st, msg)
	}
	// Where no keyring can be reached, check warns (and does not fail).
	chk := exec.Command(bin, "check", "--config", cfg)
	chk.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS=unix:path="+filepath.Join(dir, "no-bus"))
	out, err := chk.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "warning: destination remote: oauth.token_store is keyring, but no OS keyring is available here") {
		t.Fatalf("check without a keyring: %v\n%s", err, out)
	}
	// No token reached any output or log.
	for _, sec := range as.Secrets() {
		if strings.Contains(logs.String(), sec) {
			t.Fatalf("a token or secret the server issued is in the output:\n%s", logs.String())
		}
	}
}

// TestRelayOAuthTokenStore: --oauth-token-store keyring keeps the relay's
// tokens in the keyring (go-keyring's mock here), an unknown store is a
// clear error, and an unreachable keyring is an error, never a file.
func TestRelayOAuthTokenStore(t *testing.T) {
	keyring.MockInit()
	dir := t.TempDir()
	relayClient := func(store string) error {
		fs := flag.NewFlagSet("relay", flag.ContinueOnError)
		f := addOAuthFlags(fs)
		if err := fs.Parse([]string{"--oauth-state-dir", dir, "--oauth-token-store", store}); err != nil {
			t.Fatal(err)
		}
		oc, err := relayOAuthClient("https://mcp.example/mcp", f, io.Discard, slog.New(slog.DiscardHandler))
		if oc != nil {
			oc.Close()
		}
		return err
	}
	if err := relayClient("keyring"); err != nil {
		t.Fatalf("--oauth-token-store keyring: %v", err)
	}
	if err := relayClient("vault"); err == nil || !strings.Contains(err.Error(), "want file or keyring") {
		t.Fatalf("--oauth-token-store vault: %v; want a clear error", err)
	}
	keyring.MockInitWithError(errors.New("no Secret Service"))
	if err := relayClient("keyring"); err == nil || !strings.Contains(err.Error(), "never kept in a file") {
		t.Fatalf("--oauth-token-store keyring without a keyring: %v; want an error", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files in --oauth-state-dir with the keyring store: %v", entries)
	}
}
