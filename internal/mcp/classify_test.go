package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

func TestClassify(t *testing.T) {
	unavailable := Sentinel("upstream unavailable", http.StatusServiceUnavailable, CodeUpstreamUnavailable)
	closed := Sentinel("upstream closed", http.StatusNotFound, jsonrpc.InvalidRequest)
	own := jsonrpc.Errorf(CodeUpstreamTooLarge, "too large")
	for _, c := range []struct {
		name    string
		err     error
		status  int
		code    int
		message string // a part of it
	}{
		{"sentinel", unavailable, 503, CodeUpstreamUnavailable, "upstream unavailable"},
		{"wrapped sentinel keeps the text", fmt.Errorf("%w: d failed: exit status 1", unavailable), 503, CodeUpstreamUnavailable, "d failed: exit status 1"},
		{"sentinel before the deadline it wraps", fmt.Errorf("%w: d is starting: %w", unavailable, context.DeadlineExceeded), 503, CodeUpstreamUnavailable, "is starting"},
		{"another sentinel", fmt.Errorf("view: %w", closed), 404, jsonrpc.InvalidRequest, "upstream closed"},
		{"deadline", fmt.Errorf("d: %w", context.DeadlineExceeded), 504, CodeUpstreamTimeout, "deadline exceeded"},
		{"cancelled", context.Canceled, StatusClientClosed, jsonrpc.InternalError, "request cancelled"},
		{"jsonrpc error as it is", fmt.Errorf("x: %w", own), 502, CodeUpstreamTooLarge, "too large"},
		{"timeout code", jsonrpc.Errorf(CodeUpstreamTimeout, "slow"), 504, CodeUpstreamTimeout, "slow"},
		{"unreadable request", jsonrpc.Errorf(jsonrpc.ParseError, "bad"), 400, jsonrpc.ParseError, "bad"},
		{"invalid params", jsonrpc.Errorf(jsonrpc.InvalidParams, "missing _meta"), 400, jsonrpc.InvalidParams, "missing _meta"},
		{"header mismatch", jsonrpc.Errorf(jsonrpc.HeaderMismatch, "h"), 400, jsonrpc.HeaderMismatch, "h"},
		{"a server's own error code", jsonrpc.Errorf(jsonrpc.MethodNotFound, "nope"), 200, jsonrpc.MethodNotFound, "nope"},
		{"batch", jsonrpc.ErrBatch, 400, jsonrpc.InvalidRequest, "batch"},
		{"unknown: ours, text hidden", errors.New("secret detail"), 500, jsonrpc.InternalError, "internal error"},
		{"nil", nil, 500, jsonrpc.InternalError, "internal error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, e := Classify(c.err)
			if status != c.status || e == nil || e.Code != c.code || !strings.Contains(e.Message, c.message) {
				t.Fatalf("Classify(%v) = %d, %v; want %d, code %d, a message with %q", c.err, status, e, c.status, c.code, c.message)
			}
			if strings.Contains(e.Message, "secret") {
				t.Fatalf("message %q shows an unknown error's text", e.Message)
			}
			if r := RPCError(c.err); r.Code != e.Code || r.Message != e.Message {
				t.Fatalf("RPCError = %v, want %v", r, e)
			}
		})
	}
	if a, b := Sentinel("x", 503, -32000), Sentinel("x", 503, -32000); errors.Is(a, b) {
		t.Error("two sentinels of the same text are the same error")
	}
}

func TestStatusFor(t *testing.T) {
	for _, c := range []struct {
		code           int
		legacy, modern int
	}{
		{CodeUpstreamUnavailable, 503, 503},
		{CodeUpstreamTimeout, 504, 504},
		{CodeUpstreamTooLarge, 502, 502},
		{jsonrpc.UnsupportedProtocolVersion, 400, 400},
		{jsonrpc.MissingRequiredClientCapability, 400, 400},
		{jsonrpc.HeaderMismatch, 400, 400},
		{jsonrpc.MethodNotFound, 200, 404},
		{jsonrpc.InvalidParams, 200, 400},
		{jsonrpc.InternalError, 200, 200},
		{-32042, 200, 200},
	} {
		if got := StatusFor(c.code, false); got != c.legacy {
			t.Errorf("StatusFor(%d, legacy) = %d, want %d", c.code, got, c.legacy)
		}
		if got := StatusFor(c.code, true); got != c.modern {
			t.Errorf("StatusFor(%d, modern) = %d, want %d", c.code, got, c.modern)
		}
	}
}

func TestFaultCode(t *testing.T) {
	unavailable := Sentinel("upstream unavailable", http.StatusServiceUnavailable, CodeUpstreamUnavailable)
	for _, c := range []struct {
		name string
		err  error
		code int
	}{
		{"down", fmt.Errorf("d: %w", unavailable), CodeUpstreamUnavailable},
		{"timed out", fmt.Errorf("join: %w", context.DeadlineExceeded), CodeUpstreamTimeout},
		{"too large", jsonrpc.Errorf(CodeUpstreamTooLarge, "big"), CodeUpstreamTooLarge},
		{"refused at initialize", errors.New("dial tcp: connection refused"), CodeUpstreamUnavailable},
		{"removed by a reload", errors.New("removed from the view"), CodeUpstreamUnavailable},
		{"a server's own error", jsonrpc.Errorf(jsonrpc.InvalidParams, "x"), CodeUpstreamUnavailable},
	} {
		if got := FaultCode(c.err); got != c.code {
			t.Errorf("%s: FaultCode(%v) = %d, want %d", c.name, c.err, got, c.code)
		}
	}
}
