package gateway

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
)

// Tracing (internal/tracing): audited starts a request's trace and ends it
// with the audit record; every upstream call a traced request makes gets a
// client span (destination.Options.Traced). With tracing off (no `tracing`
// block) the gateway's tracer is nil, no destination is traced and none of
// this runs.

// tracerShutdownTimeout bounds the export of the last spans when Run ends.
const tracerShutdownTimeout = 5 * time.Second

// newTracer builds the gateway's tracer from the config Switchboard
// started with; nil when tracing is off.
func newTracer(cfg *config.Config) (*tracing.Tracer, error) {
	if !cfg.Tracing.Enabled {
		return nil, nil
	}
	return tracing.New(tracing.Options{Endpoint: cfg.Tracing.Endpoint, SampleRatio: cfg.Tracing.SampleRatio,
		ServiceName: cfg.Tracing.ServiceName, ServiceVersion: buildinfo.Version()})
}

// tracerCloser ends the tracer's exporter, flushing what is left, as the
// gateway's last closer.
type tracerCloser struct{ t *tracing.Tracer }

func (c tracerCloser) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), tracerShutdownTimeout)
	defer cancel()
	return c.t.Shutdown(ctx)
}
