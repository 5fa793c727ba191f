package destination

import (
	"context"
	"net/http"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/agentcore"
)

// agentCoreTarget is an AgentCore destination's runtime, resolved on
// the first dial (the caller's identity is asked once, in identity mode)
// and kept: its signer refreshes its own credentials. A failed resolution
// is retried by the next dial.
type agentCoreTarget struct {
	opts agentcore.Options

	mu sync.Mutex
	rt *agentcore.Runtime // guarded by mu; nil until resolved
}

func (a *agentCoreTarget) runtime(ctx context.Context) (*agentcore.Runtime, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rt != nil {
		return a.rt, nil
	}
	rt, err := agentcore.Resolve(ctx, a.opts)
	if err != nil {
		return nil, err
	}
	a.rt = rt
	return rt, nil
}

// dialer is the upstream.Dialer of one client session: its connections
// (a re-dial after a failure included) share one runtime session id, and
// carry the client's traceparent and tracestate.
func (a *agentCoreTarget) dialer(forward http.Header) upstream.Dialer {
	hdr := http.Header{}
	for _, k := range []string{"Traceparent", "Tracestate"} {
		if v := forward.Get(k); v != "" {
			hdr.Set(k, v)
		}
	}
	var mu sync.Mutex
	var dial upstream.Dialer // guarded by mu: the session's, once the runtime is resolved
	return func(ctx context.Context, deliver func([]byte), oversize func([]byte)) (upstream.Conn, error) {
		mu.Lock()
		if dial == nil {
			rt, err := a.runtime(ctx)
			if err != nil {
				mu.Unlock()
				return nil, err
			}
			dial = rt.Dialer(hdr)
		}
		d := dial
		mu.Unlock()
		return d(ctx, deliver, oversize)
	}
}
