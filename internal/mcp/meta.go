package mcp

import (
	"strconv"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// CheckMeta checks the _meta every 2026-07-28 request must carry: a
// protocol version Switchboard serves (else -32022 with the supported
// versions) and client capabilities that are an object (else -32602).
// It returns nil when req passes.
func CheckMeta(req *jsonrpc.Message) *jsonrpc.Error {
	version, _, _, _ := req.LookupMeta(MetaProtocolVersion)
	caps, _, _, _ := req.LookupMeta(MetaClientCapabilities)
	return CheckMetaValues(version, caps)
}

// CheckMetaValues is CheckMeta on the raw JSON values of _meta's
// protocolVersion and clientCapabilities (nil when absent), for a caller
// that has read them already.
func CheckMetaValues(version, caps []byte) *jsonrpc.Error {
	if string(version) == `"`+ModernVersion+`"` && len(caps) > 0 && caps[0] == '{' {
		return nil // the common case, without decoding the version
	}
	v, ok := "", false
	if version != nil {
		v, ok = jsonrpc.String(version)
	}
	if !ok || v == "" {
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "missing _meta %q", MetaProtocolVersion)
	}
	if v != ModernVersion {
		return &jsonrpc.Error{Code: jsonrpc.UnsupportedProtocolVersion,
			Message: "unsupported protocol version " + strconv.Quote(v),
			Data:    jsonrpc.Marshal(map[string]any{"supported": []string{ModernVersion}, "requested": v})}
	}
	if len(caps) == 0 || caps[0] != '{' {
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "missing or invalid _meta %q", MetaClientCapabilities)
	}
	return nil
}
