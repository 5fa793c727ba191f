package gateway

import (
	"context"
	"errors"

	"github.com/switchboard-mcp/switchboard/internal/connlimit"
)

// ConnCounts are the connection limit's counts, for tests.
type ConnCounts = connlimit.Counts

// WaitConns waits until cond holds for the counts of the connection limit
// of a serving gateway, and returns them; or ctx's error.
func (g *Gateway) WaitConns(ctx context.Context, cond func(ConnCounts) bool) (ConnCounts, error) {
	l := g.lim.Load()
	if l == nil {
		return ConnCounts{}, errors.New("gateway: not serving")
	}
	return l.Wait(ctx, cond)
}
