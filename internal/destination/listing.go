package destination

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Listing is what a destination lists: its tools (as the server wrote
// them) and its instructions (nil: none).
type Listing struct {
	Tools        []json.RawMessage
	Instructions *string
}

// ListTools joins d as a client of its own, lists its tools (every page, at
// most 100) and leaves.
func ListTools(ctx context.Context, d *Destination) (*Listing, error) {
	init := jsonrpc.NewRequest(jsonrpc.IntID(0), "initialize", jsonrpc.Marshal(map[string]any{
		"protocolVersion": mcp.LatestLegacyVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]string{"name": "switchboard-pin", "version": "1"}}))
	b, res, err := d.Join(ctx, discard{}, init)
	if err != nil {
		return nil, err
	}
	defer b.Leave()
	if e := res.ErrorOf(); e != nil {
		return nil, e
	}
	out := &Listing{}
	if s, ok := jsonrpc.StringMember(res.Result, "instructions"); ok {
		out.Instructions = &s
	}
	_ = b.Notify(ctx, jsonrpc.NewNotification("notifications/initialized", nil))
	cursor := ""
	for i := 1; i <= 100; i++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		c, err := b.Call(ctx, jsonrpc.NewRequest(jsonrpc.IntID(int64(i)), "tools/list", jsonrpc.Marshal(params)))
		if err != nil {
			return nil, err
		}
		resp, err := session.Drain(ctx, c, nil)
		if err != nil {
			return nil, err
		}
		if e := resp.ErrorOf(); e != nil {
			return nil, e
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		out.Tools = append(out.Tools, page.Tools...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	return out, nil
}

// discard is a downstream that takes nothing.
type discard struct{}

func (discard) Deliver(*jsonrpc.Message) {}
func (discard) End(error)                {}
