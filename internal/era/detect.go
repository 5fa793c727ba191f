package era

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Era is what a server speaks.
type Era int

const (
	Unknown Era = iota // not probed yet (or the probe could not reach it)
	Legacy             // 2025-11-25 and earlier only: initialize handshake
	Modern             // 2026-07-28 only (stateless)
	Dual               // both: answers server/discover listing 2026-07-28 and a legacy version
)

func (e Era) String() string { return [...]string{"unknown", "legacy", "modern", "dual"}[e] }

// ServesModern reports whether the server answers 2026-07-28 requests itself.
func (e Era) ServesModern() bool { return e == Modern || e == Dual }

// StatelessServer serves 2026-07-28 requests (a modern-era connection).
type StatelessServer interface {
	Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error)
}

// ProbeTimeout bounds a probe: a server that does not answer server/discover
// within it is legacy (spec: "any other error or timeout ⇒ legacy").
const ProbeTimeout = 5 * time.Second

// discoverParams are the params of the probe's server/discover.
var discoverParams = json.RawMessage(`{"_meta":{"` + mcp.MetaProtocolVersion + `":"` + mcp.ModernVersion + `","` +
	mcp.MetaClientCapabilities + `":{},"` + mcp.MetaClientInfo + `":{"name":"switchboard","version":"1"}}}`)

// ErrUnreachable is returned by Probe when the server could not be asked at
// all (it did not start, its host refused): nothing is learnt or cached.
var ErrUnreachable = errors.New("era probe: server unreachable")

// Probe asks srv server/discover and classifies the answer, as a dual-era
// client must: a DiscoverResult naming 2026-07-28 is modern (dual when it
// names a legacy version too); a recognised modern error (-32020, -32021,
// -32022 naming 2026-07-28) is modern; any other answer, error or timeout
// is legacy. It also returns the DiscoverResult, when there was one.
func Probe(ctx context.Context, srv StatelessServer) (Era, json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	req := jsonrpc.NewRequest(json.RawMessage(`"switchboard-probe"`), "server/discover", discoverParams)
	c, err := srv.Stateless(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return Legacy, nil, nil
		}
		return Unknown, nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	resp, err := session.Drain(ctx, c, nil)
	if err != nil {
		return Legacy, nil, nil // timeout: legacy
	}
	return classify(resp)
}

// classify is Probe's verdict on the response to server/discover.
func classify(resp *jsonrpc.Message) (Era, json.RawMessage, error) {
	if e := resp.ErrorOf(); e != nil {
		switch e.Code {
		case jsonrpc.HeaderMismatch, jsonrpc.MissingRequiredClientCapability:
			return Modern, nil, nil
		case jsonrpc.UnsupportedProtocolVersion:
			var d struct {
				Supported []string `json:"supported"`
			}
			_ = json.Unmarshal(e.Data, &d)
			if slices.Contains(d.Supported, mcp.ModernVersion) {
				return Modern, nil, nil
			}
			return Legacy, nil, nil
		case mcp.CodeUpstreamUnavailable:
			if strings.Contains(e.Message, "unreachable") || strings.Contains(e.Message, "not connected") {
				return Unknown, nil, fmt.Errorf("%w: %s", ErrUnreachable, e.Message)
			}
		}
		return Legacy, nil, nil
	}
	var d struct {
		Supported []string `json:"supportedVersions"`
	}
	if json.Unmarshal(resp.Result, &d) != nil || !slices.Contains(d.Supported, mcp.ModernVersion) {
		return Legacy, nil, nil
	}
	for _, v := range d.Supported {
		if v < mcp.ModernVersion {
			return Dual, resp.Result, nil
		}
	}
	return Modern, resp.Result, nil
}

// Detector caches a server's era: Era probes once (concurrent callers wait
// for the one probe) and Forget drops the verdict (the connection was made
// again). A pinned Detector never probes.
type Detector struct {
	probe func(ctx context.Context) (Era, error)

	mu     sync.Mutex // held during a probe
	era    Era
	pinned bool
}

// NewDetector returns a Detector that probes with probe.
func NewDetector(probe func(ctx context.Context) (Era, error)) *Detector {
	return &Detector{probe: probe}
}

// Pinned returns a Detector that always answers e (config protocol: legacy
// or modern).
func Pinned(e Era) *Detector { return &Detector{era: e, pinned: true} }

// Era returns the cached era, probing when there is none. An unreachable
// server is reported as an error and not cached.
func (d *Detector) Era(ctx context.Context) (Era, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.era != Unknown {
		return d.era, nil
	}
	e, err := d.probe(ctx)
	if err != nil {
		return Unknown, err
	}
	d.era = e
	return e, nil
}

// Known returns the cached era without probing (Unknown when none).
func (d *Detector) Known() Era {
	if !d.mu.TryLock() {
		return Unknown // a probe is running
	}
	defer d.mu.Unlock()
	return d.era
}

// Forget drops the cached verdict of an auto Detector, so the next Era
// probes again.
func (d *Detector) Forget() {
	if d.pinned {
		return
	}
	d.mu.Lock()
	d.era = Unknown
	d.mu.Unlock()
}
