// Package stdio is the stdio front: it serves one MCP destination (normally
// an aggregating router) on a pair of streams, as a stdio MCP server does:
// newline-delimited JSON-RPC in, newline-delimited JSON-RPC out, one session.
// (Its counterpart on the upstream side, a child process, is upstream/stdio.)
//
// Requests are handled concurrently; every message is written whole, one per
// line, under one mutex. Nothing but protocol messages is ever written to
// out: logs go to the Logger.
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Destination is what the front serves (streamable.Destination's methods).
type Destination interface {
	Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
	Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error)
}

// Options configure Serve. Zero values are documented per field.
type Options struct {
	Name string // for logs and the session table
	// Timeout bounds the wait for each response; progress restarts it.
	// Zero means 30 s.
	Timeout time.Duration
	// MaxLine is the longest message accepted on in. Zero means 16 MiB.
	MaxLine int
	Logger  *slog.Logger // nil discards
}

// Serve runs the front until in ends (nil), ctx is done (ctx.Err()), or the
// session ends from the server side (an error). In-flight calls are
// abandoned and the session's backend left before it returns.
func Serve(ctx context.Context, dest Destination, in io.Reader, out io.Writer, opts Options) error {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = 16 << 20
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &front{dest: dest, opts: opts, log: log, out: bufio.NewWriter(out), cancels: map[string]context.CancelFunc{}}
	table := &session.Table{OnDrop: func(*session.Session) { log.Warn("stdio: message queue full; message dropped") }}
	s, err := table.New(opts.Name)
	if err != nil {
		return err
	}
	f.s = s
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.ctx = ctx

	var wg sync.WaitGroup
	defer func() {
		cancel()
		s.End(nil)
		wg.Wait()
	}()
	wg.Go(f.listen)

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { // not waited for: a read of stdin cannot be interrupted
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), opts.MaxLine)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Ended():
			return errors.New("stdio: the session ended (every server is gone)")
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("stdio: reading input: %w", err)
			}
			return nil
		case line := <-lines:
			f.handle(line, &wg)
		}
	}
}

type front struct {
	dest Destination
	opts Options
	log  *slog.Logger
	s    *session.Session
	ctx  context.Context

	wmu sync.Mutex
	out *bufio.Writer

	mu      sync.Mutex
	cancels map[string]context.CancelFunc // stateless requests in flight by id
}

// write sends one message, whole, on its own line.
func (f *front) write(m *jsonrpc.Message) {
	b := m.Encode()
	f.wmu.Lock()
	defer f.wmu.Unlock()
	_, _ = f.out.Write(b)
	_ = f.out.WriteByte('\n')
	if err := f.out.Flush(); err != nil {
		f.log.Debug("stdio: write failed", "err", err)
	}
}

// listen writes what the session's listen queue receives.
func (f *front) listen() {
	q := f.s.Listen()
	for {
		m, done := q.Poll()
		if done {
			return
		}
		if m != nil {
			f.write(m)
			continue
		}
		select {
		case <-q.Ready():
		case <-f.ctx.Done():
			return
		}
	}
}

func (f *front) handle(line []byte, wg *sync.WaitGroup) {
	if len(bytes.Trim(line, " \t\r")) == 0 {
		return
	}
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		f.write(jsonrpc.NewError(nil, mcp.RPCError(err)))
		return
	}
	b := f.s.Backend()
	switch {
	case msg.IsRequest():
		_, modern := jsonrpc.StringMember(msg.Params, "_meta", mcp.MetaProtocolVersion)
		switch {
		case b == nil && msg.Method == "initialize":
			// Synchronous: nothing else is read before the answer.
			backend, res, err := f.dest.Open(f.ctx, f.s, msg)
			if err != nil {
				f.log.Warn("stdio: initialize failed", "err", err)
				f.write(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
				return
			}
			f.s.SetBackend(backend)
			f.write(res)
		case modern || (b == nil && msg.Method == "server/discover"):
			wg.Go(func() { f.stateless(msg) })
		case b == nil && msg.Method == "ping":
			f.write(jsonrpc.NewResult(msg.ID, nil))
		case b == nil:
			f.write(jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.InvalidRequest, "%s: send initialize first", msg.Method)))
		case msg.Method == "initialize":
			f.write(jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.InvalidRequest, "session is already initialized")))
		default:
			wg.Go(func() {
				call, err := b.Call(f.ctx, msg)
				if err != nil {
					f.write(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
					return
				}
				f.pump(f.ctx, msg.ID, call)
			})
		}
	case msg.IsNotification():
		if msg.Method == "notifications/cancelled" {
			if rid := jsonrpc.Member(msg.Params, "requestId"); rid != nil {
				f.mu.Lock()
				c := f.cancels[string(rid)]
				f.mu.Unlock()
				if c != nil {
					c()
					return
				}
			}
		}
		if b != nil {
			if err := b.Notify(f.ctx, msg); err != nil {
				f.log.Debug("stdio: notification not forwarded", "method", msg.Method, "err", err)
			}
		}
	default:
		if b != nil {
			if err := b.Respond(f.ctx, msg); err != nil {
				f.log.Debug("stdio: response not forwarded", "err", err)
			}
		}
	}
}

// stateless serves a 2026-07-28 request; notifications/cancelled naming it
// cancels it.
func (f *front) stateless(msg *jsonrpc.Message) {
	ctx, cancel := context.WithCancel(f.ctx)
	key := string(msg.ID)
	f.mu.Lock()
	f.cancels[key] = cancel
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.cancels, key)
		f.mu.Unlock()
		cancel()
	}()
	call, err := f.dest.Stateless(ctx, msg)
	if err != nil {
		f.write(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
		return
	}
	f.pump(ctx, msg.ID, call)
}

// pump writes a call's messages, in order, until its response, with the
// response timeout (restarted by progress).
func (f *front) pump(ctx context.Context, id []byte, call session.Call) {
	if session.Forward(call, f.opts.Timeout, ctx.Done(), nil, f.write) {
		f.write(jsonrpc.NewError(id, jsonrpc.Errorf(mcp.CodeUpstreamTimeout, "no response within %s", f.opts.Timeout)))
	}
}
