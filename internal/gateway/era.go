package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
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
//	                         client capabilities (legacyPool)
//	legacy      legacy/dual  d.shared or a private upstream per session, native
//	legacy      modern       era.LegacyOverModern over d.modern (pinned modern, or probed
//	                         modern-only; a dual-era server serves legacy sessions itself)
type eraState struct {
	d        *destination
	detector *era.Detector
	opts     era.Options

	mu       sync.Mutex
	toModern *era.ModernOverLegacy // guarded by mu
	toLegacy *era.LegacyOverModern // guarded by mu
	pool     *legacyPool           // guarded by mu; the connections toModern uses
	closed   bool                  // guarded by mu
}

func newEraState(d *destination, cfg *config.Destination, timeout time.Duration) *eraState {
	e := &eraState{d: d, opts: era.Options{Name: cfg.Name, Timeout: timeout, Logger: d.log}}
	switch {
	case cfg.Type == config.TypeSSE || cfg.Protocol == config.ProtocolLegacy:
		e.detector = era.Pinned(era.Legacy)
	case cfg.Protocol == config.ProtocolModern:
		e.detector = era.Pinned(era.Modern)
	default:
		e.detector = era.NewDetector(func(ctx context.Context) (era.Era, error) {
			v, _, err := era.Probe(ctx, nativeModern{d})
			if err == nil {
				d.log.Info("protocol era detected", "era", v.String())
			}
			return v, err
		})
	}
	return e
}

// nativeModern sends 2026-07-28 requests to the server itself.
type nativeModern struct{ d *destination }

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
		e.pool = &legacyPool{d: e.d, ups: map[string]*pooled{}}
		e.toModern = era.NewModernOverLegacy(e.pool, e.opts)
	}
	return e.toModern, nil
}

// maxPooled bounds the legacy connections kept for modern clients: one per
// distinct set of client capabilities.
const maxPooled = 8

// legacyPool holds the legacy connections that serve translated modern
// requests, one per distinct clientCapabilities: each is initialized with
// exactly the capabilities its clients declared, so the server relies on
// nothing they did not declare (2026-07-28 requires that per request). It
// implements era.Joiner.
type legacyPool struct {
	d *destination

	mu     sync.Mutex
	ups    map[string]*pooled // guarded by mu; by canonical capabilities
	keys   map[string]string  // guarded by mu; raw capabilities → canonical (bounded)
	closed bool               // guarded by mu
}

// maxKeys bounds legacyPool.keys: spellings of capabilities beyond it are
// canonicalised per call.
const maxKeys = 256

type pooled struct {
	up   *upstream.Upstream
	used time.Time
}

func (p *legacyPool) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	raw := jsonrpc.Member(init.Params, "capabilities")
	p.mu.Lock()
	key, known := p.keys[string(raw)]
	p.mu.Unlock()
	if !known {
		key = canonicalJSON(raw)
		p.mu.Lock()
		if p.keys == nil {
			p.keys = map[string]string{}
		}
		if len(p.keys) < maxKeys {
			p.keys[string(raw)] = key
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, upstream.ErrClosed
	}
	e := p.ups[key]
	var retired *upstream.Upstream
	if e == nil {
		if len(p.ups) >= maxPooled {
			// Retire the least recently used connection without members.
			var oldest string
			for k, v := range p.ups {
				if v.up.Members() == 0 && (oldest == "" || v.used.Before(p.ups[oldest].used)) {
					oldest = k
				}
			}
			if oldest != "" {
				retired = p.ups[oldest].up
				delete(p.ups, oldest)
			}
		}
		e = &pooled{up: p.d.newUp(p.d.dialer(nil), false, upstream.Legacy)}
		p.ups[key] = e
	}
	e.used = time.Now()
	up := e.up
	p.mu.Unlock()
	if retired != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = retired.Close(ctx)
		}()
	}
	m, res, err := up.Join(ctx, down, init)
	if err != nil {
		return nil, nil, err
	}
	return &memberBackend{Member: m, d: p.d}, res, nil
}

func (p *legacyPool) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	ups := p.ups
	p.ups = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range ups {
		wg.Go(func() { _ = e.up.Close(ctx) })
	}
	wg.Wait()
}

// canonicalJSON re-encodes v with sorted keys (encoding/json sorts map
// keys), so equal capability sets give equal keys.
func canonicalJSON(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return string(v)
	}
	b, _ := json.Marshal(x)
	return string(b)
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
