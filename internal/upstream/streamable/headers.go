package streamable

// Header names, and the _meta member that marks a 2026-07-28 request.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	metaVersionKey        = "io.modelcontextprotocol/protocolVersion"
)
