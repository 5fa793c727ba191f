package gateway

import (
	"context"
	"errors"
)

// ConnCounts are the connection limit's counts, for tests.
type ConnCounts struct {
	Main, Reserved int // open connections under the cap and in the reserve
	BusyMain       int // of Main, those with a request in progress
	Added          int // connections counted in since Serve began
}

// WaitConns waits until cond holds for the counts of the connection limit
// of a serving gateway, and returns them; or ctx's error.
func (g *Gateway) WaitConns(ctx context.Context, cond func(ConnCounts) bool) (ConnCounts, error) {
	for {
		l := g.lim.Load()
		if l == nil {
			return ConnCounts{}, errors.New("gateway: not serving")
		}
		l.mu.Lock()
		c := ConnCounts{Main: l.nMain, Reserved: l.nRes, Added: l.added}
		for lc := range l.conns {
			if !lc.reserved && !lc.idle {
				c.BusyMain++
			}
		}
		if cond(c) {
			l.mu.Unlock()
			return c, nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return c, context.Cause(ctx)
		}
	}
}
