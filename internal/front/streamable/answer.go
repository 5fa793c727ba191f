package streamable

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/bigbuf"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// answer writes a call's messages to the client: JSON when the response is
// the first thing to arrive (and JSON is accepted), else an SSE stream.
// modern selects 2026-07-28 semantics: closing the stream cancels.
//
// A client that takes only JSON (against the spec, which requires both)
// gets the response alone: related notifications are dropped.
//
// It reports whether the call's response was written: the call is over
// then, and nothing reads its request any more.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, rec *audit.Record, call session.Call, jsonOK, sseOK, modern bool) (answered bool) {
	// gone is closed when net/http's read of the connection sees it end:
	// the client went away, or half-closed its socket after sending (the
	// two look alike at the socket until a write, and a write to a peer
	// that is gone may still succeed). The call is abandoned then, as for
	// a client that left: a modern one cancelled (its era: closing the
	// stream cancels), a legacy one left to run, its answer dropped and its
	// server→client requests sent to the session's listen stream. A
	// half-closed client that has been sent nothing yet is told so with a
	// JSON-RPC error rather than an empty answer.
	gone := r.Context().Done()
	timeout := h.opts.Timeout
	if call.LongLived() {
		timeout = 0
	}
	var timer *time.Timer
	var expired <-chan time.Time
	if timeout > 0 {
		timer = getTimer(timeout)
		defer putTimer(timer)
		expired = timer.C
	}
	var keep <-chan time.Time
	var ev *sse.Writer
	unflushed := false // events written but not flushed: more were at hand
	for {
		m, ended := call.Poll()
		if m == nil && unflushed {
			// Nothing more at hand: send what is buffered before waiting.
			if ev.Flush() != nil {
				call.Abandon(modern)
				return
			}
			unflushed = false
		}
		if m == nil {
			if ended {
				call.Abandon(modern)
				return // the call ended without a response (cannot happen for upstream calls)
			}
			select {
			case <-call.Ready():
				continue
			case <-keep:
				if ev.Comment("keep-alive") != nil {
					call.Abandon(modern)
					return
				}
				continue
			case <-expired:
				call.Abandon(true)
				e := jsonrpc.Errorf(mcp.CodeUpstreamTimeout, "no response from %s within %s", h.opts.Name, timeout)
				rec.Error = e.Message
				if ev == nil {
					writeError(w, http.StatusGatewayTimeout, rec.RPCID, e)
					rec.Status = http.StatusGatewayTimeout
				} else {
					_ = ev.Event("message", "", jsonrpc.NewError(rec.RPCID, e).Encode())
				}
				return
			case <-gone:
				call.Abandon(modern) // the client went away, or half-closed
				if ev == nil {
					writeError(w, http.StatusOK, rec.RPCID, jsonrpc.Errorf(mcp.CodeRequestRefused,
						"the client closed its side of the connection before the answer; the call was abandoned"))
				}
				return
			case <-h.opts.Done:
				call.Abandon(true)
				if ev == nil {
					writeError(w, http.StatusServiceUnavailable, rec.RPCID, jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "switchboard is shutting down"))
				}
				return
			}
		}
		final := m.IsResponse()
		if final {
			rec.Upstream = session.UpstreamTime(call)
		}
		if !final && !sseOK {
			h.log.Debug("client takes only JSON; message dropped", "method", m.Method)
			continue
		}
		if final && ev == nil && (jsonOK || !sseOK) {
			h.writeFinal(w, rec, m, true, modern)
			releaseAfter(rec, m)
			return true
		}
		if ev == nil {
			ev = startSSE(w, http.StatusOK, false) // the event below follows at once
			// No resumption is offered (Last-Event-ID), but clients that
			// reconnect should wait: the same hint the go-sdk gives.
			_ = ev.Retry(time.Second)
			rec.Status = http.StatusOK
			// Proxies and clients drop quiet streams: a slow tool or a
			// subscription gets comments in between.
			k := sse.NewKeepAlive(h.opts.KeepAlive)
			defer k.Stop()
			keep = k.C
		}
		// A notification is flushed with whatever follows it at once (the
		// next Poll finding nothing flushes it): progress, a log line and
		// the response that a tool sends together go out in one write.
		var err error
		if final {
			err = ev.Event("message", "", m.Encode())
		} else {
			err = ev.EventNoFlush("message", "", m.Encode())
		}
		if err != nil {
			call.Abandon(modern)
			return
		}
		unflushed = !final
		if final {
			rec.ResponseBody = m.Encode()
			if m.Error != nil {
				rec.Error = m.ErrorOf().Message
			}
			releaseAfter(rec, m)
			return true
		}
		if timer != nil && m.Method == "notifications/progress" {
			timer.Reset(timeout) // progress shows the call is alive
		}
	}
}

// releaseAfter gives m's pooled buffer (a large answer's, see
// jsonrpc.Message.Release) back to bigbuf once rec has been logged: the
// answer has been written, and only the record still points into it.
func releaseAfter(rec *audit.Record, m *jsonrpc.Message) {
	if buf := m.Release(); buf != nil {
		rec.OnRelease(func() { bigbuf.Put(buf) })
	}
}

// releaseBody gives a large request body back to bigbuf once rec has been
// logged, when answered: its call is over, so nothing reads the request
// (and its id, which the call kept) any more. An unanswered call may
// still be running: its body is left to the garbage collector.
func releaseBody(rec *audit.Record, body []byte, answered bool) {
	if answered && cap(body) >= bigbuf.Min {
		rec.OnRelease(func() { bigbuf.Put(body) })
	}
}

// timers recycles the response timers of answer: a call in flight needs
// one, and a new one costs three allocations. Since Go 1.23 a timer that
// Stop or Reset returned from never delivers a stale value, so a pooled
// timer is as good as a new one.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// writeFinal writes a response as JSON (or as a one-event SSE stream when
// the client takes only SSE). Gateway errors get their HTTP status.
func (h *Handler) writeFinal(w http.ResponseWriter, rec *audit.Record, m *jsonrpc.Message, jsonOK, modern bool) {
	body := m.Encode()
	rec.ResponseBody = body
	status := http.StatusOK
	if e := m.ErrorOf(); e != nil {
		status = mcp.StatusFor(e.Code, modern)
		rec.Error = e.Message
	}
	rec.Status = status
	if !jsonOK {
		ev := startSSE(w, status, false)
		_ = ev.Event("message", "", body)
		return
	}
	hd := w.Header()
	hd["Content-Type"] = hdrJSON
	hd["Cache-Control"] = hdrNoStore
	hd["Content-Length"] = contentLength(len(body))
	hd["Date"] = httpDate()
	w.WriteHeader(status)
	_, _ = w.Write(body)
	// Send it now, in one write with its headers: what runs after the
	// handler returns (the audit line and its write, metrics) must not
	// delay the client. With Content-Length set, net/http has nothing left
	// to write when the handler returns (no chunked encoding).
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// date caches the Date header of the current second: net/http formats one
// per response otherwise (a fifth of its own response-writing cost).
var date atomic.Pointer[dateValue]

type dateValue struct {
	sec int64
	v   []string
}

// httpDate returns the Date header value for now.
func httpDate() []string {
	now := time.Now()
	sec := now.Unix()
	if d := date.Load(); d != nil && d.sec == sec {
		return d.v
	}
	d := &dateValue{sec: sec, v: []string{now.UTC().Format(http.TimeFormat)}}
	date.Store(d)
	return d.v
}

// Header values of every JSON answer, shared rather than allocated per
// answer: net/http only reads them, and an Add after ours appends to a
// full slice, which copies.
var (
	hdrJSON    = []string{"application/json"}
	hdrNoStore = []string{"no-store"}
)

// contentLengths holds the Content-Length values of small answers, made
// on first use and shared as the values above are.
var contentLengths [8 << 10]atomic.Pointer[[]string]

// contentLength returns the Content-Length header value for n bytes.
func contentLength(n int) []string {
	if n >= len(contentLengths) {
		return []string{strconv.Itoa(n)}
	}
	if v := contentLengths[n].Load(); v != nil {
		return *v
	}
	v := []string{strconv.Itoa(n)}
	contentLengths[n].Store(&v)
	return v
}

// fail writes the answer for an error returned before any response exists,
// with the status and JSON-RPC error mcp.Classify gives it.
func (h *Handler) fail(w http.ResponseWriter, msg *jsonrpc.Message, err error) {
	status, e := mcp.Classify(err)
	if status >= 500 {
		h.log.Warn("request failed", "method", msg.Method, "status", status, "err", err)
	}
	var id []byte
	if msg.IsRequest() {
		id = msg.ID
	}
	writeError(w, status, id, e)
}

// writeError writes a JSON-RPC error response with an HTTP status.
func writeError(w http.ResponseWriter, status int, id []byte, e *jsonrpc.Error) {
	if rec, ok := w.(interface{ Record() *audit.Record }); ok {
		rec.Record().Error = e.Message
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(jsonrpc.NewError(id, e).Encode())
}

// startSSE writes the headers of an event stream and returns its writer.
// flush sends them at once (a stream that may stay quiet); without it they
// go out with the first event, in the same write.
func startSSE(w http.ResponseWriter, status int, flush bool) *sse.Writer {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache, no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(status)
	ev := sse.NewWriter(w)
	if flush {
		_ = http.NewResponseController(w).Flush()
	}
	return ev
}
