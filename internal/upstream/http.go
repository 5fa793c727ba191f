package upstream

// This file is the HTTP plumbing the upstream HTTP clients share
// (upstream/streamable, upstream/sse, upstream/agentcore, and the commands
// that build their http.Client).

import (
	"bytes"
	"cmp"
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
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// HTTPOptions configure a connection of an upstream HTTP client: the
// Streamable HTTP and legacy SSE clients' ClientOptions are this type.
type HTTPOptions struct {
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

// Resolve checks o.URL (http or https, with a host) and returns it parsed,
// with o's defaults filled: HTTPClient NewHTTPClient(), Logger a discarding
// one, then with the upstream's origin, MaxMessage sse.DefaultMaxMessage.
// Errors begin with transport, the client's name ("sse", "streamable").
func (o HTTPOptions) Resolve(transport string) (*url.URL, HTTPOptions, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, o, fmt.Errorf("%s: invalid URL: %v", transport, UnwrapURLError(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, o, fmt.Errorf("%s: invalid URL %s: want an http or https URL", transport, Origin(u))
	}
	if o.HTTPClient == nil {
		o.HTTPClient = NewHTTPClient()
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler)).With("upstream", Origin(u))
	if o.MaxMessage <= 0 {
		o.MaxMessage = sse.DefaultMaxMessage
	}
	return u, o, nil
}

// HTTPDialer returns a Dialer that dials opts with dial (streamable.Dial,
// sse.Dial).
func HTTPDialer[C Conn](dial func(context.Context, HTTPOptions, func([]byte), func([]byte)) (C, error), opts HTTPOptions) Dialer {
	return func(ctx context.Context, deliver, oversize func([]byte)) (Conn, error) {
		c, err := dial(ctx, opts, deliver, oversize)
		if err != nil {
			return nil, err // not a nil *ClientConn inside a non-nil Conn
		}
		return c, nil
	}
}

// SetTraceHeader sets h's traceparent to params._meta.traceparent, if any.
func SetTraceHeader(h http.Header, params []byte) {
	if tp, ok := jsonrpc.StringMember(params, "_meta", "traceparent"); ok {
		h.Set("Traceparent", tp)
	}
}

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
	return cmp.Or(u.Port(), defaultPorts[strings.ToLower(u.Scheme)])
}

var defaultPorts = map[string]string{"https": "443", "http": "80"}

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

// ErrorDetail returns ": " and the start of an error response's body when it is
// short text (a JSON-RPC error's message, or a plain-text line), for the
// error a client sees; "" otherwise.
func ErrorDetail(h http.Header, body []byte) string {
	if m, err := jsonrpc.Decode(body); err == nil {
		if e := m.ErrorOf(); e != nil && e.Message != "" {
			return ": " + OneLine(e.Message)
		}
		return ""
	}
	if MediaType(h) != "text/plain" || len(bytes.TrimSpace(body)) == 0 {
		return ""
	}
	return ": " + OneLine(string(body))
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
