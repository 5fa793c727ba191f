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
	err = session.ListPages(ctx, b.Call, "tools/list", "switchboard-pin-", nil, func(_ int, result json.RawMessage) error {
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(result, &page); err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		out.Tools = append(out.Tools, page.Tools...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// discard is a downstream that takes nothing.
type discard struct{}

func (discard) Deliver(*jsonrpc.Message) {}
func (discard) End(error)                {}
