package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// HTTPS (config tls): the listener of Serve speaks TLS with the
// certificate of the tls block, read again whenever its files change (the
// old one keeps serving when the new files do not load). With client_ca,
// client certificates are verified when given, and internal/auth maps
// their names to clients; a connection without one may still use a token.
// The block itself is read at start.

// tlsFiles holds the loaded certificate and client CAs.
type tlsFiles struct {
	cfg config.TLS
	log *slog.Logger
	cur atomic.Pointer[tlsState]
}

type tlsState struct {
	cert *tls.Certificate
	pool *x509.CertPool // nil: no client certificates asked for
}

func newTLSFiles(c *config.TLS, log *slog.Logger) (*tlsFiles, error) {
	t := &tlsFiles{cfg: *c, log: log}
	st, err := loadTLS(c)
	if err != nil {
		return nil, err
	}
	t.cur.Store(st)
	return t, nil
}

func loadTLS(c *config.TLS) (*tlsState, error) {
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("certificate %s / key %s: %w", c.Cert, c.Key, err)
	}
	st := &tlsState{cert: &cert}
	if c.ClientCA != "" {
		pem, err := os.ReadFile(c.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("client_ca: %w", err)
		}
		st.pool = x509.NewCertPool()
		if !st.pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("client_ca " + c.ClientCA + ": no PEM certificate in it")
		}
	}
	return st, nil
}

// config is the listener's TLS config: each handshake takes the current
// certificate and CAs.
func (t *tlsFiles) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := t.cur.Load()
			c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{*st.cert}}
			if st.pool != nil {
				c.ClientCAs, c.ClientAuth = st.pool, tls.VerifyClientCertIfGiven
			}
			return c, nil
		}}
}

// watch reloads the files when they change, until ctx ends.
func (t *tlsFiles) watch(ctx context.Context) {
	files := []string{filepath.Clean(t.cfg.Cert), filepath.Clean(t.cfg.Key)}
	if t.cfg.ClientCA != "" {
		files = append(files, filepath.Clean(t.cfg.ClientCA))
	}
	events, stop, err := watchDirs(dirsOf(files), func(dir string, err error) {
		t.log.Warn("tls watch failed", "dir", dir, "err", err)
	})
	if err != nil {
		t.log.Warn("tls watch unavailable: certificates are not reloaded", "err", err)
		return
	}
	defer stop()
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case name, ok := <-events:
			if !ok {
				return
			}
			if name == "" || slices.Contains(files, filepath.Clean(name)) {
				// A certificate and its key are often written one after
				// the other: wait for both.
				debounce = time.After(reloadDebounce)
			}
		case <-debounce:
			debounce = nil
			st, err := loadTLS(&t.cfg)
			if err != nil {
				t.log.Warn("tls files changed but do not load; the previous certificate keeps serving", "err", err)
				continue
			}
			t.cur.Store(st)
			t.log.Info("tls certificate reloaded", "cert", t.cfg.Cert, "not_after", st.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
}

// tlsConfig returns the listener's TLS config when the config has a tls
// block (nil without one), and starts the files' watcher; stop ends it
// (and waits).
func (g *Gateway) tlsConfig() (_ *tls.Config, stop func(), err error) {
	if g.static.TLS == nil {
		return nil, func() {}, nil
	}
	tf, err := newTLSFiles(g.static.TLS, g.log)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: tls: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tf.watch(ctx) }()
	return tf.config(), func() { cancel(); <-done }, nil
}
