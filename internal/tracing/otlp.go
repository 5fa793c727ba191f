package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP exporter's environment, as the OpenTelemetry specification
// names it (the signal's own variable wins over the general one).
const (
	envTracesEndpoint    = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envEndpoint          = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesHeaders     = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envHeaders           = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesTimeout     = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
	envTimeout           = "OTEL_EXPORTER_OTLP_TIMEOUT"
	envTracesCompression = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
	envCompression       = "OTEL_EXPORTER_OTLP_COMPRESSION"

	defaultEndpoint = "http://localhost:4318/v1/traces"
	tracesPath      = "/v1/traces"
	// defaultTimeout bounds one export (both tries), as the specification's
	// OTEL_EXPORTER_OTLP_TIMEOUT default has it.
	defaultTimeout = 10 * time.Second
	// defaultRetryDelay is the wait before the one retry when the answer
	// has no Retry-After.
	defaultRetryDelay = time.Second
	// maxErrorBody is how much of a failed export's answer an error quotes.
	maxErrorBody = 256
	// maxDrain is how much of an answer is read so the connection is reused.
	maxDrain = 64 << 10

	contentTypeProto = "application/x-protobuf"
	userAgent        = "switchboard-otlp-exporter"
)

// exporterConfig is where and how spans are sent: the endpoint's full URL,
// the headers (whose values may be credentials: never logged), the bound
// of one export and whether bodies are gzipped.
type exporterConfig struct {
	url     string
	headers http.Header
	timeout time.Duration
	gzip    bool
}

// exporterConfigFrom resolves the exporter's config from the endpoint
// option (a base URL, "" for the environment's) and getenv.
func exporterConfigFrom(endpoint string, getenv func(string) string) (exporterConfig, error) {
	cfg := exporterConfig{url: defaultEndpoint, timeout: defaultTimeout, headers: http.Header{}}
	source := envEndpoint // where the endpoint came from
	switch {
	case endpoint != "":
		cfg.url, source = strings.TrimSuffix(endpoint, "/")+tracesPath, "the configured endpoint"
	case getenv(envTracesEndpoint) != "":
		cfg.url, source = getenv(envTracesEndpoint), envTracesEndpoint
	case getenv(envEndpoint) != "":
		cfg.url = strings.TrimSuffix(getenv(envEndpoint), "/") + tracesPath
	}
	if u, err := url.Parse(cfg.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL's user info could hold a password: name the variable, not its value.
		return cfg, fmt.Errorf("OTLP endpoint: %s is not an http(s) URL", source)
	}
	if name, v := firstEnv(getenv, envTracesHeaders, envHeaders); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", name, err)
		}
		cfg.headers = h
	}
	if name, v := firstEnv(getenv, envTracesTimeout, envTimeout); v != "" {
		ms, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return cfg, fmt.Errorf("%s: %q is not a number of milliseconds", name, v)
		}
		// 0 leaves the bound to the caller's context.
		cfg.timeout = time.Duration(ms) * time.Millisecond
	}
	if name, v := firstEnv(getenv, envTracesCompression, envCompression); v != "" {
		switch v {
		case "gzip":
			cfg.gzip = true
		case "none":
		default:
			return cfg, fmt.Errorf("%s: %q is neither gzip nor none", name, v)
		}
	}
	return cfg, nil
}

// firstEnv returns the first of the variables names that is set, and its
// value ("" when none is).
func firstEnv(getenv func(string) string, names ...string) (name, value string) {
	for _, name := range names {
		if v := getenv(name); v != "" {
			return name, v
		}
	}
	return "", ""
}

// parseHeaders reads the OTLP headers format: comma-separated key=value
// pairs, keys and values URL-encoded, blanks around each trimmed. Errors
// name the entry by position and never quote a value.
func parseHeaders(s string) (http.Header, error) {
	h := http.Header{}
	for i, entry := range strings.Split(s, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		key, kerr := url.PathUnescape(strings.TrimSpace(k))
		if !ok || kerr != nil || key == "" || !validHeaderName(key) {
			return nil, fmt.Errorf("entry %d is not key=value with a valid header name", i+1)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil || strings.ContainsAny(val, "\r\n\x00") {
			return nil, fmt.Errorf("entry %d (%s): the value is not a valid URL-encoded header value", i+1, key)
		}
		h.Add(key, val)
	}
	return h, nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// exporter is an [sdktrace.SpanExporter] posting OTLP/HTTP protobuf
// exports. Its methods are safe for concurrent use (the batch processor
// exports one batch at a time); Shutdown may be called any number of
// times.
type exporter struct {
	cfg     exporterConfig
	client  *http.Client
	stopped context.Context // done once Shutdown is called
	stop    context.CancelFunc
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

func newExporter(cfg exporterConfig) *exporter {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2
	stopped, stop := context.WithCancel(context.Background())
	return &exporter{cfg: cfg, client: &http.Client{Transport: t}, stopped: stopped, stop: stop}
}

func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errExporterShutdown = errors.New("tracing: OTLP exporter is shut down")

// ExportSpans sends spans as one OTLP export, within ctx and the
// configured timeout, retrying once when the collector answers 429, 502,
// 503 or 504 (after its Retry-After, if that fits in ctx).
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Err() != nil {
		return errExporterShutdown
	}
	var bt batch
	for _, sd := range spans {
		if sd != nil {
			bt.add(sd)
		}
	}
	if bt.n == 0 {
		return nil
	}
	return e.export(ctx, bt.appendExport(make([]byte, 0, bt.size()+256)), nil)
}

// bodyRefs counts the readers of an export's body that the HTTP transport
// holds. It may read one after Do has returned (see http.RoundTripper), so
// the buffer may be reused only once every reader is closed.
type bodyRefs struct{ open atomic.Int32 }

// reader is a new reader of b, counted until the transport closes it.
func (r *bodyRefs) reader(b []byte) io.ReadCloser {
	r.open.Add(1)
	br := &bodyReader{refs: r}
	br.Reset(b)
	return br
}

// released reports whether every reader has been closed.
func (r *bodyRefs) released() bool { return r.open.Load() == 0 }

type bodyReader struct {
	bytes.Reader
	refs   *bodyRefs
	closed atomic.Bool
}

func (b *bodyReader) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.refs.open.Add(-1)
	}
	return nil
}

// export posts body, an encoded ExportTraceServiceRequest, as ExportSpans
// describes. refs, when not nil, counts the readers of body the transport
// holds (the processor reuses the buffer once they are closed).
func (e *exporter) export(ctx context.Context, body []byte, refs *bodyRefs) error {
	if e.stopped.Err() != nil {
		return errExporterShutdown
	}
	if e.cfg.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body, refs = b.Bytes(), nil
	}
	if refs == nil {
		refs = &bodyRefs{}
	}
	if e.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.timeout)
		defer cancel()
	}
	// Shutdown cancels an export in flight.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stopped, cancel)()

	delay, err := e.post(ctx, body, refs)
	if delay < 0 {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
		return fmt.Errorf("%w (Retry-After %v is past the export's deadline)", err, delay)
	}
	if werr := waitCtx(ctx, delay); werr != nil {
		return fmt.Errorf("%w (retry abandoned: %v)", err, werr)
	}
	_, err = e.post(ctx, body, refs)
	return err
}

// post sends one export. A retryable failure returns its error and the
// delay before the retry; any other outcome a negative delay.
func (e *exporter) post(ctx context.Context, body []byte, refs *bodyRefs) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, refs.reader(body))
	if err != nil {
		return -1, fmt.Errorf("tracing: OTLP export: %w", err)
	}
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return refs.reader(body), nil }
	for k, v := range e.cfg.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentTypeProto)
	req.Header.Set("User-Agent", userAgent)
	if e.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// Quote the URL without its user info or query (the client's
		// *url.Error keeps the query).
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return -1, fmt.Errorf("tracing: OTLP export to %s: %w", redactURL(e.cfg.url), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		// The answer's partial_success is not read: nothing here acts on it.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return -1, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	err = fmt.Errorf("tracing: OTLP export to %s: %s: %s", redactURL(e.cfg.url), resp.Status, clip(msg))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After"), time.Now()), err
	}
	return -1, err
}

// retryAfter is the wait a Retry-After value asks for (seconds or an
// HTTP date), defaultRetryDelay when it says nothing usable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return defaultRetryDelay
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		if s > int64(math.MaxInt64/time.Second) {
			return math.MaxInt64
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return defaultRetryDelay
}

// clip renders an answer's body for an error: at most maxErrorBody
// bytes, invalid UTF-8 replaced, blanks trimmed, "(empty)" when there is
// none.
func clip(b []byte) string {
	cut := len(b) > maxErrorBody
	if cut {
		b = b[:maxErrorBody]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if s == "" {
		return "(empty)"
	}
	if cut {
		s += "…"
	}
	return s
}

// redactURL is u without its user info or query, for errors.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(endpoint)"
	}
	p.User, p.RawQuery, p.ForceQuery = nil, "", false
	return p.String()
}

// Shutdown stops the exporter: later exports fail and one in flight is
// cancelled. Safe to call any number of times, from any goroutine.
func (e *exporter) Shutdown(ctx context.Context) error {
	e.stop()
	e.client.CloseIdleConnections()
	return ctx.Err()
}

// newExporterFromEnv is the exporter New builds: opts' endpoint, else the
// process environment's.
func newExporterFromEnv(endpoint string) (*exporter, error) {
	cfg, err := exporterConfigFrom(endpoint, os.Getenv)
	if err != nil {
		return nil, err
	}
	return newExporter(cfg), nil
}
