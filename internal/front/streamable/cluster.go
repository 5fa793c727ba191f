package streamable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/cluster/replica"
	"github.com/switchboard-mcp/switchboard/internal/sealed"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// clusterSession is lookupSession with a cluster: the id is a sealed
// token; a session this replica does not hold is adopted (its owner is
// gone, or the request was forwarded here). It writes the error answer
// and returns nil when the token does not open (404, as for an unknown
// session: a key rotated out, an altered byte, another caller) or the
// adoption fails.
func (h *Handler) clusterSession(w http.ResponseWriter, r *http.Request, token string) *session.Session {
	if s := h.opts.Sessions.Get(token); s != nil && s.Dest == h.opts.Name && s.Backend() != nil {
		return s
	}
	// Not here, or being set up: an adoption in progress (wait for it)
	// or an initialize not answered yet.
	h.adoptMu.Lock()
	defer h.adoptMu.Unlock()
	if s := h.opts.Sessions.Get(token); s != nil {
		if s.Dest != h.opts.Name || s.Backend() == nil {
			writeError(w, http.StatusNotFound, nil, errSessionNotFound)
			return nil
		}
		return s // adopted by a request that came first
	}
	a, err := h.opts.Cluster.Adopt(r.Context(), r.URL.Path, token)
	if errors.Is(err, sealed.ErrInvalid) {
		writeError(w, http.StatusNotFound, nil, errSessionNotFound)
		return nil
	}
	if err != nil {
		h.fail(w, a.Init, err)
		return nil
	}
	s, err := h.opts.Sessions.NewWithID(h.opts.Name, token, a.Name)
	if err != nil {
		h.fail(w, a.Init, err)
		return nil
	}
	b, err := h.replay(r.Context(), s, a)
	if err != nil {
		s.End(err)
		h.log.Warn("cluster: session not adopted", "session", a.Name, "err", err)
		h.fail(w, a.Init, fmt.Errorf("adopting the session: %w", err))
		return nil
	}
	s.SetBackend(b)
	return s
}

// replay opens s on this replica's upstream with the client's handshake
// and restores its state (log level, subscriptions).
func (h *Handler) replay(ctx context.Context, s *session.Session, a replica.Adoption) (session.Backend, error) {
	b, _, err := h.dest.Open(ctx, s, a.Init)
	if err != nil {
		return nil, err
	}
	if err := b.Notify(ctx, a.Initialized); err != nil {
		b.Leave()
		return nil, err
	}
	for _, m := range a.Restore {
		c, err := b.Call(ctx, m)
		if err == nil {
			err = h.await(ctx, c)
		}
		if err != nil {
			b.Leave()
			return nil, fmt.Errorf("restoring %s: %w", m.Method, err)
		}
	}
	return b, nil
}

// await waits for c's response (dropping what comes before it), within
// the handler's timeout.
func (h *Handler) await(ctx context.Context, c session.Call) error {
	t := time.NewTimer(h.opts.Timeout)
	defer t.Stop()
	for {
		m, ended := c.Poll()
		if m != nil && m.IsResponse() {
			if e := m.ErrorOf(); e != nil {
				return e
			}
		}
		if ended {
			return nil
		}
		if m != nil {
			continue
		}
		select {
		case <-c.Ready():
		case <-t.C:
			c.Abandon(true)
			return errors.New("no response in time")
		case <-ctx.Done():
			c.Abandon(true)
			return ctx.Err()
		}
	}
}
