// Package guard checks what passes between MCP clients and servers, as
// pure functions and a file store (no network, no request path of its own):
//
//   - pinning: Define digests a tool's pinned fields (RFC 8785 canonical
//     JSON, SHA-256), Compare sets a listing against a destination's pins
//     (approved, changed with a field diff, new, removed; a rename is new),
//     Approve records them, LoadPins/SavePins keep them beside the config;
//   - detectors (Detector.Scan, Findings carry rule and offset, never the
//     text): Hidden (tags, zero-width, bidi, ANSI/C1), Markup (exfiltrating
//     images and links), Secrets (gitleaks' rules as data), PII (e-mail,
//     cards, IBAN, national ids); CheckCatalog for cross-server shadowing;
//   - Walk and Rewrite run detectors over every string of a result or of
//     arguments (capped), ScanHeaders over Mcp-Param-* headers; Apply with
//     Placeholder redacts, with "" strips.
//
// Wiring (after the tree's restructuring; docs/guards.md has the config):
// the list hook is the router's visibleItems and a destination's own
// tools/list answer: Compare on every list and list_changed, monitor audits
// the diff, block drops Changed and New tools and the instructions; the call
// hook is decideTool (refuse what Allowed denies; code mode's calls take
// that route and execute's description is built from the filtered catalog),
// then Walk over arguments before forwarding and over the result before
// answering, each Finding one audit field and one metric increment
// (switchboard_guard_detections_total{detector,rule,action}).
package guard
