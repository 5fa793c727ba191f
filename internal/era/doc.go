// Package era translates between the two MCP protocol eras, so a client of
// either era reaches a server of either era:
//
//   - Detection (Probe, Detector): a server's era is probed modern-first
//     with server/discover, cached, and forgotten when the connection to
//     the server is made again (a restart may bring another server).
//   - Modern client → legacy server: ModernOverLegacy.
//   - Legacy client → modern server: LegacyOverModern.
//
// The package depends on small interfaces (Joiner, StatelessServer) that
// the gateway's destinations satisfy; it owns no connection itself.
//
// Contracts: every Call returned satisfies session.Call; a parked MRTR
// state is bounded (MaxParked) and expires (Options.StateTTL), after which
// its upstream call is cancelled and its member given back; a parked call
// holds only its own member, marked parked so the Joiner may end it to make
// room (DropParked); a requestState that is unknown, expired, dropped,
// already used, bound to another request or (with inbound auth) issued to
// another caller gets a -32602 error naming the problem, never a crash or
// a hang.
package era
