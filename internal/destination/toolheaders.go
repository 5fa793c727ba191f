package destination

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/mcpheader"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// The stdio upstream never sees HTTP headers, so the streamable front
// validates SEP-2243 Mcp-Param-* headers itself. What it validates against
// — each tool's x-mcp-header annotations — is learned here from the
// destination's own tools/list, asked through the modern upstream.

const (
	// defaultToolsTTL is how long a tools/list result is trusted when it
	// carries no ttlMs.
	defaultToolsTTL = 60 * time.Second
	// toolsFetchTimeout bounds one tools/list walk when the destination
	// has no timeout of its own.
	toolsFetchTimeout = 30 * time.Second
	// maxToolPages stops a tools/list walk that never ends.
	maxToolPages = 1000
)

// metaCopied are the _meta members of the client's request that the
// tools/list request carries too: what a 2026-07-28 server needs to answer.
var metaCopied = []string{
	mcp.MetaProtocolVersion,
	mcp.MetaClientCapabilities,
	mcp.MetaClientInfo,
}

// toolsListSeq numbers Switchboard's own tools/list requests.
var toolsListSeq atomic.Int64

// toolHeaders caches one destination's tool name → x-mcp-header bindings.
// The zero value is an empty cache.
type toolHeaders struct {
	mu       sync.Mutex
	tools    map[string][]mcpheader.ParamBinding // guarded by mu; nil until the first fetch succeeds
	expires  time.Time                           // guarded by mu
	inflight *toolsFetch                         // guarded by mu; the fetch under way, if any
}

// toolsFetch is one tools/list walk, shared by every request that needs it.
// tools and err are set before done is closed.
type toolsFetch struct {
	done  chan struct{}
	tools map[string][]mcpheader.ParamBinding
	err   error
}

// ParamHeaders returns the x-mcp-header bindings of tool (nil for a tool
// without annotations or not listed). It serves streamable.Options.ParamHeaders:
// a tool missing from a fresh cache, or any tool once the cache is stale,
// costs one tools/list walk, shared by concurrent callers.
func (d *Destination) ParamHeaders(ctx context.Context, req *jsonrpc.Message, tool string) ([]mcpheader.ParamBinding, error) {
	t := &d.toolHeaders
	t.mu.Lock()
	if t.tools != nil && time.Now().Before(t.expires) {
		if b, ok := t.tools[tool]; ok {
			t.mu.Unlock()
			return b, nil
		}
	}
	f := t.inflight
	lead := f == nil
	if lead {
		f = &toolsFetch{done: make(chan struct{})}
		t.inflight = f
	}
	t.mu.Unlock()

	if lead {
		// The walk serves every waiter, so it does not end with this
		// caller's request; it is bounded by its own timeout.
		timeout := d.opts.ListTimeout
		if timeout <= 0 {
			timeout = toolsFetchTimeout
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		tools, ttl, err := d.listTools(fctx, req)
		cancel()
		t.mu.Lock()
		if err == nil {
			t.tools, t.expires = tools, time.Now().Add(ttl)
		}
		t.inflight = nil
		t.mu.Unlock()
		f.tools, f.err = tools, err
		close(f.done)
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.tools[tool], nil
}

// listTools walks the destination's tools/list (following nextCursor) and
// returns every tool's bindings and how long the result may be cached: the
// smallest ttlMs of its pages, else defaultToolsTTL.
func (d *Destination) listTools(ctx context.Context, req *jsonrpc.Message) (map[string][]mcpheader.ParamBinding, time.Duration, error) {
	meta := map[string]json.RawMessage{}
	for _, k := range metaCopied {
		if v := jsonrpc.Member(req.Params, "_meta", k); v != nil {
			meta[k] = v
		}
	}
	tools := map[string][]mcpheader.ParamBinding{}
	ttl := time.Duration(-1)
	var cursor *string
	seen := map[string]bool{}
	for range maxToolPages {
		params := map[string]any{"_meta": meta}
		if cursor != nil {
			params["cursor"] = *cursor
		}
		id := jsonrpc.Quote("switchboard-tools-list-" + strconv.FormatInt(toolsListSeq.Add(1), 10))
		res, err := d.roundTrip(ctx, jsonrpc.NewRequest(id, "tools/list", jsonrpc.Marshal(params)))
		if err != nil {
			return nil, 0, fmt.Errorf("tools/list: %w", err)
		}
		var page struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
			TTLMs      *int64  `json:"ttlMs"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, 0, fmt.Errorf("tools/list: malformed result: %w", err)
		}
		for _, tl := range page.Tools {
			tools[tl.Name] = mcpheader.ExtractBindings(tl.InputSchema)
		}
		// A translated (legacy) server's list carries Switchboard's own
		// ttlMs 0, which says nothing of the server: the default applies.
		if page.TTLMs != nil && *page.TTLMs >= 0 && d.eras.modernNative(ctx) {
			if p := time.Duration(*page.TTLMs) * time.Millisecond; ttl < 0 || p < ttl {
				ttl = p
			}
		}
		// An empty string is a valid cursor; a repeated one ends the walk.
		if page.NextCursor == nil || seen[*page.NextCursor] {
			if ttl < 0 {
				ttl = defaultToolsTTL
			}
			return tools, ttl, nil
		}
		seen[*page.NextCursor] = true
		cursor = page.NextCursor
	}
	return nil, 0, fmt.Errorf("tools/list: more than %d pages", maxToolPages)
}

// roundTrip sends one stateless request through the modern upstream and
// returns its result. Related notifications are dropped.
func (d *Destination) roundTrip(ctx context.Context, req *jsonrpc.Message) (json.RawMessage, error) {
	c, err := d.stateless(ctx, req) // era-aware (translated for a legacy server), outside the limits
	if err != nil {
		return nil, err
	}
	m, err := session.Drain(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	if e := m.ErrorOf(); e != nil {
		return nil, e
	}
	return m.Result, nil
}
