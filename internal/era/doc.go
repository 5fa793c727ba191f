// Package era translates between the two MCP protocol eras, so a client of
// either era reaches a server of either era:
//
//   - Detection (Probe, Detector): a server's era is probed modern-first
//     with server/discover, cached, and forgotten when the connection to
//     the server is made again (a restart may bring another server).
//   - Modern client → legacy server (ModernOverLegacy): 2026-07-28 requests are
//     served over a legacy (initialize-handshake) connection. server/discover
//     is answered from the server's cached InitializeResult; each request
//     borrows a member of the connection initialized with its _meta
//     clientCapabilities (Joiner.Lend), so the server may ask only what the
//     client declared, and a member serves one request at a time, so a
//     server→client request reaches exactly the call that raised it;
//     a server→client request (sampling, elicitation, roots) raised during
//     tools/call, prompts/get or resources/read becomes an MRTR
//     input_required result whose requestState names the upstream call,
//     held open (parked) until the client retries with inputResponses or
//     the state expires; subscriptions/listen becomes a member that
//     subscribes to the resources asked for and passes list_changed and
//     resources/updated on, tagged with the subscription id.
//   - Legacy client → modern server (LegacyOverModern): Switchboard holds the session
//     the server does not have. initialize is answered from server/discover;
//     every request carries the session's protocol version, client
//     capabilities, client info and log level in _meta; the GET stream is
//     fed by subscriptions/listen (reopened when resources/subscribe changes
//     the set); an input_required result is turned into real
//     sampling/createMessage, elicitation/create and roots/list requests to
//     the client, whose answers go back as inputResponses on the retried
//     request.
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
