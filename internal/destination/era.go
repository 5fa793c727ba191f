package destination

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/era"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// eraState is a destination's protocol-era translation (package era): the
// detected (or pinned) era of its server and the translators, made when
// first needed.
//
//	client era  server era   path
//	modern      modern/dual  d.modern, native
//	modern      legacy       era.ModernOverLegacy over a legacy connection per distinct
//	                         client capabilities, a member lent per request (legacyPool)
//	legacy      legacy/dual  d.shared or a private upstream per session, native
//	legacy      modern       era.LegacyOverModern over d.modern (pinned modern, or probed
//	                         modern-only; a dual-era server serves legacy sessions itself)
type eraState struct {
	d        *Destination
	detector *era.Detector
	opts     era.Options

	mu       sync.Mutex
	toModern *era.ModernOverLegacy // guarded by mu
	toLegacy *era.LegacyOverModern // guarded by mu
	pool     *legacyPool           // guarded by mu; the connections toModern uses
	closed   bool                  // guarded by mu
}

func newEraState(d *Destination, timeout time.Duration) *eraState {
	e := &eraState{d: d, opts: era.Options{Name: d.name, Timeout: timeout, Logger: d.log, States: d.opts.States}}
	switch {
	case d.legacySSE() || d.opts.Era == era.Legacy:
		e.detector = era.Pinned(era.Legacy)
	case d.opts.Era == era.Modern:
		e.detector = era.Pinned(era.Modern)
	default:
		e.detector = era.NewDetector(func(ctx context.Context) (era.Era, error) {
			v, _, err := era.Probe(ctx, nativeModern{d})
			if err == nil {
				d.log.Info("protocol era detected", "era", v.String())
			}
			if err == nil && !v.ServesModern() {
				// Nothing uses the connection the probe made until the
				// verdict is forgotten (a connection restarted): a stdio
				// child would idle. The next probe starts it again.
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				d.modern.Stop(sctx)
				cancel()
			}
			return v, err
		})
	}
	return e
}

// nativeModern sends 2026-07-28 requests to the server itself.
type nativeModern struct{ d *Destination }

func (n nativeModern) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return n.d.nativeStateless(ctx, req)
}

// restarted forgets the detected era: the connection is made again, maybe
// to another server.
func (e *eraState) restarted(s upstream.State) {
	if s == upstream.Restarting {
		e.detector.Forget()
	}
}

// modernNative reports whether 2026-07-28 requests go to the server as they
// are (else they are translated). An unreachable server is asked natively,
// which reports why.
func (e *eraState) modernNative(ctx context.Context) bool {
	if e.d.modern == nil {
		return false
	}
	v, err := e.detector.Era(ctx)
	return err != nil || v.ServesModern()
}

// legacyTranslated reports whether legacy sessions are translated onto the
// server's 2026-07-28 side: when the config pins protocol: modern, or a
// probe (made for a modern client) found a modern-only server. A legacy
// session never costs a probe: a legacy or dual-era server keeps serving
// it natively, with its own sessions.
func (e *eraState) legacyTranslated(ctx context.Context) bool {
	if e.d.modern == nil {
		return false
	}
	return e.detector.Known() == era.Modern
}

// modernOverLegacy returns the translator for modern clients.
func (e *eraState) modernOverLegacy() (*era.ModernOverLegacy, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, upstream.ErrClosed
	}
	if e.toModern == nil {
		e.pool = &legacyPool{d: e.d}
		e.toModern = era.NewModernOverLegacy(e.pool, e.opts)
		e.pool.dropParked = e.toModern.DropParked
	}
	return e.toModern, nil
}

// legacyOverModern returns the translator for legacy clients.
func (e *eraState) legacyOverModern() *era.LegacyOverModern {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.toLegacy == nil {
		e.toLegacy = era.NewLegacyOverModern(nativeModern{e.d}, e.opts)
	}
	return e.toLegacy
}

// close cancels parked calls and stops the translation's own connection.
func (e *eraState) close(ctx context.Context) {
	e.mu.Lock()
	e.closed = true
	t, pool := e.toModern, e.pool
	e.mu.Unlock()
	if t != nil {
		t.Close()
	}
	if pool != nil {
		pool.close(ctx)
	}
}
