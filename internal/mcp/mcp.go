// Package mcp is Switchboard's one vocabulary of the Model Context
// Protocol: the protocol versions it speaks, the reserved _meta keys and
// HTTP header names, the _meta check every 2026-07-28 request must pass,
// the method tables of that era, and Classify, the one mapping from a Go
// error to the HTTP status and JSON-RPC error every front answers with.
//
// It imports only the standard library and internal/jsonrpc, so that every
// other package may use it.
package mcp

import "slices"

// Protocol versions.
const (
	// ModernVersion is the protocol version of the stateless era: no
	// initialize, every request carries _meta (MetaProtocolVersion,
	// MetaClientCapabilities).
	ModernVersion = "2026-07-28"
	// LatestLegacyVersion is the newest version of the legacy era (the
	// initialize handshake): what Switchboard asks servers for, and answers
	// clients that ask for a version it does not know.
	LatestLegacyVersion = "2025-11-25"
)

// legacyVersions are the legacy-era versions Switchboard speaks, oldest
// first.
var legacyVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", LatestLegacyVersion}

// LegacyVersions returns the legacy-era protocol versions Switchboard
// speaks, oldest first, in a new slice.
func LegacyVersions() []string { return slices.Clone(legacyVersions) }

// LegacyRank returns v's place among LegacyVersions (0 is the oldest), or
// -1 when v is not one of them.
func LegacyRank(v string) int { return slices.Index(legacyVersions, v) }

// IsLegacy reports whether v is a legacy-era version Switchboard speaks.
func IsLegacy(v string) bool { return LegacyRank(v) >= 0 }

// NegotiateLegacy is the legacy version answered to a client that asked
// for requested in its initialize: its own when Switchboard speaks it,
// else the latest.
func NegotiateLegacy(requested string) string {
	if IsLegacy(requested) {
		return requested
	}
	return LatestLegacyVersion
}

// Known reports whether Switchboard speaks protocol version v, of either
// era.
func Known(v string) bool { return v == ModernVersion || IsLegacy(v) }

// SupportedVersions returns every version Switchboard serves, newest
// first (as server/discover lists them), in a new slice.
func SupportedVersions() []string {
	out := append([]string{ModernVersion}, legacyVersions...)
	slices.Reverse(out[1:])
	return out
}

// Reserved _meta keys of requests and results.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"    // 2026-07-28 requests: required
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities" // 2026-07-28 requests: required, an object
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"         // 2026-07-28 requests: should
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"           // 2026-07-28 requests: optional
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"         // 2026-07-28 results
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"     // subscriptions/listen notifications
)

// HTTP header names, in canonical form (http.CanonicalHeaderKey), so that
// a look-up in an http.Header map needs no canonicalising.
const (
	HeaderSessionID       = "Mcp-Session-Id"       // legacy Streamable HTTP sessions
	HeaderProtocolVersion = "Mcp-Protocol-Version" // every request after initialize; every 2026-07-28 request
	HeaderMethod          = "Mcp-Method"           // 2026-07-28: the request's method
	HeaderName            = "Mcp-Name"             // 2026-07-28: params.name or params.uri
	HeaderParamPrefix     = "Mcp-Param-"           // 2026-07-28: mirrored tool arguments (x-mcp-header)
)

// removedMethods are legacy methods 2026-07-28 no longer has: a modern
// client gets -32601 for them, as from a modern server.
var removedMethods = []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
	"tasks/list", "tasks/result"}

// Removed reports whether method is a legacy method that 2026-07-28 no
// longer has.
func Removed(method string) bool { return slices.Contains(removedMethods, method) }

// Cacheable reports whether 2026-07-28 results of method carry ttlMs and
// cacheScope.
func Cacheable(method string) bool {
	switch method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover":
		return true
	}
	return false
}

// InputMethod reports whether a 2026-07-28 request of method may be
// answered with input_required (multi-round-trip requests).
func InputMethod(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}
