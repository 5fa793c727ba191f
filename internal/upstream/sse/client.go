// Package sse dials upstream servers that speak the legacy HTTP+SSE
// transport (protocol 2024-11-05): one long GET whose "message" events carry
// the server's messages, and a POST per message sent to the endpoint the
// server named. [ClientConn] implements upstream.Conn; the event stream is
// read with the codec of package internal/sse.
package sse

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/sse"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// ClientOptions configure a connection; URL is the SSE stream (GET).
type ClientOptions = upstream.HTTPOptions

// headerTimeout bounds the wait for the response headers of a request that
// is answered at once: the GET that opens the stream, and each POST (a
// legacy server answers every POST with 202 and sends the response on the
// stream).
const headerTimeout = 30 * time.Second

// maxQueued bounds the messages waiting to be POSTed; Write fails beyond it.
const maxQueued = 4096

// ErrConnClosed is the Err of a client connection ended by Close.
var ErrConnClosed = errors.New("sse: connection closed")

// ClientConn is a connection to a legacy HTTP+SSE server: one long GET
// whose "message" events carry the server's messages, and a POST to the
// endpoint the server named for each message sent. It implements
// upstream.Conn. Its methods are safe for concurrent use.
//
// The connection ends when the event stream does (the server restarted, or
// the network dropped): a legacy session cannot outlive its stream, so the
// upstream package dials a new one and replays the handshake.
type ClientConn struct {
	opts     ClientOptions
	base     *url.URL
	client   *http.Client
	log      *slog.Logger
	max      int
	deliver  func([]byte)
	oversize func([]byte)
	ctx      context.Context // cancelled, with the reason, when the connection ends
	cancel   context.CancelCauseFunc
	wg       sync.WaitGroup // the stream reader and the sender
	ready    chan struct{}  // closed at the first endpoint event
	wake     chan struct{}  // cap 1: the queue has messages
	done     chan struct{}

	mu sync.Mutex
	// The fields below are guarded by mu.
	endpoint *url.URL
	queue    [][]byte
	closed   bool // ended: no more writes
	err      error
}

// Dial opens the event stream at opts.URL and waits, within ctx, for the
// server's endpoint event. deliver is called for each message the server
// sends, with a slice valid only during the call; the stream's messages come
// from one goroutine in order, and errors synthesized for failed POSTs from
// another. oversize is called with the first bytes of each message over the
// size limit.
func Dial(ctx context.Context, opts ClientOptions, deliver func([]byte), oversize func([]byte)) (*ClientConn, error) {
	base, opts, err := opts.Resolve("sse")
	if err != nil {
		return nil, err
	}
	c := &ClientConn{
		opts:     opts,
		base:     base,
		client:   opts.HTTPClient,
		log:      opts.Logger,
		max:      opts.MaxMessage,
		deliver:  deliver,
		oversize: oversize,
		ready:    make(chan struct{}),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if c.oversize == nil {
		c.oversize = func([]byte) {}
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	// The stream outlives Dial; until it is established, ctx bounds it.
	stop := context.AfterFunc(ctx, func() { c.cancel(fmt.Errorf("dial: no endpoint event: %w", context.Cause(ctx))) })
	defer stop()

	resp, err := c.open()
	if err != nil {
		c.cancel(err)
		if ctx.Err() != nil {
			err = fmt.Errorf("dial: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("sse: %s: %w", upstream.Origin(base), err)
	}
	c.wg.Add(2)
	go c.readStream(resp)
	go c.sendLoop()
	select {
	case <-c.ready:
		if stop() {
			return c, nil
		}
	case <-c.done:
	case <-ctx.Done():
	}
	c.end(fmt.Errorf("dial: no endpoint event: %w", context.Cause(ctx)))
	<-c.done
	return nil, fmt.Errorf("sse: %s: %w", upstream.Origin(base), c.Err())
}

// open sends the GET that opens the event stream.
func (c *ClientConn) open() (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.base.String(), nil)
	if err != nil {
		return nil, err
	}
	upstream.CopyHeader(req.Header, c.opts.Header)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := upstream.DoWithin(c.client, req, headerTimeout)
	if err != nil {
		return nil, fmt.Errorf("upstream unreachable: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		detail := upstream.ErrorDetail(resp.Header, readPrefix(resp))
		resp.Body.Close()
		err := fmt.Errorf("upstream returned %s%s", resp.Status, detail)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			// The credentials were refused: re-dialling would be too.
			err = upstream.Permanent(err)
		}
		return nil, err
	}
	if ct := upstream.MediaType(resp.Header); ct != "text/event-stream" {
		resp.Body.Close()
		return nil, fmt.Errorf("upstream response is not MCP (Content-Type %s)", ct)
	}
	return resp, nil
}

// readStream reads the event stream until it ends, which ends the
// connection.
func (c *ClientConn) readStream(resp *http.Response) {
	defer c.wg.Done()
	defer resp.Body.Close()
	mr := sse.NewMessageReader(resp.Body, c.max, func(prefix []byte) {
		c.log.Warn("message from server exceeds the size limit; skipped", "limit_bytes", c.max)
		c.oversize(prefix)
	})
	for {
		ev, err := mr.Next()
		if err != nil {
			switch {
			case c.ctx.Err() != nil:
				c.end(context.Cause(c.ctx)) // ended already, or Dial's ctx ended
			case err == io.EOF:
				c.end(errors.New("upstream closed the event stream"))
			default:
				c.end(fmt.Errorf("event stream: %w", err))
			}
			return
		}
		switch ev.Name {
		case "endpoint":
			if err := c.setEndpoint(ev.Data); err != nil {
				c.log.Error("endpoint event refused", "err", err)
				c.end(err)
				return
			}
		case "message":
			if _, err := jsonrpc.Decode(ev.Data); err != nil {
				c.log.Warn("event that is not a JSON-RPC message skipped", "err", err, "data", audit.Clip(ev.Data, 256))
				continue
			}
			c.deliver(ev.Data)
		default:
			c.log.Debug("event ignored", "event", ev.Name)
		}
	}
}

// setEndpoint resolves the data of an endpoint event against the stream URL
// and takes it as the POST URL if it has the stream's origin.
func (c *ClientConn) setEndpoint(data []byte) error {
	ref := strings.TrimSpace(string(data))
	u, err := c.base.Parse(ref)
	if err != nil {
		return fmt.Errorf("invalid endpoint: %v", upstream.UnwrapURLError(err))
	}
	if !upstream.SameOrigin(u, c.base) {
		return fmt.Errorf("endpoint on another origin (%s, stream on %s) refused", upstream.Origin(u), upstream.Origin(c.base))
	}
	c.mu.Lock()
	first := c.endpoint == nil
	c.endpoint = u
	c.mu.Unlock()
	if first {
		close(c.ready)
	} else {
		c.log.Info("server moved its message endpoint", "endpoint_origin", upstream.Origin(u))
	}
	return nil
}

// Write queues one message to be POSTed to the endpoint, in order.
func (c *ClientConn) Write(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sse: write: %w", c.err)
	}
	if len(c.queue) >= maxQueued {
		return errors.New("sse: write: too many messages waiting to be sent")
	}
	c.queue = append(c.queue, bytes.Clone(msg))
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// sendLoop POSTs the queued messages one at a time, so the server receives
// them in the order they were written.
func (c *ClientConn) sendLoop() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		var msg []byte
		if len(c.queue) > 0 {
			msg = c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
		}
		c.mu.Unlock()
		if msg == nil {
			select {
			case <-c.wake:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		c.post(msg)
		if c.ctx.Err() != nil {
			return
		}
	}
}

// post sends one message. A legacy server answers 202 (some 200) and sends
// any response on the stream; when the POST fails, a request gets an error
// response here, so its caller never waits in vain.
func (c *ClientConn) post(msg []byte) {
	m, err := jsonrpc.Decode(msg)
	if err != nil {
		c.log.Error("invalid message not sent", "err", err)
		return
	}
	c.mu.Lock()
	ep := c.endpoint
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, ep.String(), bytes.NewReader(msg))
	if err != nil {
		c.fail(m, fmt.Sprintf("upstream request failed: %v", err))
		return
	}
	upstream.CopyHeader(req.Header, c.opts.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.opts.TraceHeader {
		upstream.SetTraceHeader(req.Header, m.Params)
	}
	resp, err := upstream.DoWithin(c.client, req, headerTimeout)
	if err != nil {
		if c.ctx.Err() == nil {
			c.fail(m, fmt.Sprintf("upstream unreachable: %v", err))
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return
	}
	c.fail(m, fmt.Sprintf("upstream returned %s%s", resp.Status, upstream.ErrorDetail(resp.Header, readPrefix(resp))))
	if resp.StatusCode == http.StatusNotFound {
		// The server no longer knows the session: only a new stream helps.
		c.end(errors.New("upstream session not found (POST returned 404 Not Found)"))
	}
}

// fail reports a message that could not be sent: a request gets an error
// response with its id.
func (c *ClientConn) fail(m *jsonrpc.Message, reason string) {
	c.log.Warn("message not delivered to server", "method", cmp.Or(m.Method, "response"), "err", reason)
	if m.IsRequest() {
		c.deliver(jsonrpc.NewError(m.ID, jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "%s", reason)).Encode())
	}
}

// end ends the connection with err (the first reason wins) and closes Done
// once every goroutine has stopped.
func (c *ClientConn) end(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.err = err
	c.queue = nil
	c.mu.Unlock()
	c.cancel(err)
	if !errors.Is(err, ErrConnClosed) {
		c.log.Warn("upstream connection ended", "err", err)
	}
	go func() {
		c.wg.Wait()
		close(c.done)
	}()
}

var _ upstream.Conn = (*ClientConn)(nil)

// Done is closed when the connection has ended and its goroutines have
// stopped; deliver is not called after that.
func (c *ClientConn) Done() <-chan struct{} { return c.done }

// Err tells why the connection ended; valid after Done.
func (c *ClientConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection and waits, within ctx, for its goroutines.
// Messages still queued are dropped.
func (c *ClientConn) Close(ctx context.Context) error {
	c.end(ErrConnClosed)
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readPrefix returns the first 4 KiB of resp's body.
func readPrefix(resp *http.Response) []byte {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return b
}
