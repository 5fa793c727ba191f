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
//     arguments (capped); Apply with Placeholder redacts, with "" strips.
//
// The request path is package gate's (internal/guard/gate): a Gate per
// guarded destination applies the pins to its lists and calls and runs
// the detectors over call arguments and results; `switchboard pin`
// approves. docs/guards.md has the configuration and the measurements.
//
// Two scanners are the package's own, each measured against what it
// replaces (docs/guards.md): the keyword pass, an Aho-Corasick DFA over
// byte classes, and Walk, which reads JSON in place with jsonrpc's scanner
// instead of decoding it with encoding/json.
package guard
