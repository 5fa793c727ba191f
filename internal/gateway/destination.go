package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/stdio"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// destination serves one configured stdio server to the fronts. It
// implements streamable.Destination (and the legacy SSE front's equivalent).
type destination struct {
	name      string
	cfg       *config.Destination
	isolation string
	newUp     func(shared bool, era upstream.Era) *upstream.Upstream

	// shared serves every legacy session when isolation is shared.
	shared *upstream.Upstream
	// modern serves 2026-07-28 requests (stateless; one process, started on
	// first use) so a process never has to mix protocol eras.
	modern *upstream.Upstream

	mu      sync.Mutex
	private map[*upstream.Upstream]struct{} // guarded by mu: per-session upstreams (isolation: session)
	closed  bool                            // guarded by mu
}

func newDestination(cfg *config.Destination, global *config.Config, log *slog.Logger) *destination {
	d := &destination{name: cfg.Name, cfg: cfg, isolation: cfg.Isolation, private: map[*upstream.Upstream]struct{}{}}
	argv := append(append([]string{}, cfg.Command...), cfg.Args...)
	env := stdio.Env(cfg.Env, cfg.Secrets)
	dlog := log.With("destination", cfg.Name)
	spec := stdio.Spec{Argv: argv, Env: env, Dir: cfg.Cwd, MaxLine: int(global.MaxMessageBytes), Logger: dlog}
	dial := func(ctx context.Context, deliver func([]byte), oversize func([]byte)) (upstream.Conn, error) {
		p, err := stdio.Start(spec, deliver, oversize)
		if err != nil {
			return nil, err
		}
		dlog.Info("process started", "pid", p.Pid())
		return p, nil
	}
	delays := restartDelays(global.Restart)
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = global.Timeout
	}
	d.newUp = func(shared bool, era upstream.Era) *upstream.Upstream {
		return upstream.New(upstream.Options{
			Name: cfg.Name, Dial: dial, Shared: shared, Era: era,
			RestartDelays: delays, HandshakeTimeout: timeout, Logger: log,
		})
	}
	if d.isolation != config.IsolationSession {
		d.shared = d.newUp(true, upstream.Legacy)
	}
	d.modern = d.newUp(true, upstream.Modern)
	return d
}

// restartDelays expands the policy into one delay per attempt.
func restartDelays(r config.Restart) []time.Duration {
	out := make([]time.Duration, r.MaxAttempts)
	for i := range out {
		switch {
		case len(r.Delays) == 0:
		case i < len(r.Delays):
			out[i] = r.Delays[i]
		default:
			out[i] = r.Delays[len(r.Delays)-1]
		}
	}
	return out
}

// Open attaches a legacy session.
func (d *destination) Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	up := d.shared
	var owned *upstream.Upstream
	if up == nil {
		owned = d.newUp(false, upstream.Legacy)
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, nil, upstream.ErrClosed
		}
		d.private[owned] = struct{}{}
		d.mu.Unlock()
		up = owned
	}
	m, res, err := up.Join(ctx, s, init)
	if err != nil {
		if owned != nil {
			d.release(owned)
		}
		return nil, nil, err
	}
	s.Version = m.Version()
	return &memberBackend{Member: m, d: d, owned: owned}, res, nil
}

// Stateless sends a 2026-07-28 request.
func (d *destination) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	c, err := d.modern.CallStateless(ctx, req)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (d *destination) release(up *upstream.Upstream) {
	d.mu.Lock()
	delete(d.private, up)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = up.Close(ctx)
}

// Close stops every process of the destination and waits for them.
func (d *destination) Close(ctx context.Context) {
	d.mu.Lock()
	d.closed = true
	ups := []*upstream.Upstream{d.modern}
	if d.shared != nil {
		ups = append(ups, d.shared)
	}
	for up := range d.private {
		ups = append(ups, up)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, up := range ups {
		wg.Go(func() { _ = up.Close(ctx) })
	}
	wg.Wait()
}

// State summarises the destination for /healthz.
func (d *destination) State() (string, string) {
	up := d.shared
	if up == nil {
		return "ready", "" // per-session processes start on demand
	}
	st, err := up.State()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return st.String(), msg
}

// memberBackend adapts an upstream member to session.Backend.
type memberBackend struct {
	*upstream.Member
	d     *destination
	owned *upstream.Upstream // the session's own upstream (isolation: session); nil when shared
}

func (b *memberBackend) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	c, err := b.Member.Call(ctx, req)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (b *memberBackend) Leave() {
	b.Member.Leave()
	if b.owned != nil {
		b.d.release(b.owned)
	}
}
