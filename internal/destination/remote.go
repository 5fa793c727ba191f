package destination

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/sse"
	"github.com/switchboard-mcp/switchboard/internal/upstream/streamable"
)

// dialStreamable opens a connection to a remote Streamable HTTP server
// through client (nil: the transport's default client). traced copies each
// message's params._meta.traceparent into its POST's traceparent header.
func dialStreamable(ctx context.Context, url string, hdr http.Header, client *http.Client, maxMsg int, log *slog.Logger, traced bool, deliver, oversize func([]byte)) (upstream.Conn, error) {
	c, err := streamable.Dial(ctx, streamable.ClientOptions{URL: url, Header: hdr, HTTPClient: client, MaxMessage: maxMsg, Logger: log,
		TraceHeader: traced}, deliver, oversize)
	if err != nil {
		return nil, err // not a nil *ClientConn inside a non-nil Conn
	}
	return c, nil
}

// dialSSE opens a connection to a remote legacy HTTP+SSE server through
// client (nil: the transport's default client); traced as for
// dialStreamable.
func dialSSE(ctx context.Context, url string, hdr http.Header, client *http.Client, maxMsg int, log *slog.Logger, traced bool, deliver, oversize func([]byte)) (upstream.Conn, error) {
	c, err := sse.Dial(ctx, sse.ClientOptions{URL: url, Header: hdr, HTTPClient: client, MaxMessage: maxMsg, Logger: log,
		TraceHeader: traced}, deliver, oversize)
	if err != nil {
		return nil, err
	}
	return c, nil
}
