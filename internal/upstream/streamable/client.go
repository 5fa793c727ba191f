// Package streamable dials upstream servers that speak MCP's Streamable
// HTTP transport, in both protocol eras: [ClientConn] implements
// upstream.Conn, each Write one POST whose answer (JSON or an event stream,
// read with package internal/sse) is delivered as it arrives, with the
// session's GET stream, resumption, and the handshake replayed when the
// server loses the session. Its front-side counterpart is front/streamable;
// the two share only the header codec (internal/mcpheader).
package streamable

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/backoff"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/mcpheader"
	"github.com/switchboard-mcp/switchboard/internal/sse"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Client tuning. Variables so tests can shorten them.
var (
	// headerTimeout bounds the wait for the response headers of a message
	// that is answered at once: a notification or response (202), a GET,
	// a DELETE. A request has no such bound: a server answering in JSON
	// sends its headers only with the result, however long the tool runs.
	headerTimeout = 30 * time.Second
	// orderTimeout is how long a notification or response holds back the
	// next message while its 202 is awaited.
	orderTimeout = 10 * time.Second
	// listenBackoff is the first wait before reopening a dropped listen
	// stream; it doubles up to listenBackoffMax (internal/backoff, jittered).
	listenBackoff    = time.Second
	listenBackoffMax = 30 * time.Second
	// resumeAttempts is how many GETs with Last-Event-ID are tried, without
	// progress in between, before a dropped response stream is given up.
	resumeAttempts = 3
	// resumeDelay is the wait before resuming when the server set no retry.
	resumeDelay = time.Second
	// maxRetry caps the wait a server can ask for with "retry:".
	maxRetry = 30 * time.Second
)

const prefixLen = 4096 // bytes of an oversized message reported

// ErrConnClosed is the Err of a client connection ended by Close.
var ErrConnClosed = errors.New("streamable: connection closed")

// ClientOptions configure a Streamable HTTP upstream connection; URL is
// the MCP endpoint.
type ClientOptions = upstream.HTTPOptions

// ClientConn is a connection to a Streamable HTTP server. It implements
// upstream.Conn: each Write is one POST, made on a goroutine the connection
// owns, and whatever the server answers (a JSON body, or the events of an
// SSE response) is delivered as it arrives. Its methods are safe for
// concurrent use.
//
// Legacy era: the response to the initialize POST names the session
// (Mcp-Session-Id) and the protocol version, which later requests carry; the
// connection then keeps a GET listen stream open for the server's own
// requests and notifications. When the server forgets the session (404) the
// connection replays the initialize handshake it saw and retries, so a
// restarted server costs the clients nothing; so it does when a request is
// refused as by a server that lost its handshake (see replay.go). Each
// replay is announced to the client with a notifications/message (logger
// "switchboard"). Close deletes the session.
//
// Modern era (2026-07-28): a message whose params carry
// _meta["io.modelcontextprotocol/protocolVersion"] is sent with that
// version and the Mcp-Method and Mcp-Name headers, and without a session.
//
// Every failure to get a request answered (network error, HTTP error status,
// a body that is not MCP, a stream that ends early) is delivered as a
// JSON-RPC error response with the request's id, so no call waits in vain.
type ClientConn struct {
	opts          ClientOptions
	reinitialized chan struct{} // cap 1; see Reinitialized

	// bindings are the x-mcp-header annotations of the tools the server
	// listed (2026-07-28 tools/list answers seen on this connection), so a
	// tools/call can carry its Mcp-Param-* headers as a client must.
	bmu      sync.Mutex
	bindings map[string][]mcpheader.ParamBinding // guarded by bmu; by tool name
	url      string
	client   *http.Client
	log      *slog.Logger
	max      int
	deliver  func([]byte)
	oversize func([]byte)
	ctx      context.Context // cancelled, with the reason, when the connection ends
	cancel   context.CancelCauseFunc
	wg       sync.WaitGroup // every goroutine of the connection
	kick     chan struct{}  // cap 1: the session changed; reopen the listen stream now
	done     chan struct{}

	mu sync.Mutex
	// The fields below are guarded by mu.
	closed    bool
	err       error
	sessionID string
	version   string             // negotiated legacy protocol version
	initMsg   []byte             // the initialize request, replayed after session loss
	initedMsg []byte             // the notifications/initialized, replayed likewise
	listening bool               // the listen loop was started
	tail      chan struct{}      // released once the last message written is on its way
	reinit    *reinitTask        // the re-initialization in progress
	inflight  map[string]*flight // requests awaiting their response, by id
	refused   bool               // the server answered initialize with 401 or 403
	epoch     uint64             // counts re-initializations; see post.epoch
	replays   []time.Time        // when the handshake was replayed after an error answer (last minute)
}

// post is one message to send.
type post struct {
	body   []byte
	msg    *jsonrpc.Message
	id     json.RawMessage // set for a request
	init   bool            // an initialize request
	modern string          // the protocol version of a 2026-07-28 message
	ctx    context.Context // ends when the connection does or the request is cancelled
	prev   <-chan struct{} // released when the previous message is on its way
	sent   chan struct{}   // released when this one is
	once   sync.Once
	cancel string // the request a legacy notifications/cancelled names

	staleRetried bool // sent again after a kept-alive connection turned out closed

	sid    string // the session id the request carried
	epoch  uint64 // the connection's epoch when the request was built
	resent int    // times sent again after a handshake replay (see replayHandshake)
}

func (p *post) release() { p.once.Do(func() { close(p.sent) }) }

// learnTools records the x-mcp-header bindings of the tools in a
// 2026-07-28 tools/list answer (one page: entries are merged).
func (c *ClientConn) learnTools(p *post, m *jsonrpc.Message) {
	if p.modern == "" || p.msg.Method != "tools/list" || m.Result == nil {
		return
	}
	var res struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(m.Result, &res) != nil {
		return
	}
	c.bmu.Lock()
	defer c.bmu.Unlock()
	if c.bindings == nil {
		c.bindings = map[string][]mcpheader.ParamBinding{}
	}
	for _, t := range res.Tools {
		if b := mcpheader.ExtractBindings(t.InputSchema); b != nil {
			c.bindings[t.Name] = b
		} else {
			delete(c.bindings, t.Name)
		}
	}
}

// staleConnection reports whether err is how a request on a connection the
// server had closed fails: EOF or a reset before any response.
func staleConnection(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// flight is a request in flight.
type flight struct {
	cancel context.CancelFunc
	modern bool
}

type reinitTask struct {
	done chan struct{}
	err  error
}

// Dial validates opts and returns a connection at once: nothing is sent
// until the first Write (normally initialize). deliver is called for each
// message received, with a slice valid only during the call: the messages of
// one HTTP response in order, different responses possibly concurrently.
// oversize is called with the first bytes of each message over the size
// limit.
func Dial(ctx context.Context, opts ClientOptions, deliver func([]byte), oversize func([]byte)) (*ClientConn, error) {
	u, opts, err := opts.Resolve("streamable")
	if err != nil {
		return nil, err
	}
	c := &ClientConn{
		reinitialized: make(chan struct{}, 1),
		opts:          opts,
		url:           u.String(),
		client:        opts.HTTPClient,
		log:           opts.Logger,
		max:           opts.MaxMessage,
		deliver:       deliver,
		oversize:      oversize,
		kick:          make(chan struct{}, 1),
		done:          make(chan struct{}),
		inflight:      map[string]*flight{},
	}
	if c.oversize == nil {
		c.oversize = func([]byte) {}
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	return c, nil
}

var (
	_ upstream.Conn          = (*ClientConn)(nil)
	_ upstream.Refuser       = (*ClientConn)(nil)
	_ upstream.Reinitializer = (*ClientConn)(nil)
)

// Write sends one message on its own POST and returns without waiting for
// the answer. Messages reach the server in the order they were written: a
// POST starts once the previous one's request is sent and, for a
// notification or response, acknowledged (up to orderTimeout).
//
// A notifications/cancelled for a request sent in the 2026-07-28 form is
// not sent: that era cancels by closing the request's stream, which the
// connection does. For a legacy request it is sent, and then the request's
// stream is closed too.
func (c *ClientConn) Write(msg []byte) error {
	body := bytes.Clone(msg)
	m, err := jsonrpc.Decode(body)
	if err != nil {
		return fmt.Errorf("streamable: write: %w", err)
	}
	p := &post{body: body, msg: m, sent: make(chan struct{})}
	if m.IsRequest() {
		p.id = m.ID
		p.init = m.Method == "initialize"
	}
	if m.Method != "" {
		p.modern, _ = m.MetaString(mcp.MetaProtocolVersion)
	}
	var target string
	if m.Method == "notifications/cancelled" {
		if raw := jsonrpc.Member(m.Params, "requestId"); raw != nil {
			target = idKey(raw)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("streamable: write: %w", c.err)
	}
	if f := c.inflight[target]; target != "" && f != nil {
		if f.modern {
			f.cancel()
			return nil
		}
		p.cancel = target
	}
	switch {
	case p.init:
		c.initMsg = body
	case m.Method == "notifications/initialized":
		c.initedMsg = body
	}
	p.ctx = c.ctx
	if p.id != nil {
		ctx, cancel := context.WithCancel(c.ctx)
		p.ctx = ctx
		c.inflight[idKey(p.id)] = &flight{cancel: cancel, modern: p.modern != ""}
	}
	p.prev, c.tail = c.tail, p.sent
	c.wg.Add(1)
	go c.send(p)
	return nil
}

// send runs one POST to its end.
func (c *ClientConn) send(p *post) {
	defer c.wg.Done()
	defer p.release()
	if p.id != nil {
		defer c.forget(p.id)
	}
	if p.prev != nil {
		select {
		case <-p.prev:
		case <-p.ctx.Done():
			c.failEnded(p)
			return
		}
	}
	c.exchange(p, false)
	if p.cancel != "" {
		c.mu.Lock()
		f := c.inflight[p.cancel]
		c.mu.Unlock()
		if f != nil {
			f.cancel()
		}
	}
}

func (c *ClientConn) forget(id json.RawMessage) {
	c.mu.Lock()
	if f := c.inflight[idKey(id)]; f != nil {
		f.cancel()
		delete(c.inflight, idKey(id))
	}
	c.mu.Unlock()
}

// exchange POSTs p and handles the answer. retried is set for the one retry
// after a re-initialization.
func (c *ClientConn) exchange(p *post, retried bool) {
	req, sid, err := c.newPost(p)
	if err != nil {
		c.failPost(p, fmt.Sprintf("upstream request failed: %v", err))
		return
	}
	var resp *http.Response
	var reused bool // the request went out on a kept-alive connection
	gotConn := func(info httptrace.GotConnInfo) { reused = info.Reused }
	if p.id != nil {
		trace := &httptrace.ClientTrace{GotConn: gotConn, WroteRequest: func(httptrace.WroteRequestInfo) { p.release() }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err = c.client.Do(req)
		err = upstream.UnwrapURLError(err)
	} else {
		trace := &httptrace.ClientTrace{GotConn: gotConn, WroteRequest: func(httptrace.WroteRequestInfo) {
			time.AfterFunc(orderTimeout, p.release)
		}}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err = upstream.DoWithin(c.client, req, headerTimeout)
	}
	p.release()
	if err != nil && reused && !p.staleRetried && p.ctx.Err() == nil && staleConnection(err) {
		// The server closed the kept-alive connection (it restarted) as the
		// request went out on it; the server never read it. Send it again,
		// once, on a new connection, as net/http does by itself for
		// idempotent requests.
		p.staleRetried = true
		c.log.Debug("kept-alive connection was closed by the upstream; sending again")
		c.exchange(p, retried)
		return
	}
	var login urlElicitation
	if err != nil && p.id != nil && p.ctx.Err() == nil && errors.As(err, &login) {
		// The HTTP client (an OAuth destination) started a login for a
		// person to complete: the client is told the URL (the router
		// rewrites this for a client that cannot take -32042).
		id, u, msg := login.Elicitation()
		c.log.Info("upstream needs a login; the client is given its URL", "method", p.msg.Method)
		if p.init {
			// A new connection would meet the same login (see Refused).
			c.mu.Lock()
			c.refused = true
			c.mu.Unlock()
		}
		c.deliver(jsonrpc.NewError(p.id, mcp.URLElicitationRequired(id, u, msg)).Encode())
		return
	}
	if err != nil {
		if p.ctx.Err() != nil {
			c.failEnded(p)
		} else {
			c.failPost(p, fmt.Sprintf("upstream unreachable: %v", err))
		}
		return
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if p.init && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			// The credentials were refused: a new connection would be too
			// (see Refused).
			c.mu.Lock()
			c.refused = true
			c.mu.Unlock()
		}
		if e := answerIn(body, p.id); e != nil {
			// The server answered the request with an HTTP error status
			// (a 2026-07-28 server does: 400 with -32020, 404 with -32601).
			c.deliver(e)
			return
		}
		if resp.StatusCode == http.StatusNotFound && sid != "" && !retried {
			c.log.Info("upstream session expired; re-initializing", "method", p.msg.Method)
			if err := c.recover(sid); err != nil {
				if !abandoned(p) {
					c.failPost(p, fmt.Sprintf("upstream session expired and could not be re-established: %v", err))
				}
				return
			}
			c.exchange(p, true)
			return
		}
		c.failPost(p, fmt.Sprintf("upstream returned %s%s", resp.Status, upstream.ErrorDetail(resp.Header, body)))
		return
	}

	if p.init {
		c.learnSession(resp.Header)
	}
	if p.id == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if p.msg.Method == "notifications/initialized" {
			c.startListen()
		}
		return
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		c.failPost(p, fmt.Sprintf("upstream accepted the request without answering it (%s)", resp.Status))
		return
	}
	switch ct := upstream.MediaType(resp.Header); ct {
	case "application/json":
		c.readJSON(p, resp.Body)
	case "text/event-stream":
		c.readStream(p, resp.Body)
	default:
		c.failPost(p, fmt.Sprintf("upstream response is not MCP (Content-Type %s)", ct))
	}
}

// urlElicitation is an error of the HTTP client that a person can cure
// by visiting a URL (oauth.LoginRequiredError): what an MCP URL-mode
// elicitation carries.
type urlElicitation interface {
	Elicitation() (id, url, message string)
}

// newPost builds the POST for p. sid is the session id it carries.
func (c *ClientConn) newPost(p *post) (req *http.Request, sid string, err error) {
	var version string
	if p.modern == "" && !p.init {
		c.mu.Lock()
		sid, version = c.sessionID, c.version
		p.sid, p.epoch = sid, c.epoch
		c.mu.Unlock()
	}
	req, err = c.jsonPost(p.ctx, bytes.NewReader(p.body), sid, version)
	if err != nil {
		return nil, "", err
	}
	if c.opts.TraceHeader {
		upstream.SetTraceHeader(req.Header, p.msg.Params)
	}
	if p.modern != "" {
		req.Header.Set(mcp.HeaderProtocolVersion, p.modern)
		req.Header.Set(mcp.HeaderMethod, p.msg.Method)
		var key string
		switch p.msg.Method {
		case "tools/call", "prompts/get":
			key = "name"
		case "resources/read":
			key = "uri"
		}
		if key != "" {
			if v, ok := jsonrpc.StringMember(p.msg.Params, key); ok {
				req.Header.Set(mcp.HeaderName, mcpheader.EncodeHeaderValue(v))
				if p.msg.Method == "tools/call" {
					c.bmu.Lock()
					b := c.bindings[v]
					c.bmu.Unlock()
					maps.Copy(req.Header, mcpheader.ParamHeaderValues(p.msg.Params, b))
				}
			}
		}
	}
	return req, sid, nil
}

// jsonPost builds a POST of body on session sid ("" none) with protocol
// version version ("" none).
func (c *ClientConn) jsonPost(ctx context.Context, body io.Reader, sid, version string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, body)
	if err != nil {
		return nil, err
	}
	c.setHeaders(req, sid, version)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req, nil
}

// readJSON delivers a JSON answer to request p.
func (c *ClientConn) readJSON(p *post, body io.Reader) {
	b, err := io.ReadAll(io.LimitReader(body, int64(c.max)+1))
	if err != nil {
		if p.ctx.Err() != nil {
			c.failEnded(p)
		} else {
			c.failPost(p, fmt.Sprintf("upstream response could not be read: %v", err))
		}
		return
	}
	if len(b) > c.max {
		c.tooLarge(p, b[:min(len(b), prefixLen)])
		return
	}
	msgs := []json.RawMessage{b}
	if bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("[")) {
		// A batch: 2025-03-26 servers may answer with one.
		if err := json.Unmarshal(b, &msgs); err != nil || len(msgs) == 0 {
			c.failPost(p, "upstream response is not MCP (invalid JSON batch)")
			return
		}
	}
	answered := false
	for _, raw := range msgs {
		m, err := jsonrpc.Decode(raw)
		if err != nil {
			c.failPost(p, fmt.Sprintf("upstream response is not MCP (%s)", rpcReason(err)))
			return
		}
		if len(msgs) == 1 && c.isAnswer(p, m) && c.replayHandshake(p, m) {
			return
		}
		if c.isAnswer(p, m) {
			answered = true
			c.learnTools(p, m)
		}
		c.deliver(raw)
	}
	if !answered {
		c.failPost(p, "upstream answered without a response to the request")
	}
}

// readStream delivers the events of an SSE answer to request p until its
// response, resuming the stream with GET and Last-Event-ID when it drops
// early and the server gave its events ids.
func (c *ClientConn) readStream(p *post, body io.ReadCloser) {
	answered, oversized := false, false
	var lastID string
	progressID := ""
	failures := 0
	var retry time.Duration // the server's last "retry:", which holds until it sets another
	var resumeErr error     // why the last resumption failed
	for {
		mr := sse.NewMessageReader(body, c.max, func(prefix []byte) {
			oversized = true
			if id, ok := jsonrpc.PeekID(prefix); ok && sameID(id, p.id) {
				answered = true // the upstream package fails the call
			}
			c.skipOversize(prefix)
		})
		err := c.readEvents(mr, func(raw []byte, m *jsonrpc.Message) bool {
			if c.isAnswer(p, m) && c.replayHandshake(p, m) {
				answered = true // by the retry, already delivered
				return true
			}
			if c.isAnswer(p, m) {
				answered = true
				c.learnTools(p, m)
			}
			c.deliver(raw)
			return answered
		})
		body.Close()
		if answered {
			return
		}
		if p.ctx.Err() != nil {
			c.failEnded(p)
			return
		}
		if id := mr.LastEventID(); id != "" {
			lastID = id
		}
		if lastID == "" {
			if oversized {
				c.tooLarge(p, nil)
			} else {
				c.failPost(p, "upstream closed the response stream before answering")
			}
			return
		}
		if lastID != progressID {
			progressID, failures = lastID, 0
		}
		if failures >= resumeAttempts {
			if resumeErr != nil {
				err = resumeErr
			}
			c.failPost(p, fmt.Sprintf("upstream response stream dropped and could not be resumed: %v", err))
			return
		}
		failures++
		if r := mr.Retry(); r > 0 {
			retry = min(r, maxRetry)
		}
		delay := retry
		if delay <= 0 {
			delay = resumeDelay
		}
		c.log.Debug("response stream dropped; resuming", "err", err, "attempt", failures, "delay", delay)
		if !sleep(p.ctx, delay) {
			c.failEnded(p)
			return
		}
		resp, _, err := c.get(p.ctx, lastID)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			err = fmt.Errorf("upstream returned %s", resp.Status)
		}
		if err != nil {
			if p.ctx.Err() != nil {
				c.failEnded(p)
				return
			}
			c.log.Debug("resuming the response stream failed", "err", err)
			resumeErr = err
			body = io.NopCloser(strings.NewReader(""))
			continue
		}
		body = resp.Body
	}
}

// readAnswer reads the answer to a POST of the connection's own (the
// replayed initialize, a probe), JSON or an event stream, and hands its
// messages to fn as readEvents does.
func (c *ClientConn) readAnswer(resp *http.Response, fn func(raw []byte, m *jsonrpc.Message) bool) error {
	switch ct := upstream.MediaType(resp.Header); ct {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.max)+1))
		if err != nil {
			return err
		}
		m, err := jsonrpc.Decode(b)
		if err != nil {
			return fmt.Errorf("upstream response is not MCP (%s)", rpcReason(err))
		}
		fn(b, m)
		return nil
	case "text/event-stream":
		if err := c.readEvents(sse.NewMessageReader(resp.Body, c.max, c.oversize), fn); err != nil {
			return fmt.Errorf("response stream: %v", err)
		}
		return nil
	default:
		return fmt.Errorf("upstream response is not MCP (Content-Type %s)", ct)
	}
}

// readEvents reads mr until fn returns true or the stream ends, and returns
// why it ended (nil when fn stopped it).
func (c *ClientConn) readEvents(mr *sse.MessageReader, fn func(raw []byte, m *jsonrpc.Message) bool) error {
	for {
		ev, err := mr.Next()
		if err != nil {
			return err
		}
		if ev.Name != "message" {
			continue
		}
		m, err := jsonrpc.Decode(ev.Data)
		if err != nil {
			c.log.Warn("event that is not a JSON-RPC message skipped", "err", err, "data", audit.Clip(ev.Data, 256))
			continue
		}
		if fn(ev.Data, m) {
			return nil
		}
	}
}

// isAnswer reports whether m is the response to p, and learns the protocol
// version from the response to initialize.
func (c *ClientConn) isAnswer(p *post, m *jsonrpc.Message) bool {
	if !m.IsResponse() || !sameID(m.ID, p.id) {
		return false
	}
	if p.init && m.Result != nil {
		if v, ok := jsonrpc.StringMember(m.Result, "protocolVersion"); ok {
			c.mu.Lock()
			c.version = v
			c.mu.Unlock()
		}
	}
	return true
}

// learnSession takes the session id from the response to initialize. No
// header is a server without sessions (allowed, and common): nothing to
// report. A header that is not a valid id is ignored with a warning.
func (c *ClientConn) learnSession(h http.Header) {
	sid := h.Get(mcp.HeaderSessionID)
	if sid != "" && !validSessionID(sid) {
		c.log.Warn("upstream sent an invalid session id; ignored")
		sid = ""
	}
	c.mu.Lock()
	c.sessionID = sid
	c.mu.Unlock()
}

// tooLarge handles an answer over the size limit: prefix (nil if the
// reader reported it already) goes to oversize, which fails the call when
// it finds its id; otherwise the call gets an error here.
func (c *ClientConn) tooLarge(p *post, prefix []byte) {
	if prefix != nil {
		c.skipOversize(prefix)
		if id, ok := jsonrpc.PeekID(prefix); ok && sameID(id, p.id) {
			return
		}
	}
	c.deliver(jsonrpc.NewError(p.id, jsonrpc.Errorf(mcp.CodeUpstreamTooLarge, "upstream response exceeds the message size limit (%d bytes)", c.max)).Encode())
}

// skipOversize reports a message over the size limit, which is skipped.
func (c *ClientConn) skipOversize(prefix []byte) {
	c.log.Warn("message from server exceeds the size limit; skipped", "limit_bytes", c.max)
	c.oversize(prefix)
}

// failPost reports a message that did not get through: a request gets a
// -32000 error response with its id.
func (c *ClientConn) failPost(p *post, reason string) {
	c.log.Warn("upstream exchange failed", "method", cmp.Or(p.msg.Method, "response"), "err", reason)
	if p.id != nil {
		c.deliver(jsonrpc.NewError(p.id, jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "%s", reason)).Encode())
	}
}

// abandoned reports whether p's exchange was stopped on purpose: by Close,
// or by the request's cancellation. Nobody waits for its answer then.
func abandoned(p *post) bool {
	cause := context.Cause(p.ctx)
	return errors.Is(cause, ErrConnClosed) || errors.Is(cause, context.Canceled)
}

// failEnded reports a message whose exchange the end of the connection
// stopped, unless it was abandoned.
func (c *ClientConn) failEnded(p *post) {
	if !abandoned(p) {
		c.failPost(p, fmt.Sprintf("upstream connection ended: %v", context.Cause(p.ctx)))
	}
}

// recover re-initializes a session the server no longer knows (lost is the
// id it forgot). Concurrent callers share one attempt; a caller whose
// session was already replaced returns at once. If it fails the connection
// ends.
func (c *ClientConn) recover(lost string) error {
	c.mu.Lock()
	if c.sessionID != lost {
		c.mu.Unlock()
		return nil
	}
	if t := c.reinit; t != nil {
		c.mu.Unlock()
		select {
		case <-t.done:
			return t.err
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
	}
	if c.initMsg == nil {
		c.mu.Unlock()
		return errors.New("no initialize request to replay")
	}
	t := &reinitTask{done: make(chan struct{})}
	c.reinit = t
	initMsg, initedMsg := c.initMsg, c.initedMsg
	c.mu.Unlock()

	sid, version, err := c.reinitialize(initMsg, initedMsg)
	c.mu.Lock()
	c.reinit = nil
	if err == nil {
		c.sessionID, c.version = sid, version
	}
	c.mu.Unlock()
	t.err = err
	close(t.done)
	if err != nil {
		if c.ctx.Err() == nil {
			c.end(fmt.Errorf("upstream session expired and re-initialization failed: %w", err))
		}
		return err
	}
	c.mu.Lock()
	c.epoch++
	c.mu.Unlock()
	c.log.Info("upstream session re-established")
	c.notifyClient("the upstream server lost its MCP session (it restarted); Switchboard replayed the handshake and carries on")
	select {
	case c.kick <- struct{}{}:
	default:
	}
	select {
	case c.reinitialized <- struct{}{}:
	default:
	}
	return nil
}

// Reinitialized receives after the connection re-established a session the
// server had forgotten, so the owner can restore per-session state (log
// level, resource subscriptions) that only it knows.
func (c *ClientConn) Reinitialized() <-chan struct{} { return c.reinitialized }

// reinitialize replays the handshake: initialize (its response is
// swallowed, but gives the new session id and version), then
// notifications/initialized.
func (c *ClientConn) reinitialize(initMsg, initedMsg []byte) (sid, version string, err error) {
	ctx, cancel := context.WithTimeout(c.ctx, headerTimeout)
	defer cancel()
	m, _ := jsonrpc.Decode(bytes.Clone(initMsg))
	p := &post{body: initMsg, msg: m, id: m.ID, init: true, ctx: ctx}
	req, _, err := c.newPost(p)
	if err != nil {
		return "", "", err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("initialize: upstream unreachable: %v", upstream.UnwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return "", "", fmt.Errorf("initialize: upstream returned %s%s", resp.Status, upstream.ErrorDetail(resp.Header, body))
	}
	sid = resp.Header.Get(mcp.HeaderSessionID)
	if !validSessionID(sid) {
		sid = ""
	}
	var result *jsonrpc.Message
	handle := func(raw []byte, msg *jsonrpc.Message) bool {
		if msg.IsResponse() && sameID(msg.ID, p.id) {
			result = msg
			return true
		}
		c.deliver(raw)
		return false
	}
	if err := c.readAnswer(resp, handle); err != nil && result == nil {
		return "", "", fmt.Errorf("initialize: %v", err)
	}
	if result == nil {
		return "", "", errors.New("initialize: no response")
	}
	if e := result.ErrorOf(); e != nil {
		return "", "", fmt.Errorf("initialize: %s", e.Message)
	}
	version, _ = jsonrpc.StringMember(result.Result, "protocolVersion")

	if initedMsg != nil {
		req, err := c.jsonPost(ctx, bytes.NewReader(initedMsg), sid, version)
		if err != nil {
			return "", "", err
		}
		resp, err := upstream.DoWithin(c.client, req, headerTimeout)
		if err != nil {
			return "", "", fmt.Errorf("initialized: upstream unreachable: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return "", "", fmt.Errorf("initialized: upstream returned %s", resp.Status)
		}
	}
	return sid, version, nil
}

// startListen starts the listen loop, once, after the legacy handshake.
func (c *ClientConn) startListen() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listening || c.closed || c.initMsg == nil {
		return
	}
	c.listening = true
	c.wg.Add(1)
	go c.listen()
}

// listen keeps the GET listen stream open: the server sends its own
// requests and notifications there. It stops for good when the server has
// no such stream (405, or another 4xx before the session had one); when a
// stream drops it is reopened after a backoff (1 s doubling to 30 s, less a
// random fifth, or the server's retry), with Last-Event-ID if its events had ids. A 404 means
// the session was lost if a ping on it gets 404 too: it is re-initialized.
func (c *ClientConn) listen() {
	defer c.wg.Done()
	wait := backoff.Backoff{Base: listenBackoff, Max: listenBackoffMax}
	var lastID, lastSID string
	hadStream := false
	for {
		c.mu.Lock()
		sid := c.sessionID
		c.mu.Unlock()
		if sid != lastSID {
			// Event ids and "had a stream" belong to a session.
			lastID, lastSID, hadStream = "", sid, false
		}
		var retry time.Duration
		started := time.Now()
		resp, sent, err := c.get(c.ctx, lastID)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close() // only its status matters
		}
		switch {
		case err != nil:
			if c.ctx.Err() != nil {
				return
			}
			c.log.Warn("listen stream could not be opened", "err", err)
		case resp.StatusCode == http.StatusOK:
			hadStream = true
			mr := sse.NewMessageReader(resp.Body, c.max, c.skipOversize)
			n := 0
			err := c.readEvents(mr, func(raw []byte, _ *jsonrpc.Message) bool {
				n++
				c.deliver(raw)
				return false
			})
			resp.Body.Close()
			if c.ctx.Err() != nil {
				return
			}
			if id := mr.LastEventID(); id != "" {
				lastID = id
			}
			retry = min(mr.Retry(), maxRetry)
			if n > 0 || time.Since(started) >= listenBackoffMax {
				wait.Reset()
			}
			c.log.Debug("listen stream ended", "err", err)
		case resp.StatusCode == http.StatusNotFound && sent != "":
			// The session is gone, or the server serves no GET and says
			// so with 404 instead of 405: a ping on the session tells.
			lost, known := c.probe(sent)
			if known && lost {
				if err := c.recover(sent); err != nil {
					return
				}
				wait.Reset()
				continue
			}
			if known && !hadStream {
				c.log.Debug("upstream offers no listen stream", "status", resp.Status)
				return
			}
		case resp.StatusCode == http.StatusMethodNotAllowed,
			resp.StatusCode >= 400 && resp.StatusCode < 500 && !hadStream:
			c.log.Debug("upstream offers no listen stream", "status", resp.Status)
			return
		case resp.StatusCode >= 400 && resp.StatusCode < 500 && lastID != "":
			// The server cannot resume from that event: reopen afresh.
			c.log.Debug("listen stream could not be resumed", "status", resp.Status)
			lastID = ""
		default:
			c.log.Warn("listen stream refused", "status", resp.Status)
		}
		d := wait.Next() // counted even when the server's retry overrides it
		if retry > 0 {
			d = retry
		}
		select {
		case <-time.After(d):
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
	}
}

// ping sends session sid a ping of id whose answer is not delivered, and
// returns the response for the caller to read and close.
func (c *ClientConn) ping(sid, id string) (*http.Response, error) {
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	req, err := c.jsonPost(c.ctx, strings.NewReader(`{"jsonrpc":"2.0","id":"`+id+`","method":"ping"}`), sid, version)
	if err != nil {
		return nil, err
	}
	return upstream.DoWithin(c.client, req, headerTimeout)
}

// probe tells whether the server still knows session sid, by a ping whose
// answer is not delivered. known is false when it cannot tell.
func (c *ClientConn) probe(sid string) (lost, known bool) {
	resp, err := c.ping(sid, "switchboard-session-probe")
	if err != nil {
		return false, false
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return true, true
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, true
	}
	return false, false
}

// get opens an SSE stream with GET: the listen stream, or, with lastID, the
// resumption of a dropped one. A 200 that is not an event stream is an
// error; any other response is returned for the caller to judge by its
// status. The caller closes the body. sid is the session id sent.
func (c *ClientConn) get(ctx context.Context, lastID string) (resp *http.Response, sid string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, "", err
	}
	c.mu.Lock()
	sid, version := c.sessionID, c.version
	c.mu.Unlock()
	c.setHeaders(req, sid, version)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err = upstream.DoWithin(c.client, req, headerTimeout)
	if err != nil {
		return nil, sid, err
	}
	if resp.StatusCode == http.StatusOK {
		if ct := upstream.MediaType(resp.Header); ct != "text/event-stream" {
			resp.Body.Close()
			return nil, sid, fmt.Errorf("upstream response is not MCP (Content-Type %s)", ct)
		}
	}
	return resp, sid, nil
}

func (c *ClientConn) setHeaders(req *http.Request, sid, version string) {
	upstream.CopyHeader(req.Header, c.opts.Header)
	if sid != "" {
		req.Header.Set(mcp.HeaderSessionID, sid)
	}
	if version != "" {
		req.Header.Set(mcp.HeaderProtocolVersion, version)
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
	c.mu.Unlock()
	c.cancel(err)
	if !errors.Is(err, ErrConnClosed) {
		c.log.Error("upstream connection ended", "err", err)
	}
	go func() {
		c.wg.Wait()
		close(c.done)
	}()
}

// Refused reports whether the server refused the credentials (401 or 403)
// in answer to initialize, or the initialize waits for a person's login:
// connecting again cannot help (upstream.Refuser).
func (c *ClientConn) Refused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// Done is closed when the connection has ended and its goroutines have
// stopped; deliver is not called after that.
func (c *ClientConn) Done() <-chan struct{} { return c.done }

// Err tells why the connection ended; valid after Done.
func (c *ClientConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close cancels every exchange, ends the session with DELETE (a 405 means
// the server does not allow that, which is fine), and waits within ctx for
// the connection's goroutines.
func (c *ClientConn) Close(ctx context.Context) error {
	c.mu.Lock()
	first := !c.closed
	sid, version := c.sessionID, c.version
	c.mu.Unlock()
	if first {
		c.end(ErrConnClosed)
		if sid != "" {
			c.deleteSession(ctx, sid, version)
		}
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *ClientConn) deleteSession(ctx context.Context, sid, version string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	c.setHeaders(req, sid, version)
	resp, err := upstream.DoWithin(c.client, req, headerTimeout)
	if err != nil {
		c.log.Debug("ending the upstream session failed", "err", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotFound {
		c.log.Debug("ending the upstream session refused", "status", resp.Status)
	}
}

// answerIn returns body as the answer to request id when it is a JSON-RPC
// error response with that id; nil otherwise.
func answerIn(body []byte, id json.RawMessage) []byte {
	if id == nil {
		return nil
	}
	m, err := jsonrpc.Decode(body)
	if err != nil || m.Error == nil || !sameID(m.ID, id) {
		return nil
	}
	return body
}

// rpcReason is the text of a jsonrpc.Decode error, without the Go prefix.
func rpcReason(err error) string {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// sameID reports whether two raw ids are the same id: equal bytes, or the
// same integer or string written differently.
func sameID(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return false
	}
	if bytes.Equal(a, b) {
		return true
	}
	if x, ok := jsonrpc.ParseIntID(a); ok {
		y, ok := jsonrpc.ParseIntID(b)
		return ok && x == y
	}
	x, ok1 := jsonrpc.String(a)
	y, ok2 := jsonrpc.String(b)
	return ok1 && ok2 && x == y
}

// idKey is the map key of a raw id.
func idKey(id json.RawMessage) string {
	if n, ok := jsonrpc.ParseIntID(id); ok {
		return strconv.FormatInt(n, 10)
	}
	if s, ok := jsonrpc.String(id); ok {
		return strconv.Quote(s)
	}
	return string(id)
}

// validSessionID reports whether s is a usable session id: visible ASCII
// (0x21–0x7E), as the specification requires. "" is not.
func validSessionID(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e })
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
