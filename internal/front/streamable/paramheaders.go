package streamable

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/mcpheader"
)

// checkParamHeaders validates the Mcp-Param-* headers of a 2026-07-28
// tools/call against the tool's x-mcp-header annotations (SEP-2243).
// Bindings come from Options.ParamHeaders; without it, or when it fails,
// the call goes through unvalidated (the failure is logged).
func (h *Handler) checkParamHeaders(r *http.Request, msg *jsonrpc.Message) *jsonrpc.Error {
	if msg.Method != "tools/call" || h.opts.ParamHeaders == nil {
		return nil
	}
	if v := r.Header.Get(mcp.HeaderProtocolVersion); v == "" || v < mcp.ModernVersion {
		return nil // no header–body validation before 2026-07-28
	}
	name, ok := msg.ParamName()
	if !ok {
		return nil
	}
	bindings, err := h.opts.ParamHeaders(r.Context(), msg, name)
	if err != nil {
		h.log.Warn("cannot learn the tool's x-mcp-header annotations; Mcp-Param-* headers not validated",
			"destination", h.opts.Name, "tool", name, "error", err)
		return nil
	}
	if err := mcpheader.ValidateParamHeaders(r.Header, msg.Params, bindings); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.HeaderMismatch, Message: err.Error()}
	}
	return nil
}
