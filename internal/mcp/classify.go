package mcp

import (
	"context"
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Switchboard's own JSON-RPC error codes, in the range JSON-RPC leaves to
// implementations (-32000 to -32099) and below the part MCP reserves for
// itself (-32020 on). The two the SDKs also use mean what they mean there
// (the TypeScript SDK's ConnectionClosed and RequestTimeout); the others
// are codes no SDK gives a meaning: the go-sdk reads -32003 and -32004 as
// its connection's end (ErrClientClosing, ErrServerClosing) and -32005 as
// a write its transport rejected.
const (
	CodeUpstreamUnavailable = -32000 // the server is down, restarting or refuses connections
	CodeUpstreamTimeout     = -32001 // no answer within the timeout
	CodeUpstreamTooLarge    = -32006 // a server's message exceeded the size limit
	CodeRequestRefused      = -32007 // Switchboard refused or ended the request (a rate limit, a cancelled call, a request it cannot route)
	// CodeOpenURL is the error of a client that cannot take
	// CodeURLElicitationRequired (URLElicitationFallback): the request
	// needs a person to open the URL in its message first. Answered with
	// HTTP 200.
	CodeOpenURL = -32008
)

// Coded is implemented by errors that know the answer they get: the
// sentinel errors of the packages below the fronts (upstream, session),
// made with Sentinel, so that Classify needs to import none of them.
type Coded interface {
	// Answer returns the HTTP status and the JSON-RPC error code.
	Answer() (httpStatus, code int)
}

// sentinel is a Coded error with a fixed text.
type sentinel struct {
	text         string
	status, code int
}

func (s *sentinel) Error() string                  { return s.text }
func (s *sentinel) Answer() (httpStatus, code int) { return s.status, s.code }

// Sentinel returns a new error with text that Classify answers with
// httpStatus and code, wherever it is in an error's chain (errors.As).
// Each call returns a distinct error, for errors.Is.
func Sentinel(text string, httpStatus, code int) error {
	return &sentinel{text: text, status: httpStatus, code: code}
}

// StatusClientClosed is the status of a request its client cancelled
// (nginx's 499): nobody reads it, the access log records it.
const StatusClientClosed = 499

// Classify maps a Go error to the HTTP status and the JSON-RPC error every
// front answers with; the fronts without HTTP statuses (the legacy SSE
// stream, stdio, the relay) send the JSON-RPC error alone. In order:
//
//   - a *jsonrpc.Error in err's chain is sent as it is; its status is 400
//     for a request Switchboard could not read (-32700, -32600, -32602)
//     and otherwise StatusFor(code, false);
//   - jsonrpc.ErrBatch: 400, -32600;
//   - a Coded error (the sentinels of upstream and session) gives its own
//     status and code, with err's text;
//   - context.DeadlineExceeded: 504, -32001 (UpstreamTimeout);
//   - context.Canceled: 499, -32603 "request cancelled";
//   - anything else is a fault of Switchboard's: 500, -32603 "internal
//     error" (the text, which may say too much, stays in the log).
//
// The faults of a server (it is down, exits, refuses connections, or
// times out) reach the fronts as upstream's ErrUnavailable or a
// jsonrpc.Error of code UpstreamUnavailable (503), UpstreamTimeout (504)
// or UpstreamTooLarge (502), or as context.DeadlineExceeded (504).
func Classify(err error) (httpStatus int, e *jsonrpc.Error) {
	var coded Coded
	switch {
	case err == nil:
		return http.StatusInternalServerError, jsonrpc.Errorf(jsonrpc.InternalError, "internal error")
	case errors.As(err, &e):
		switch e.Code {
		case jsonrpc.ParseError, jsonrpc.InvalidRequest, jsonrpc.InvalidParams:
			return http.StatusBadRequest, e
		}
		return StatusFor(e.Code, false), e
	case errors.Is(err, jsonrpc.ErrBatch):
		return http.StatusBadRequest, jsonrpc.Errorf(jsonrpc.InvalidRequest, "%v", err)
	case errors.As(err, &coded):
		status, code := coded.Answer()
		return status, jsonrpc.Errorf(code, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, jsonrpc.Errorf(CodeUpstreamTimeout, "%v", err)
	case errors.Is(err, context.Canceled):
		return StatusClientClosed, jsonrpc.Errorf(jsonrpc.InternalError, "request cancelled")
	}
	return http.StatusInternalServerError, jsonrpc.Errorf(jsonrpc.InternalError, "internal error")
}

// FaultCode is the JSON-RPC code of err as the fault of a server that does
// not serve a call (it is down, exited, refuses connections, timed out, or
// left the configuration): Classify's UpstreamTimeout or UpstreamTooLarge,
// else UpstreamUnavailable. An aggregated endpoint answers a call to such a
// member with it, as the member's own endpoint answers the same fault.
func FaultCode(err error) int {
	if _, e := Classify(err); e.Code == CodeUpstreamTimeout || e.Code == CodeUpstreamTooLarge {
		return e.Code
	}
	return CodeUpstreamUnavailable
}

// RPCError is the JSON-RPC error of Classify(err), for the fronts that
// answer without an HTTP status (the legacy SSE stream, stdio, the relay).
func RPCError(err error) *jsonrpc.Error {
	_, e := Classify(err)
	return e
}

// StatusFor is the HTTP status of a JSON-RPC error answered on its own
// rather than inside a server's result: 503, 504 and 502 for the codes
// Switchboard gives a server's faults, 400 for the 2026-07-28 request
// errors, and, when modern (a 2026-07-28 request), 404 for an unknown
// method and 400 for invalid params (a missing _meta), as that era
// requires. Every other code is a server's answer and travels with 200.
func StatusFor(code int, modern bool) int {
	switch code {
	case CodeUpstreamUnavailable:
		return http.StatusServiceUnavailable
	case CodeUpstreamTimeout:
		return http.StatusGatewayTimeout
	case CodeUpstreamTooLarge:
		return http.StatusBadGateway
	case jsonrpc.HeaderMismatch, jsonrpc.MissingRequiredClientCapability, jsonrpc.UnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	if modern {
		switch code {
		case jsonrpc.MethodNotFound:
			return http.StatusNotFound
		case jsonrpc.InvalidParams:
			return http.StatusBadRequest
		}
	}
	return http.StatusOK
}
