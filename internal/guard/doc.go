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
// The request path is package gate's (internal/guard/gate): a Gate per
// guarded destination applies the pins to its lists and calls and runs
// the detectors over call arguments and results; `switchboard pin`
// approves. docs/guards.md has the configuration and the measurements.
//
// Two scanners are the package's own, measured against what they replace:
// the keyword pass is an Aho-Corasick DFA over byte classes (about 1 ns a
// byte; the library it replaced followed failure links at about 8), and
// Walk reads JSON in place with jsonrpc's scanner instead of decoding it
// with encoding/json (a 1 MiB walk allocates about 200 B, not 3 MiB).
package guard
