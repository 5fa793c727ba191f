// Package audit writes Switchboard's audit log: one JSON line per request,
// written from one call site, with secret values redacted everywhere. It
// also provides the [Redactor] that keeps secrets out of the operational log
// ([RedactingHandler]).
//
// A line looks like this (wrapped here; bodies only with Options.LogBodies):
//
//	{"time":"2025-01-02T03:04:05.123456789Z","destination":"github","view":"mcp",
//	 "session":"0b6c…","source_ip":"127.0.0.1","http_method":"POST","path":"/mcp",
//	 "mcp_method":"tools/call","rpc_id":7,"status":200,"latency_ms":12.345,
//	 "request_body":"{…}","response_body":"{…}"}
package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// MaxBodyBytes is the most of each request or response body a line holds.
// Longer bodies are cut to this many bytes and the line is marked
// "truncated": true.
const MaxBodyBytes = 32 << 10

// Record is one request as the audit log sees it. The caller fills it once,
// when the request is complete (for a GET event stream, when the stream
// closes, so Latency spans the stream), and passes it to [Logger.Log].
type Record struct {
	// Time is when the request arrived. Zero means the time Log is called.
	// It is written in UTC.
	Time time.Time
	// Destination is the configured destination that served the request:
	// the one its path names, or, through an aggregated endpoint (View),
	// the member a call was routed to. "" when no single destination served
	// it (an aggregated endpoint's initialize, its merged lists, a request
	// refused before routing).
	Destination string
	// View is the aggregated endpoint the request came through, by its
	// session-table name: "mcp" for the default view, "mcp/{name}" for a
	// namespace or group. "" (written as no "view") for a destination's own
	// endpoint.
	View string
	// Client is the authenticated caller's name (internal/auth); "" omits
	// "client" (authentication off, or an anonymous request). Never a
	// credential.
	Client string
	// Session is the Mcp-Session-Id, or "" before a session exists.
	Session string
	// SourceIP is the client's address; see [SourceIP].
	SourceIP string
	// HTTPMethod is the request's HTTP method ("POST", "GET", "DELETE").
	HTTPMethod string
	// Path is the request path. Include the query only if it is wanted in
	// the log; secrets in it are redacted either way.
	Path string
	// MCPMethod is the JSON-RPC method, or "" (a GET stream, a response).
	MCPMethod string
	// Tool is the tool a tools/call names (params.name, as the client sent
	// it), or "".
	Tool string
	// RPCID is the raw JSON-RPC id. Nil omits "rpc_id" (a notification or
	// no JSON-RPC message). A value that is not valid JSON is written as a
	// JSON string.
	RPCID json.RawMessage
	// Status is the HTTP status code sent to the client.
	Status int
	// Latency is the time from arrival to the end of the response, written
	// as "latency_ms", a float with microsecond precision.
	Latency time.Duration
	// Error describes a failure; "" omits the field.
	Error string
	// Via is the meta-tool that ran the script ("execute") on the records
	// of tool calls made by code mode, which have no HTTP request of their
	// own (their Tool is the server's own name for the tool); "" omits it.
	Via string
	// Guard is what the guards (internal/guard/gate) found or did, as
	// "detector/rule at path+offset (action)" items joined by "; ", or a
	// tool's pin standing ("pin changed (block)"); "" omits "guard". Never
	// the text matched.
	Guard string
	// Diff is a pinned tool's definition diff (pinned "-", listed "+")
	// on a guard record; "" omits "diff".
	Diff string
	// Hook is the external guard hook's verdict on a tools/call
	// (internal/guard/gate): "allow", "block rule", "redact n span(s)" or
	// the failure and what it did ("timeout, fail open"), each with the
	// direction checked, items joined by "; "; "" omits "hook". Never the
	// text checked nor the hook's URL.
	Hook string
	// Upstream is how long the upstream server took to answer the call:
	// from the request written to it to its response read back. Zero when
	// no upstream answered (an error of Switchboard's own, a notification,
	// a stream, a legacy SSE POST, which is answered on the stream). The
	// time Switchboard added is Latency − Upstream. Not written to the log;
	// it feeds the metrics.
	Upstream time.Duration
	// BytesOut counts the response body bytes written to the client. Not
	// written to the log; it feeds the metrics.
	BytesOut int64
	// RequestBody and ResponseBody are written as the JSON strings
	// "request_body" and "response_body" only when the Logger was built with
	// LogBodies, and only when non-empty. Each is cut to MaxBodyBytes, after
	// redaction, with "truncated": true on the line.
	RequestBody, ResponseBody []byte

	// release is what OnRelease registered, run by Release (one func,
	// not a slice: every request's record carries it).
	release func()
}

// OnRelease registers f to run when the record is released (Release),
// once it has been logged and observed: a front that read a large body
// into a pooled buffer, or wrote an answer from one, gives the buffer
// back there, as RequestBody and ResponseBody may point into it until
// then.
func (r *Record) OnRelease(f func()) {
	if prev := r.release; prev != nil {
		next := f
		f = func() { prev(); next() }
	}
	r.release = f
}

// Release runs what OnRelease registered, once, and clears the record's
// bodies and RPCID (which may point into what is released). The one who
// logs the record calls it last; a record never released leaves its
// buffers to the garbage collector.
func (r *Record) Release() {
	if f := r.release; f != nil {
		r.release = nil
		f()
	}
	r.RequestBody, r.ResponseBody, r.RPCID = nil, nil, nil
}

// Options configures a [Logger]. The zero value logs no bodies and redacts
// nothing.
type Options struct {
	// LogBodies writes request and response bodies (config
	// audit.log_bodies, or the AUDIT_LOG_BODIES environment variable, as the
	// gateway decides). False omits them.
	LogBodies bool
	// Redact removes secret values from every string written. Nil redacts
	// nothing.
	Redact *Redactor
}

// Logger writes audit records as JSON lines. It is safe for concurrent use,
// and lines never interleave (and stay whole in a file opened with
// O_APPEND).
//
// Writes are grouped (group commit): a line is encoded into a batch, and
// the caller that finds no write in progress writes every line queued so
// far in one Write; the others wait until theirs is written. At one request
// in flight that is one Write per line; under concurrency, one
// system call per batch instead of one per line. Log returns once its line
// has been handed to the writer (or failed to), so a line is never held in
// memory after the request that made it is answered.
//
// A nil *Logger discards records, so "audit off" needs no special case.
type Logger struct {
	opts Options
	w    io.Writer

	mu      sync.Mutex
	cond    sync.Cond // on mu: a write ended
	pending []byte    // guarded by mu: lines queued, not yet being written
	spare   []byte    // guarded by mu: the batch last written, reused
	queued  uint64    // guarded by mu: lines queued so far
	written uint64    // guarded by mu: lines written (or failed) so far
	writing bool      // guarded by mu: a write is in progress
	broken  bool      // guarded by mu: the last write stopped mid-line; start the next on a new line

	writeErrors atomic.Uint64
}

// maxBatch is the size past which a batch takes no more lines while a
// write is in progress, and the largest batch buffer kept for reuse.
const maxBatch = 256 << 10

// New returns a Logger that writes to w, which must not be nil.
func New(w io.Writer, opts Options) *Logger {
	l := &Logger{w: w, opts: opts}
	l.cond.L = &l.mu
	return l
}

// WriteErrors returns how many lines could not be written in full. Log never
// returns errors; this is how a failing audit sink shows (for example as a
// metric).
func (l *Logger) WriteErrors() uint64 {
	if l == nil {
		return 0
	}
	return l.writeErrors.Load()
}

// line is the JSON shape of one record; field order is the output order.
type line struct {
	Time         time.Time       `json:"time"` // written in UTC, RFC 3339 with nanoseconds
	Destination  string          `json:"destination"`
	View         string          `json:"view,omitempty"`
	Client       string          `json:"client,omitempty"`
	Session      string          `json:"session"`
	SourceIP     string          `json:"source_ip"`
	HTTPMethod   string          `json:"http_method"`
	Path         string          `json:"path"`
	MCPMethod    string          `json:"mcp_method"`
	Tool         string          `json:"tool,omitempty"`
	RPCID        json.RawMessage `json:"rpc_id,omitempty"`
	Status       int             `json:"status"`
	LatencyMS    float64         `json:"latency_ms"`
	Error        string          `json:"error,omitempty"`
	Via          string          `json:"via,omitempty"`
	Guard        string          `json:"guard,omitempty"`
	Diff         string          `json:"diff,omitempty"`
	Hook         string          `json:"hook,omitempty"`
	RequestBody  string          `json:"request_body,omitempty"`
	ResponseBody string          `json:"response_body,omitempty"`
	Truncated    bool            `json:"truncated,omitempty"`
}

// Log writes r as one line. It does not keep r or its slices. Write errors
// are counted (see [Logger.WriteErrors]), not returned.
func (l *Logger) Log(r *Record) {
	if l == nil || r == nil {
		return
	}
	rd := l.opts.Redact
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	ln := line{
		Time:        t,
		Destination: rd.String(r.Destination),
		View:        rd.String(r.View),
		Client:      rd.String(r.Client),
		Session:     rd.String(r.Session),
		SourceIP:    rd.String(r.SourceIP),
		HTTPMethod:  rd.String(r.HTTPMethod),
		Path:        rd.String(r.Path),
		MCPMethod:   rd.String(r.MCPMethod),
		Tool:        rd.String(r.Tool),
		RPCID:       rpcID(rd, r.RPCID),
		Status:      r.Status,
		LatencyMS:   math.Round(float64(r.Latency)/1e3) / 1e3,
		Error:       rd.String(r.Error),
		Via:         rd.String(r.Via),
		Guard:       rd.String(r.Guard),
		Diff:        rd.String(r.Diff),
		Hook:        rd.String(r.Hook),
	}
	if l.opts.LogBodies {
		var cutReq, cutResp bool
		ln.RequestBody, cutReq = body(rd, r.RequestBody)
		ln.ResponseBody, cutResp = body(rd, r.ResponseBody)
		ln.Truncated = cutReq || cutResp
	}

	l.write(&ln)
}

// appendTo encodes the line as JSON, fields in order, ending in LF. It is
// hand-written because the audit log is on every request's path: it costs
// a fraction of encoding/json's reflection and allocates nothing.
func (ln *line) appendTo(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = appendTime(b, ln.Time)
	b = append(b, '"')
	b = appendField(b, `,"destination":`, ln.Destination, false)
	b = appendField(b, `,"view":`, ln.View, true)
	b = appendField(b, `,"client":`, ln.Client, true)
	b = appendField(b, `,"session":`, ln.Session, false)
	b = appendField(b, `,"source_ip":`, ln.SourceIP, false)
	b = appendField(b, `,"http_method":`, ln.HTTPMethod, false)
	b = appendField(b, `,"path":`, ln.Path, false)
	b = appendField(b, `,"mcp_method":`, ln.MCPMethod, false)
	b = appendField(b, `,"tool":`, ln.Tool, true)
	if len(ln.RPCID) > 0 {
		b = append(b, `,"rpc_id":`...)
		b = append(b, ln.RPCID...)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(ln.Status), 10)
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendFloat(b, ln.LatencyMS, 'f', -1, 64)
	b = appendField(b, `,"error":`, ln.Error, true)
	b = appendField(b, `,"via":`, ln.Via, true)
	b = appendField(b, `,"guard":`, ln.Guard, true)
	b = appendField(b, `,"diff":`, ln.Diff, true)
	b = appendField(b, `,"hook":`, ln.Hook, true)
	b = appendField(b, `,"request_body":`, ln.RequestBody, true)
	b = appendField(b, `,"response_body":`, ln.ResponseBody, true)
	if ln.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, "}\n"...)
}

// appendField appends key and v as a JSON string, or nothing when v is ""
// and omitEmpty is set.
func appendField(b []byte, key, v string, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return b
	}
	return appendJSONString(append(b, key...), v)
}

// appendTime appends t in UTC as time.RFC3339Nano formats it
// ("2006-01-02T15:04:05.999999999Z": trailing zeros of the fraction
// dropped, no fraction at all when it is zero). It is hand-written because
// it is on every request's path: Format costs a fifth of the whole audit
// line (layout parsing, an allocation), this a few dozen instructions.
// Years outside 0000-9999 take Format's way.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	hour, min, sec := t.Clock()
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	b = append2(b, int(month), '-')
	b = append2(b, day, 'T')
	b = append2(b, hour, ':')
	b = append2(b, min, ':')
	b = append2(b, sec, 0)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, 'Z')
}

// append2 appends v as two digits, then sep unless it is 0.
func append2(b []byte, v int, sep byte) []byte {
	b = append(b, byte('0'+v/10), byte('0'+v%10))
	if sep != 0 {
		b = append(b, sep)
	}
	return b
}

// appendJSONString appends s as a JSON string, as encoding/json does with
// HTML escaping off: quotes, backslashes and control characters escaped,
// invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plain is true for the bytes a JSON string holds as they are: printable
// ASCII but the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// write queues ln's line and returns once it is written: by this caller,
// together with every line queued before it, or by the caller that was
// writing when it was queued.
func (l *Logger) write(ln *line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.writing && len(l.pending) >= maxBatch {
		l.cond.Wait()
	}
	l.pending = ln.appendTo(l.pending)
	l.queued++
	mine := l.queued
	for l.writing && l.written < mine {
		l.cond.Wait()
	}
	if l.written >= mine {
		return // written by another caller
	}
	// Nobody is writing and this line is still queued: write the lot.
	out, upto := l.pending, l.queued
	l.pending, l.spare = l.spare[:0], nil
	l.writing = true
	broken := l.broken
	l.mu.Unlock()
	lost, broken := writeBatch(l.w, out, broken)
	l.mu.Lock()
	l.writing = false
	l.broken = broken
	l.written = upto
	if lost > 0 {
		l.writeErrors.Add(uint64(lost))
	}
	if cap(out) <= maxBatch {
		l.spare = out[:0]
	}
	l.cond.Broadcast()
}

// writeBatch writes out, whole lines ending in LF, in one Write (after an LF
// ending the line a previous write cut off, if broken). It returns how many
// lines were not written in full, and whether the write stopped mid-line.
func writeBatch(w io.Writer, out []byte, broken bool) (lost int, stillBroken bool) {
	if broken {
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return bytes.Count(out, []byte{'\n'}), true
		}
	}
	n, err := w.Write(out)
	if err == nil && n == len(out) {
		return 0, false
	}
	n = max(0, min(n, len(out)))
	return bytes.Count(out[n:], []byte{'\n'}), n > 0 && out[n-1] != '\n'
}

func rpcID(rd *Redactor, id json.RawMessage) json.RawMessage {
	if id == nil {
		return nil
	}
	id = rd.Bytes(id)
	if json.Valid(id) {
		return id
	}
	s, _ := json.Marshal(string(id)) // a string never fails to marshal
	return s
}

// body redacts b and cuts it to MaxBodyBytes, reporting whether it cut.
// Redaction comes first so a cut can never leave a secret's prefix behind.
// Only the head of a long body is redacted: it covers every secret that
// starts before the cut.
func body(rd *Redactor, b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	window := MaxBodyBytes + rd.maxSecretLen()
	cut := len(b) > window
	if cut {
		// A secret the window cuts could otherwise show its prefix once
		// redaction before it has shortened the text.
		b = rd.load().trimHead(b[:window])
	}
	b = rd.Bytes(b)
	if len(b) > MaxBodyBytes {
		b, cut = b[:MaxBodyBytes], true
	}
	return string(b), cut
}

// SourceIP returns the client address of r for the audit log: the host part
// of r.RemoteAddr (r.RemoteAddr itself if it has no port).
//
// X-Forwarded-For and similar headers are deliberately ignored. Switchboard
// is reached directly, not through a proxy it trusts, so those headers are
// whatever the client chose to send; honouring them would let any caller
// write a forged source address into the audit trail.
func SourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
