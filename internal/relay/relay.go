// Package relay runs Switchboard as a stdio MCP server that forwards to a
// remote one: stdio-only clients reach
// Streamable HTTP and legacy HTTP+SSE servers through it.
//
//	stdin ─▶ Relay ─▶ upstream.Upstream ─▶ streamable.ClientConn | sse.ClientConn ─▶ remote
//	stdout ◀──────────────┘ (responses, notifications, server→client requests)
//
// Stdout carries nothing but JSON-RPC messages, one per line. Messages from
// stdin are handled concurrently. The upstream package supplies what makes
// the relay robust: a dropped connection is re-dialled with backoff and the
// client's cached initialize and notifications/initialized are replayed, so
// the stdio client never notices (the Streamable HTTP connection also
// re-initializes on an upstream 404 and retries the call itself).
package relay

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/sse"
	"github.com/switchboard-mcp/switchboard/internal/upstream/streamable"
)

// Options configure a relay. Zero values are documented per field.
type Options struct {
	URL string // the remote MCP endpoint; required
	// Transport is "auto" (zero value: Streamable HTTP first, legacy SSE
	// when the server answers 400, 404 or 405 without an MCP error body),
	// "http" or "sse".
	Transport string
	Header    http.Header // sent with every upstream request
	// HTTPClient sends every upstream request, the transport probe
	// included (a SigV4-signing client, say). Nil means the transports'
	// default (upstream.NewHTTPClient) and http.DefaultClient for the probe.
	HTTPClient *http.Client
	// ReconnectDelay is the wait before re-dialling a dropped connection.
	// Zero means 5 s.
	ReconnectDelay time.Duration
	// MaxMessage is the largest message accepted either way. Zero means 16 MiB.
	MaxMessage int
	// DrainTimeout bounds the wait for calls in flight when stdin ends.
	// Zero means 10 s.
	DrainTimeout time.Duration
	Logger       *slog.Logger // never stdout; nil discards
	// Dial, when set, dials the upstream instead of URL and Transport (an
	// AgentCore runtime, say); Name then names it in errors and logs.
	Dial upstream.Dialer
	Name string
}

// Run relays between in/out and the remote server until in ends (EOF) or
// ctx is done. It returns nil on EOF.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	if opts.URL == "" && opts.Dial == nil {
		return errors.New("relay: --url is required")
	}
	opts.ReconnectDelay = cmp.Or(opts.ReconnectDelay, 5*time.Second)
	opts.MaxMessage = cmp.Or(opts.MaxMessage, 16<<20)
	opts.DrainTimeout = cmp.Or(opts.DrainTimeout, 10*time.Second)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	switch opts.Transport {
	case "", "auto", "http", "sse":
	default:
		return fmt.Errorf("relay: --transport must be auto, http or sse, not %q", opts.Transport)
	}
	r := &relay{opts: opts, log: opts.Logger, out: bufio.NewWriterSize(out, 64<<10)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.ctx = ctx
	err := r.read(in)
	// stdin ended: let the calls in flight finish (a client that pipes its
	// requests and closes stdin still gets its answers), within a bound.
	drained := make(chan struct{})
	go func() { r.wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
	case <-time.After(opts.DrainTimeout):
	}
	cancel()
	r.wg.Wait()
	r.streams.Wait()
	r.close()
	return err
}

type relay struct {
	opts Options
	log  *slog.Logger
	ctx  context.Context // ends when stdin ends; cancels in-flight calls
	wg   sync.WaitGroup  // one per in-flight call pump
	// streams counts the pumps of long-lived calls (subscriptions/listen):
	// they end only when the relay does, so the drain does not wait for them.
	streams sync.WaitGroup

	omu sync.Mutex    // omu guards out
	out *bufio.Writer // stdout

	mu     sync.Mutex
	legacy *upstream.Upstream // guarded by mu; set at initialize
	member *upstream.Member   // guarded by mu
	modern *upstream.Upstream // guarded by mu; set at the first 2026-07-28 request
}

// write sends one message to stdout.
func (r *relay) write(m *jsonrpc.Message) {
	r.omu.Lock()
	defer r.omu.Unlock()
	_, _ = r.out.Write(m.AppendTo(nil))
	_ = r.out.WriteByte('\n')
	if err := r.out.Flush(); err != nil {
		r.log.Warn("writing to stdout failed", "err", err)
	}
}

// Deliver and End make the relay the upstream member's Downstream.
func (r *relay) Deliver(m *jsonrpc.Message) { r.write(m) }

func (r *relay) End(err error) {
	if errors.Is(err, upstream.ErrClosed) {
		return // our own shutdown
	}
	r.log.Error("upstream gone", "err", err)
}

func (r *relay) read(in io.Reader) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(br, r.opts.MaxMessage)
		if errors.Is(err, errTooLong) {
			// line is the message's start: a request whose id can be read
			// there gets an error, so the client does not wait in vain.
			r.log.Warn("stdin message exceeds the size limit; skipped", "limit", r.opts.MaxMessage)
			if id, ok := jsonrpc.PeekID(line); ok && upstream.HasMethod(line) {
				r.write(jsonrpc.NewError(id, jsonrpc.Errorf(jsonrpc.InvalidRequest,
					"message exceeds the size limit (%d bytes)", r.opts.MaxMessage)))
			}
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 {
			r.handle(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("relay: reading stdin: %w", err)
		}
	}
}

var errTooLong = errors.New("line too long")

// readLine reads one line of at most limit bytes; a longer one is consumed
// and reported as errTooLong, with its first bytes (up to 4 KiB).
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > limit {
			prefix := append(buf, frag...)
			prefix = bytes.Clone(prefix[:min(len(prefix), 4096)])
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			return prefix, errTooLong
		}
		buf = append(buf, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, err
	}
}

func (r *relay) handle(line []byte) {
	msg, err := jsonrpc.Decode(bytes.TrimSpace(line))
	if err != nil {
		r.write(jsonrpc.NewError(nil, mcp.RPCError(err)))
		return
	}
	modern := jsonrpc.Member(msg.Params, "_meta", mcp.MetaProtocolVersion) != nil
	switch {
	case msg.IsRequest() && msg.Method == "initialize":
		r.initialize(msg)
	case msg.IsRequest() && modern:
		up, err := r.modernUpstream()
		if err != nil {
			r.write(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
			return
		}
		c, err := up.CallStateless(r.ctx, msg)
		r.pump(msg, c, err)
	case msg.IsRequest():
		m := r.currentMember()
		if m == nil {
			r.write(jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.InvalidRequest, "not initialized: send initialize first")))
			return
		}
		c, err := m.Call(r.ctx, msg)
		r.pump(msg, c, err)
	default:
		m := r.currentMember()
		if m == nil {
			return // nothing to notify yet
		}
		go func() {
			var err error
			if msg.IsNotification() {
				err = m.Notify(r.ctx, msg)
			} else {
				err = m.Respond(r.ctx, msg)
			}
			if err != nil {
				r.log.Warn("forwarding failed", "method", msg.Method, "err", err)
			}
		}()
	}
}

func (r *relay) currentMember() *upstream.Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.member
}

// pump writes a call's messages to stdout, in its own goroutine.
func (r *relay) pump(req *jsonrpc.Message, c *upstream.Call, err error) {
	if err != nil {
		r.write(jsonrpc.NewError(req.ID, mcp.RPCError(err)))
		return
	}
	wg := &r.wg
	if c.LongLived() {
		wg = &r.streams
	}
	wg.Go(func() { session.Forward(c, 0, r.ctx.Done(), nil, r.write) }) // no response timeout of its own
}

func (r *relay) initialize(msg *jsonrpc.Message) {
	r.mu.Lock()
	if r.member != nil {
		r.mu.Unlock()
		r.write(jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.InvalidRequest, "already initialized")))
		return
	}
	r.mu.Unlock()
	dial, err := r.dialer(msg)
	if err != nil {
		r.write(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
		return
	}
	// A server that cannot be reached at all fails the initialize at once
	// with the reason; once connected, drops are re-dialled.
	up := r.newUpstream(dial, upstream.Legacy, true)
	m, res, err := up.Join(r.ctx, r, msg)
	if err != nil {
		_ = up.Close(context.Background())
		r.write(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
		return
	}
	r.mu.Lock()
	r.legacy, r.member = up, m
	r.mu.Unlock()
	r.write(res)
}

// delays is the reconnect policy: keep trying for a long time.
func (r *relay) delays() []time.Duration {
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = r.opts.ReconnectDelay
	}
	d[0] = min(r.opts.ReconnectDelay, time.Second) // the first retry is quick
	return d
}

func (r *relay) modernUpstream() (*upstream.Upstream, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.modern != nil {
		return r.modern, nil
	}
	if r.opts.Transport == "sse" {
		return nil, jsonrpc.Errorf(jsonrpc.UnsupportedProtocolVersion, "the legacy SSE transport carries protocol 2025-11-25 and earlier; send initialize")
	}
	r.modern = r.newUpstream(r.httpDialer(), upstream.Modern, false)
	return r.modern, nil
}

// newUpstream returns the relay's Upstream of era on dial: re-dialled for
// a long time (see delays).
func (r *relay) newUpstream(dial upstream.Dialer, era upstream.Era, noRestartBeforeReady bool) *upstream.Upstream {
	return upstream.New(upstream.Options{Name: r.name(), Dial: dial, Era: era, RestartDelays: r.delays(),
		HandshakeTimeout: 60 * time.Second, Logger: r.log, NoRestartBeforeReady: noRestartBeforeReady})
}

// name is the upstream's name in errors and logs: scheme and host only,
// since user info, path and query may carry secrets (upstream.Origin).
func (r *relay) name() string {
	if r.opts.Dial != nil && r.opts.Name != "" {
		return r.opts.Name
	}
	u, err := url.Parse(r.opts.URL)
	if err != nil {
		return "upstream"
	}
	return upstream.Origin(u)
}

func (r *relay) httpDialer() upstream.Dialer {
	if r.opts.Dial != nil {
		return r.opts.Dial
	}
	return upstream.HTTPDialer(streamable.Dial, r.httpOptions())
}

func (r *relay) sseDialer() upstream.Dialer { return upstream.HTTPDialer(sse.Dial, r.httpOptions()) }

func (r *relay) httpOptions() upstream.HTTPOptions {
	return upstream.HTTPOptions{URL: r.opts.URL, Header: r.opts.Header, HTTPClient: r.opts.HTTPClient, MaxMessage: r.opts.MaxMessage, Logger: r.log}
}

// dialer picks the transport: as configured, or by probing with the
// client's own initialize (auto).
func (r *relay) dialer(init *jsonrpc.Message) (upstream.Dialer, error) {
	if r.opts.Dial != nil {
		return r.opts.Dial, nil
	}
	switch r.opts.Transport {
	case "http":
		return r.httpDialer(), nil
	case "sse":
		return r.sseDialer(), nil
	}
	legacy, err := probeLegacySSE(r.ctx, r.opts, init)
	if err != nil {
		return nil, err
	}
	if legacy {
		r.log.Info("server does not speak Streamable HTTP; using the legacy HTTP+SSE transport")
		return r.sseDialer(), nil
	}
	return r.httpDialer(), nil
}

// probeLegacySSE POSTs the client's initialize and reports whether the
// server wants the legacy transport: 400, 404 or 405 without an MCP error
// body (the spec's backwards-compatibility rule). A session it opens is
// deleted again.
func probeLegacySSE(ctx context.Context, opts Options, init *jsonrpc.Message) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, opts.URL, bytes.NewReader(init.Encode()))
	if err != nil {
		return false, fmt.Errorf("%w: relay: %w", upstream.ErrUnavailable, err)
	}
	maps.Copy(req.Header, opts.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	client := cmp.Or(opts.HTTPClient, http.DefaultClient)
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("%w: upstream unreachable: %w", upstream.ErrUnavailable, upstream.UnwrapURLError(err))
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
		if m, err := jsonrpc.Decode(bytes.TrimSpace(body)); err == nil && m.Error != nil {
			return false, nil // an MCP server that rejected the request itself
		}
		return true, nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return false, fmt.Errorf("%w: upstream returned %s", upstream.ErrUnavailable, resp.Status)
	}
	if sid := resp.Header.Get(mcp.HeaderSessionID); sid != "" {
		del, _ := http.NewRequestWithContext(ctx, http.MethodDelete, opts.URL, nil)
		maps.Copy(del.Header, opts.Header)
		del.Header.Set(mcp.HeaderSessionID, sid)
		if resp, err := client.Do(del); err == nil {
			resp.Body.Close()
		}
	}
	return false, nil
}

func (r *relay) close() {
	r.mu.Lock()
	ups := []*upstream.Upstream{r.legacy, r.modern}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, up := range ups {
		if up != nil {
			_ = up.Close(ctx)
		}
	}
	r.omu.Lock()
	_ = r.out.Flush()
	r.omu.Unlock()
}

// ParseHeader parses a --header value "Name: value".
func ParseHeader(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return "", "", fmt.Errorf("invalid header %q: want 'Name: value'", s)
	}
	return name, strings.TrimSpace(value), nil
}
