// Package sandbox runs code mode's scripts: JavaScript (ECMAScript 5.1 and
// most of ES6, in github.com/dop251/goja, a pure-Go interpreter) that calls
// the tools of one aggregated view and returns one result.
//
// Contracts:
//   - A script reaches nothing but what Run gives it: no file system, no
//     network, no process, no clock it can block on, no module loader.
//     Its only way out is the Caller, which the router implements with the
//     same routing, namespace filters and audit log as a client's calls.
//   - Every script runs in a worker process of its own, outside the
//     gateway's memory (see Runner). A worker's crash, out-of-memory or
//     runaway ends its script with an error (Result.Limit says which
//     bound) and never the gateway.
//   - Every run is bounded (see Limits): wall time, tool calls, printed
//     output and the result's size, call stack depth, memory, and on Linux
//     the worker's CPU time. A bound that is hit stops the script with an
//     error naming it, which no try/catch in the script can swallow. Run
//     never panics on a script's behalf.
//   - At most Limits.Concurrency scripts of one Runner run at once; the
//     others wait for a slot as long as their context allows, and at most
//     Limits.Timeout.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// Limits bound one script. Wall time (Timeout): the interpreter is
// interrupted, a regular expression's match gives up, the tool calls in
// flight end, and a worker still running KillGrace later is killed. Tool
// calls (MaxCalls), printed output and the result's size (MaxOutput), call
// stack depth, and on Linux the worker's CPU time (RLIMIT_CPU: the timeout
// plus KillGrace and a second, rounded up).
//
// Memory has two bounds. The hard one is the worker's address space
// (RLIMIT_AS on Linux): its size when it took the script plus twice Memory
// plus 256 MiB; an allocation past it ends the worker, and the script with
// limit "memory". A native call that does not see the interrupt is given
// stopGrace (100 ms), then the worker answers for the script and exits.
// The gentle one gives a clearer error sooner: while the script runs, a
// watchdog in the worker samples the Go heap every 5 ms (runtime/metrics)
// and stops the script once it has grown by more than Memory, after a garbage collection confirms it (at most one forced
// collection per 50 ms); and native calls that would allocate or walk past
// the bound in one go are refused up front (see guardNatives):
// String.prototype.repeat, padStart, padEnd and split check the size they
// would produce, Array.from and the Array.prototype methods that walk every
// index refuse arrays longer than memory/16 elements. The gateway holds of
// a script only its frames: a call's arguments (at most 4 MiB) and the
// result.
type Limits struct {
	Timeout     time.Duration // wall time
	Memory      int64         // heap growth, bytes
	MaxCalls    int           // tool calls
	MaxOutput   int64         // bytes of printed output, and of the result's JSON
	Concurrency int           // scripts of one Runner at once
	// Nice is added to the gateway's scheduling niceness for its workers
	// (1 to 19, the sum at most 19; 0: DefaultNice): a spinning script
	// gets a small share of a CPU the gateway wants.
	Nice int
	// Warm is how many started workers a Runner keeps waiting for a
	// script (0: 2, at most Concurrency).
	Warm int
}

// maxStack bounds the script's call depth.
const maxStack = 2048

// maxParallel bounds the calls of one parallel([...]) in flight at once.
const maxParallel = 16

// Caller makes the tool calls of a script.
type Caller interface {
	// CallTool calls a tool named as scripts name it: server and the tool's
	// name in scripts (server "" means tool is the exposed name). It
	// returns the CallToolResult, or an error: a *PermissionError when the
	// view does not offer the tool; a *ToolError when the call failed.
	CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error)
}

// PermissionError is a call to a server or tool the view does not offer.
type PermissionError struct{ Msg string }

func (e *PermissionError) Error() string { return e.Msg }

// ToolError is a call that failed: a JSON-RPC error, or an unavailable
// server.
type ToolError struct{ Msg string }

func (e *ToolError) Error() string { return e.Msg }

// LimitError is a bound that stopped a script.
type LimitError struct {
	Limit string // "timeout", "cancelled", "memory", "max_calls", "max_output"
	Msg   string
}

func (e *LimitError) Error() string { return e.Msg }

// Status values of a Result.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Result is what a run returns; it is execute's answer as JSON.
type Result struct {
	Status string `json:"status"`
	// Result is the script's value as JSON: the value of its last
	// expression statement, or what its body returns (a script with a
	// top-level return or await runs as an async function body).
	Result          json.RawMessage `json:"result"`
	Stdout          string          `json:"stdout"`
	Error           string          `json:"error,omitempty"`
	ExecutionTimeMS float64         `json:"execution_time_ms"`
	// Calls is the number of tool calls the script made.
	Calls int `json:"tool_calls"`
	// Limit names the bound that stopped the script, if one did.
	Limit string `json:"limit,omitempty"`
}

// runLocal runs script in this process (the worker's side of Run); abort
// is called instead of waiting for a stopped script that does not end
// (see run.abort). The execution time is Run's to measure.
func runLocal(ctx context.Context, l Limits, script string, c Caller, abort func(*Result)) *Result {
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	x := &run{ctx: ctx, cancel: cancel, limits: l, caller: c, abort: abort}
	return x.run(script)
}

// failed is the result of a run stopped by limit (see Result.Limit).
func failed(limit, msg string) *Result {
	return &Result{Status: StatusError, Result: json.RawMessage("null"), Limit: limit, Error: msg}
}

// run is one script's state.
type run struct {
	ctx    context.Context
	cancel context.CancelFunc // ends ctx: the calls in flight end with the script
	limits Limits
	caller Caller
	vm     *goja.Runtime

	stringify, parse goja.Callable

	// abort answers for a stopped script that has not ended stopGrace
	// later, and ends the process.
	abort func(*Result)

	mu      sync.Mutex
	stdout  strings.Builder
	calls   int
	stopped *LimitError // the first bound hit
	ended   bool        // run returned
}

// stop interrupts the script for a bound (the first one wins) and ends
// the tool calls it has in flight.
func (x *run) stop(e *LimitError) {
	x.mu.Lock()
	first := x.stopped == nil
	if first {
		x.stopped = e
	}
	x.mu.Unlock()
	x.vm.Interrupt(e)
	x.cancel()
	if first {
		// A native call (a string being built, a regular expression) does
		// not see the interrupt: past stopGrace the worker gives up on it.
		time.AfterFunc(stopGrace, func() {
			x.mu.Lock()
			ended := x.ended
			res := failed(x.stopped.Limit, x.stopped.Msg)
			res.Stdout, res.Calls = x.stdout.String(), x.calls
			x.mu.Unlock()
			if !ended {
				x.abort(res)
			}
		})
	}
}

// exceed stops the script for the bound e and throws it.
func (x *run) exceed(e *LimitError) {
	x.stop(e)
	panic(x.vm.NewGoError(e))
}

// stopGrace is how long a stopped script has to unwind before its worker
// answers for it and exits.
const stopGrace = 100 * time.Millisecond

// ctxEnded stops the script because its context ended: its deadline (the
// timeout) or the caller giving up.
func (x *run) ctxEnded() {
	if errors.Is(x.ctx.Err(), context.DeadlineExceeded) {
		x.stop(&LimitError{Limit: "timeout", Msg: fmt.Sprintf("timeout: the script ran longer than %s", x.limits.Timeout)})
	} else {
		x.stop(&LimitError{Limit: "cancelled", Msg: "cancelled: the call was abandoned"})
	}
}

func (x *run) limitHit() *LimitError {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stopped
}

func (x *run) run(script string) (res *Result) {
	res = &Result{Status: StatusOK, Result: json.RawMessage("null")}
	x.vm = goja.New()
	x.vm.SetMaxCallStackSize(maxStack)
	defer func() {
		if p := recover(); p != nil {
			// A bound hit inside a native call can unwind as a Go panic.
			res.Status, res.Error = StatusError, fmt.Sprintf("internal error: %v", p)
			if l := x.limitHit(); l != nil {
				res.Error, res.Limit = l.Msg, l.Limit
			}
		}
		x.mu.Lock()
		res.Stdout, res.Calls = x.stdout.String(), x.calls
		x.ended = true
		x.mu.Unlock()
	}()
	if err := x.install(); err != nil {
		res.Status, res.Error = StatusError, "internal error: "+err.Error()
		return res
	}

	// The watchdog and the deadline stop the interpreter.
	stopWatch := watch(x)
	defer stopWatch()
	stopTimer := context.AfterFunc(x.ctx, x.ctxEnded)
	defer stopTimer()

	v, err := x.eval(script)
	if err == nil {
		var out json.RawMessage
		out, err = x.export(v)
		if err == nil {
			res.Result = out
		}
	}
	if err != nil {
		// A bound's LimitError is x.stopped before it surfaces here.
		res.Status, res.Error = StatusError, err.Error()
		var so *goja.StackOverflowError
		if l := x.limitHit(); l != nil {
			res.Limit, res.Error = l.Limit, l.Msg
		} else if errors.As(err, &so) {
			res.Limit, res.Error = "stack", fmt.Sprintf("stack: the script's calls nested deeper than %d", maxStack)
		}
	}
	return res
}

// eval runs the script: as a script when it compiles as one (its value is
// that of its last expression statement), else as the body of an async
// function (top-level return and await). A promise is awaited.
func (x *run) eval(script string) (goja.Value, error) {
	prog, err := goja.Compile("script.js", script, false)
	if err != nil {
		var perr error
		prog, perr = goja.Compile("script.js", "(async function() {\n"+script+"\n})()", false)
		if perr != nil {
			return nil, err // the script's own syntax error
		}
	}
	v, err := x.vm.RunProgram(prog)
	if err != nil {
		return nil, err
	}
	if p, ok := v.Export().(*goja.Promise); ok {
		switch p.State() {
		case goja.PromiseStateFulfilled:
			return p.Result(), nil
		case goja.PromiseStateRejected: // what was thrown: "Name: message" for errors
			if r := p.Result(); r != nil && !goja.IsUndefined(r) {
				return nil, errors.New(r.String())
			}
			return nil, errors.New("undefined was thrown")
		default:
			return nil, errors.New("the script's promise never settled (only call_tool and parallel can be awaited)")
		}
	}
	return v, nil
}

// export turns the script's value into JSON (undefined is null).
func (x *run) export(v goja.Value) (json.RawMessage, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return json.RawMessage("null"), nil
	}
	s, err := x.stringify(goja.Undefined(), v)
	if err != nil {
		return nil, err
	}
	if goja.IsUndefined(s) { // a function, a symbol
		return json.RawMessage("null"), nil
	}
	out := s.String()
	if int64(len(out)) > x.limits.MaxOutput {
		e := &LimitError{Limit: "max_output", Msg: fmt.Sprintf("max_output: the result is %d bytes of JSON, more than %d", len(out), x.limits.MaxOutput)}
		x.mu.Lock()
		x.stopped = e
		x.mu.Unlock()
		return nil, e
	}
	return json.RawMessage(out), nil
}
