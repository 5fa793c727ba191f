// Package agentruntime is the front of `switchboard agentcore`, the side of
// Switchboard that runs inside an Amazon Bedrock AgentCore Runtime container
// and serves the platform's two contracts over the gateway's Streamable HTTP
// endpoint of one stdio server:
//
//   - the MCP-protocol contract: /mcp (POST, GET, DELETE);
//   - the HTTP-protocol contract: /invocations (the same semantics: a JSON
//     or an SSE answer, server→client requests on the SSE answer, the
//     client's reply as a later POST) and GET /ping, which answers
//     {"status":"HealthyBusy"} while any POST is in flight and
//     {"status":"Healthy"} otherwise, with time_of_last_update (unix
//     seconds of the last change between the two).
//
// Both contracts accept the platform's runtime-session header
// (X-Amzn-Bedrock-AgentCore-Runtime-Session-Id) besides Mcp-Session-Id. The
// rule: a response that opens a session (it carries Mcp-Session-Id) to a
// request that carried a runtime-session id binds that id to the session;
// a later request carrying the runtime-session id but no Mcp-Session-Id
// reaches the bound session. Mcp-Session-Id, when present, always wins; an
// initialize request never has a session put on it (it opens a new one,
// which the id is then bound to); the binding ends when the session is
// deleted or answered 404 (expired). A request whose runtime-session id is
// bound to nothing is passed on unchanged.
package agentruntime

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// HeaderRuntimeSession is the AgentCore contract's session header (the
// MCP one is mcp.HeaderSessionID).
const HeaderRuntimeSession = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"

// Options configure a Front. The zero value of each field is its default.
type Options struct {
	// Endpoint is the path of the gateway's Streamable HTTP endpoint that
	// /mcp and /invocations are served by, e.g. "/server/mcp". Required.
	Endpoint string
	// MaxBindings bounds the runtime-session table; when full the oldest
	// binding is forgotten. Zero means 10000.
	MaxBindings int
	// Now is the clock of time_of_last_update. Nil means time.Now.
	Now func() time.Time
}

// Front serves the contracts over next, the gateway's HTTP handler. It is
// safe for concurrent use.
type Front struct {
	next http.Handler
	opts Options

	mu      sync.Mutex
	bound   map[string]string // runtime-session id → Mcp-Session-Id
	order   []string          // runtime-session ids, oldest binding first (may hold stale ids)
	busy    int               // POSTs in flight
	changed time.Time         // when busy last went 0→1 or 1→0
}

// New returns a Front forwarding to next.
func New(next http.Handler, opts Options) *Front {
	if opts.MaxBindings <= 0 {
		opts.MaxBindings = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Front{next: next, opts: opts, bound: map[string]string{}, changed: opts.Now()}
}

// MCP is the handler of the MCP-protocol contract: /mcp, and /ping.
func (f *Front) MCP() http.Handler { return f.mux("/mcp") }

// HTTP is the handler of the HTTP-protocol contract: /invocations and
// GET /ping.
func (f *Front) HTTP() http.Handler { return f.mux("/invocations") }

// mux serves the contract's endpoint at path, and GET /ping.
func (f *Front) mux(path string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(path, f.forward)
	mux.HandleFunc("GET /ping", f.ping)
	mux.HandleFunc("/", notFound)
	return mux
}

// Busy reports whether a POST is in flight, and since when that is so.
func (f *Front) Busy() (busy bool, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.busy > 0, f.changed
}

func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "no such endpoint: " + r.URL.Path + " (serving /mcp, /invocations and /ping)"})
}

func (f *Front) ping(w http.ResponseWriter, _ *http.Request) {
	busy, since := f.Busy()
	status := "Healthy"
	if busy {
		status = "HealthyBusy"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "time_of_last_update": since.Unix()})
}

func (f *Front) setBusy(delta int) {
	f.mu.Lock()
	before := f.busy
	f.busy += delta
	if (before == 0) != (f.busy == 0) {
		f.changed = f.opts.Now()
	}
	f.mu.Unlock()
}

// peekLimit is how much of a POST body is read to tell an initialize.
const peekLimit = 64 << 10

// forward serves /mcp or /invocations with the gateway's endpoint.
func (f *Front) forward(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		f.setBusy(1)
		defer f.setBusy(-1)
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = f.opts.Endpoint, ""
	r2.URL = &u
	rid := r.Header.Get(HeaderRuntimeSession)
	injected := ""
	if rid != "" && r.Header.Get(mcp.HeaderSessionID) == "" {
		if sid := f.lookup(rid); sid != "" && !f.isInitialize(r2) {
			r2.Header = r.Header.Clone()
			r2.Header.Set(mcp.HeaderSessionID, sid)
			injected = sid
		}
	}
	sid := r2.Header.Get(mcp.HeaderSessionID)
	bw := &bindingWriter{ResponseWriter: w, f: f, rid: rid, injected: injected}
	f.next.ServeHTTP(bw, r2)
	bw.observe(http.StatusOK) // a handler that wrote nothing answered 200
	if rid != "" && r.Method == http.MethodDelete && bw.status/100 == 2 && sid != "" {
		f.unbind(rid, sid)
	}
}

// isInitialize reads the start of r's body (putting it back) and reports
// whether it is an initialize request or a batch holding one.
func (f *Front) isInitialize(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.ContentLength > peekLimit {
		// A declared body longer than the peek would not parse as JSON
		// from its head anyway; not reading it lets the gateway refuse
		// an oversized one (413) before a byte is sent.
		return false
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, peekLimit))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil {
		return false
	}
	type msg struct {
		Method string `json:"method"`
	}
	var one msg
	if json.Unmarshal(head, &one) == nil {
		return one.Method == "initialize"
	}
	var batch []msg
	return json.Unmarshal(head, &batch) == nil && slices.ContainsFunc(batch, func(m msg) bool { return m.Method == "initialize" })
}

func (f *Front) lookup(rid string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bound[rid]
}

func (f *Front) bind(rid, sid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.bound[rid]; !ok {
		f.order = append(f.order, rid)
	}
	f.bound[rid] = sid
	for len(f.bound) > f.opts.MaxBindings && len(f.order) > 0 {
		delete(f.bound, f.order[0])
		f.order = f.order[1:]
	}
	if len(f.order) > 2*f.opts.MaxBindings { // drop ids already unbound
		f.order = slices.DeleteFunc(f.order, func(id string) bool {
			_, ok := f.bound[id]
			return !ok
		})
	}
}

// unbind forgets rid if it is still bound to sid.
func (f *Front) unbind(rid, sid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bound[rid] == sid {
		delete(f.bound, rid)
	}
}

// Bindings returns how many runtime-session ids are bound.
func (f *Front) Bindings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bound)
}

// bindingWriter watches the response head for a new session (bind) or a
// lost one (404: unbind).
type bindingWriter struct {
	http.ResponseWriter
	f        *Front
	rid      string
	injected string
	status   int
}

func (w *bindingWriter) observe(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if w.rid == "" {
		return
	}
	if sid := w.Header().Get(mcp.HeaderSessionID); sid != "" && code/100 == 2 && sid != w.injected {
		w.f.bind(w.rid, sid)
	}
	if code == http.StatusNotFound && w.injected != "" {
		w.f.unbind(w.rid, w.injected)
	}
}

func (w *bindingWriter) WriteHeader(code int) {
	w.observe(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *bindingWriter) Write(b []byte) (int, error) {
	w.observe(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *bindingWriter) Flush() {
	w.observe(http.StatusOK)
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap keeps http.ResponseController working through the writer.
func (w *bindingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
