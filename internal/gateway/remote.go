package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// dialStreamable and dialSSE open remote upstream connections.
func dialStreamable(ctx context.Context, url string, hdr http.Header, maxMsg int, log *slog.Logger, deliver, oversize func([]byte)) (upstream.Conn, error) {
	return nil, errors.New("streamable_http destinations are not available yet")
}

func dialSSE(ctx context.Context, url string, hdr http.Header, maxMsg int, log *slog.Logger, deliver, oversize func([]byte)) (upstream.Conn, error) {
	return nil, errors.New("sse destinations are not available yet")
}
