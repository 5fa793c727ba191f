package destination

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/sse"
	"github.com/switchboard-mcp/switchboard/internal/upstream/streamable"
)

// dialHTTP opens a connection to the remote Streamable HTTP or (h.SSE)
// legacy HTTP+SSE server of h with hdr, through client (nil: the
// transport's default client). traced copies each message's
// params._meta.traceparent into its POST's traceparent header.
func dialHTTP(ctx context.Context, h *HTTP, hdr http.Header, client *http.Client, maxMsg int, log *slog.Logger, traced bool, deliver, oversize func([]byte)) (upstream.Conn, error) {
	if h.SSE {
		c, err := sse.Dial(ctx, sse.ClientOptions{URL: h.URL, Header: hdr, HTTPClient: client, MaxMessage: maxMsg, Logger: log,
			TraceHeader: traced}, deliver, oversize)
		if err != nil {
			return nil, err // not a nil *ClientConn inside a non-nil Conn
		}
		return c, nil
	}
	c, err := streamable.Dial(ctx, streamable.ClientOptions{URL: h.URL, Header: hdr, HTTPClient: client, MaxMessage: maxMsg, Logger: log,
		TraceHeader: traced}, deliver, oversize)
	if err != nil {
		return nil, err
	}
	return c, nil
}
