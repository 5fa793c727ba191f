// Package guard checks what passes between MCP clients and servers: pins
// tool definitions against rug pulls (Define, Compare, Approve, the pin
// file), finds hidden characters and exfiltrating markup in descriptions
// and results, collisions across servers, and secrets and PII in results
// and arguments. It is pure functions and a file store; nothing here
// touches the network or the request path.
package guard
