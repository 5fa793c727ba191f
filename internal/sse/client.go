package sse

// This file is the client side: a connection to an upstream server that
// speaks the legacy HTTP+SSE transport (protocol 2024-11-05), and the
// MessageReader that both upstream transports (this one and Streamable HTTP)
// read event streams with.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/upstream"

	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// DefaultMaxMessage is the message size limit of a client whose MaxMessage
// is zero.
const DefaultMaxMessage = 16 << 20

// prefixLen is how many bytes of an oversized message are reported.
const prefixLen = 4096

// headerTimeout bounds the wait for the response headers of a request that
// is answered at once: the GET that opens the stream, and each POST (a
// legacy server answers every POST with 202 and sends the response on the
// stream).
const headerTimeout = 30 * time.Second

// maxQueued bounds the messages waiting to be POSTed; Write fails beyond it.
const maxQueued = 4096

// ErrConnClosed is the Err of a client connection ended by Close.
var ErrConnClosed = errors.New("sse: connection closed")

// NewHTTPClient returns the HTTP client the upstream transports use when
// none is configured. It has no overall timeout (event streams live as long
// as the connection) but bounds dialing and the TLS handshake, and it
// follows redirects only within the origin of the first request, so headers
// carrying secrets never reach another host.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   16,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if !SameOrigin(req.URL, via[0].URL) {
				return fmt.Errorf("redirect to another origin (%s) refused", Origin(req.URL))
			}
			return nil
		},
	}
}

// SameOrigin reports whether a and b have the same scheme, host and port
// (default ports made explicit).
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		portOf(a) == portOf(b)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// Origin returns scheme://host of u: what logs and errors name of an
// upstream URL, since user info, path (some services put a key in it) and
// query may carry secrets.
func Origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// UnwrapURLError drops the "Post \"URL\": " wrapping of an HTTP client
// error: the URL may carry a secret in its query, and the cause is what a
// user needs to read.
func UnwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// MessageReader reads an event stream the way an MCP client needs it. It
// wraps a [Reader] with two differences:
//
//   - an event over the size limit does not end the stream: its first bytes
//     are reported to the oversize callback and the event is skipped;
//   - it keeps the stream's retry delay even when set by an event that has
//     no data (a Streamable HTTP server's "close" event), which Reader does
//     not return.
//
// To know the skipped event's first bytes exactly, the source is fed to the
// Reader one line at a time, so everything the Reader has been given since
// the last blank line belongs to the event it is reading.
type MessageReader struct {
	f        *lineFeeder
	r        *Reader
	max      int
	oversize func(prefix []byte)
	replaced bool   // r replaced a Reader that failed on an oversized event
	lastID   string // the last event ID when r was created
}

// NewMessageReader returns a MessageReader over src. maxEventBytes limits the
// data of one event (zero or less: [DefaultMaxMessage]); oversize, if not
// nil, is called with the first bytes of the data of each event over it.
func NewMessageReader(src io.Reader, maxEventBytes int, oversize func(prefix []byte)) *MessageReader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxMessage
	}
	f := &lineFeeder{br: bufio.NewReaderSize(src, readBufSize), atStart: true}
	return &MessageReader{f: f, r: NewReader(f, maxEventBytes), max: maxEventBytes, oversize: oversize}
}

// Next returns the next event with data. Oversized events are reported and
// skipped. Errors are those of [Reader.Next], except ErrEventTooLarge.
func (m *MessageReader) Next() (Event, error) {
	for {
		ev, err := m.r.Next()
		if !errors.Is(err, ErrEventTooLarge) {
			if err == nil && m.replaced && !m.f.sawID {
				ev.ID = m.lastID // the ID carries over, as in one Reader
			}
			return ev, err
		}
		prefix, id, hasID := m.f.eventPrefix()
		if !hasID {
			id = m.LastEventID()
		}
		m.lastID, m.replaced, m.f.sawID = id, true, false
		if len(prefix) > 0 && m.oversize != nil {
			m.oversize(prefix)
		}
		if err := m.f.skipEvent(); err != nil {
			return Event{}, err
		}
		m.r = NewReader(m.f, m.max)
	}
}

// LastEventID returns the stream's last event ID (see [Reader.LastEventID]);
// a client resuming the stream sends it as Last-Event-ID.
func (m *MessageReader) LastEventID() string {
	if m.replaced && !m.f.sawID {
		return m.lastID
	}
	return m.r.LastEventID()
}

// Retry returns the reconnection delay the stream last set, or zero.
func (m *MessageReader) Retry() time.Duration { return m.f.retry }

// lineFeeder hands its source to a Reader at most one line per Read, and
// keeps the raw lines of the current event (up to prefixLen bytes of them).
type lineFeeder struct {
	br       *bufio.Reader
	atStart  bool   // the next byte begins a line
	afterCR  bool   // the last line ended in CR: an LF next belongs to it
	event    []byte // the current event's lines, each ending in LF (truncated)
	head     []byte // the first bytes of the current line
	retry    time.Duration
	sawID    bool // an id field was passed
	boundary bool // a blank line (the end of an event) was passed
}

const headLen = 32

func (f *lineFeeder) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := f.br.Peek(1); err != nil {
		return 0, err
	}
	b, _ := f.br.Peek(min(len(p), f.br.Buffered()))
	n := len(b)
	if i := indexEOL(b); i >= 0 {
		n = i + 1
		if b[i] == '\r' && n < len(b) && b[n] == '\n' {
			n++
		}
	}
	copy(p, b[:n])
	_, _ = f.br.Discard(n)
	f.track(p[:n])
	return n, nil
}

// track follows line and event boundaries in b, which holds at most one
// line terminator, at its end.
func (f *lineFeeder) track(b []byte) {
	if f.afterCR && len(b) > 0 && b[0] == '\n' {
		b = b[1:]
	}
	f.afterCR = false
	if len(b) == 0 {
		return
	}
	content, term := b, false
	switch b[len(b)-1] {
	case '\n':
		term = true
		content = b[:len(b)-1]
		if len(content) > 0 && content[len(content)-1] == '\r' {
			content = content[:len(content)-1]
		}
	case '\r':
		term = true
		content = b[:len(b)-1]
		f.afterCR = true
	}
	if len(content) > 0 {
		f.atStart = false
		f.event = appendUpTo(f.event, content, prefixLen+headLen)
		f.head = appendUpTo(f.head, content, headLen)
	}
	if !term {
		return
	}
	if f.atStart {
		f.event = f.event[:0]
		f.boundary = true
		return
	}
	f.event = appendUpTo(f.event, []byte{'\n'}, prefixLen+headLen+1)
	if bytes.Equal(f.head, []byte("id")) || bytes.HasPrefix(f.head, []byte("id:")) {
		f.sawID = true
	}
	if v, ok := bytes.CutPrefix(f.head, []byte("retry:")); ok {
		v = bytes.TrimPrefix(v, []byte(" "))
		if d, ok := parseRetry(v); ok {
			f.retry = d
		}
	}
	f.head = f.head[:0]
	f.atStart = true
}

func appendUpTo(dst, b []byte, limit int) []byte {
	if room := limit - len(dst); room < len(b) {
		b = b[:max(room, 0)]
	}
	return append(dst, b...)
}

// skipEvent discards the rest of the current event.
func (f *lineFeeder) skipEvent() error {
	f.boundary = false
	var scratch [4096]byte
	for !f.boundary {
		if _, err := f.Read(scratch[:]); err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return fmt.Errorf("sse: read: %w", err)
		}
	}
	return nil
}

// eventPrefix returns the start of the current event's data, and its id
// field if one was seen.
func (f *lineFeeder) eventPrefix() (prefix []byte, id string, hasID bool) {
	rest := f.event
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if prefix != nil {
				prefix = append(prefix, '\n')
			}
			prefix = append(prefix, value...)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				id, hasID = string(value), true
			}
		}
	}
	if len(prefix) > prefixLen {
		prefix = prefix[:prefixLen]
	}
	return prefix, id, hasID
}

// ClientOptions configure an upstream HTTP connection, legacy SSE here
// and Streamable HTTP (streamable.ClientOptions is this type).
type ClientOptions struct {
	// URL is the endpoint: the SSE stream (GET) for the legacy transport,
	// the MCP endpoint for Streamable HTTP. Required, http or https.
	URL string
	// Header is sent on every request (configured headers, secrets,
	// forwarded client headers). It is never logged.
	Header http.Header
	// HTTPClient sends the requests. Nil means [NewHTTPClient]: no overall
	// timeout (streams are long), bounded dial and TLS handshake, redirects
	// only within the origin.
	HTTPClient *http.Client
	// MaxMessage is the largest message accepted, in bytes; larger ones are
	// reported to oversize and skipped. Zero means 16 MiB.
	MaxMessage int
	Logger     *slog.Logger // nil discards
	// TraceHeader copies a message's params._meta.traceparent, when it has
	// one, into the traceparent header of its POST (the gateway sets it
	// when tracing is on). False sends the message's headers unchanged.
	TraceHeader bool
}

// SetTraceHeader sets h's traceparent to params._meta.traceparent, if any.
func SetTraceHeader(h http.Header, params []byte) {
	if tp, ok := jsonrpc.StringMember(params, "_meta", "traceparent"); ok {
		h.Set("Traceparent", tp)
	}
}

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
	base, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("sse: invalid URL: %v", UnwrapURLError(err))
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("sse: invalid URL %s: want an http or https URL", Origin(base))
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
	if c.client == nil {
		c.client = NewHTTPClient()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("upstream", Origin(base))
	if c.max <= 0 {
		c.max = DefaultMaxMessage
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
		return nil, fmt.Errorf("sse: %s: %w", Origin(base), err)
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
	return nil, fmt.Errorf("sse: %s: %w", Origin(base), c.Err())
}

// open sends the GET that opens the event stream.
func (c *ClientConn) open() (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.base.String(), nil)
	if err != nil {
		return nil, err
	}
	CopyHeader(req.Header, c.opts.Header)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := DoWithin(c.client, req, headerTimeout)
	if err != nil {
		return nil, fmt.Errorf("upstream unreachable: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		detail := bodyDetail(resp)
		resp.Body.Close()
		err := fmt.Errorf("upstream returned %s%s", resp.Status, detail)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			// The credentials were refused: re-dialling would be too.
			err = upstream.Permanent(err)
		}
		return nil, err
	}
	if ct := MediaType(resp.Header); ct != "text/event-stream" {
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
	mr := NewMessageReader(resp.Body, c.max, func(prefix []byte) {
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
				c.log.Warn("event that is not a JSON-RPC message skipped", "err", err, "data", Clip(ev.Data))
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
		return fmt.Errorf("invalid endpoint: %v", UnwrapURLError(err))
	}
	if !SameOrigin(u, c.base) {
		return fmt.Errorf("endpoint on another origin (%s, stream on %s) refused", Origin(u), Origin(c.base))
	}
	c.mu.Lock()
	first := c.endpoint == nil
	c.endpoint = u
	c.mu.Unlock()
	if first {
		close(c.ready)
	} else {
		c.log.Info("server moved its message endpoint", "endpoint_origin", Origin(u))
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
	var id []byte
	if m.IsRequest() {
		id = m.ID
	}
	c.mu.Lock()
	ep := c.endpoint
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, ep.String(), bytes.NewReader(msg))
	if err != nil {
		c.fail(m, id, fmt.Sprintf("upstream request failed: %v", err))
		return
	}
	CopyHeader(req.Header, c.opts.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.opts.TraceHeader {
		SetTraceHeader(req.Header, m.Params)
	}
	resp, err := DoWithin(c.client, req, headerTimeout)
	if err != nil {
		if c.ctx.Err() == nil {
			c.fail(m, id, fmt.Sprintf("upstream unreachable: %v", err))
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return
	}
	c.fail(m, id, fmt.Sprintf("upstream returned %s%s", resp.Status, bodyDetail(resp)))
	if resp.StatusCode == http.StatusNotFound {
		// The server no longer knows the session: only a new stream helps.
		c.end(errors.New("upstream session not found (POST returned 404 Not Found)"))
	}
}

// fail reports a message that could not be sent: a request gets an error
// response with its id.
func (c *ClientConn) fail(m *jsonrpc.Message, id []byte, reason string) {
	kind := m.Method
	if kind == "" {
		kind = "response"
	}
	c.log.Warn("message not delivered to server", "method", kind, "err", reason)
	if id != nil {
		c.deliver(jsonrpc.NewError(id, jsonrpc.Errorf(jsonrpc.UpstreamUnavailable, "%s", reason)).Encode())
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

// DoWithin sends req with client and gives up if its response headers take
// longer than d. The deadline does not apply to reading the body. A
// *url.Error is unwrapped (UnwrapURLError).
func DoWithin(client *http.Client, req *http.Request, d time.Duration) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	errTimeout := fmt.Errorf("no response headers within %v", d)
	t := time.AfterFunc(d, func() { cancel(errTimeout) })
	resp, err := client.Do(req.WithContext(ctx))
	if !t.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, errTimeout
	}
	if err != nil {
		cancel(nil)
		return nil, UnwrapURLError(err)
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// CopyHeader sets in dst a copy of every header of src.
func CopyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}

// MediaType is the media type of h's Content-Type, without parameters:
// "none" when there is none, "invalid" when it does not parse.
func MediaType(h http.Header) string {
	ct := h.Get("Content-Type")
	if ct == "" {
		return "none"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "invalid"
	}
	return mt
}

// bodyDetail returns ": " and the start of an error response's body when it
// is short text (a JSON-RPC error's message, or a plain-text line), for the
// error a client sees.
func bodyDetail(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if m, err := jsonrpc.Decode(b); err == nil {
		if e := m.ErrorOf(); e != nil && e.Message != "" {
			return ": " + OneLine(e.Message)
		}
		return ""
	}
	if mt := MediaType(resp.Header); mt != "text/plain" {
		return ""
	}
	return ": " + OneLine(string(b))
}

// OneLine returns the first line of s, trimmed, without control
// characters and cut to at most 200 bytes (between words), for an error
// or log message.
func OneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 200 {
		// Never inside a word: this text is redacted only after the
		// cut, and a secret cut in two would show its prefix.
		s = strings.TrimRight(s[:audit.WordCut(s, 200)], " ") + "…"
	}
	return s
}

// Clip returns b as a log value cut to 256 bytes; a redacting log handler
// redacts it whole before the cut (audit.Clipped).
func Clip(b []byte) audit.Clipped { return audit.Clip(b, 256) }
