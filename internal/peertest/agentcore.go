package peertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AgentCoreSessionHeader is the header that names an AgentCore runtime
// session (33–256 characters).
const AgentCoreSessionHeader = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"

// AgentCoreOptions configure an [AgentCore] emulator. Zero values are
// documented per field.
type AgentCoreOptions struct {
	// Verify checks each request's signature over its exact body (for
	// example VerifySigV4Scope(agentcore.Service, region, creds)); an error answers 403
	// InvalidSignatureException. Nil accepts every request.
	Verify func(r *http.Request, body []byte) error
	// NewServer builds the MCP server of each new container. Nil means
	// NewFeatureServer("agentcore").Server.
	NewServer func() *mcp.Server
	// Stateless runs one stateless go-sdk handler for every runtime
	// session (what request-mode runtimes need). False gives each runtime
	// session its own container: a stateful handler that must see
	// initialize first.
	Stateless bool
	// BackendURL, when set, forwards each invocation there (for example to
	// `switchboard agentcore`'s /invocations), streaming the answer;
	// NewServer, Stateless and Restart do not apply.
	BackendURL string
}

// AgentCoreCall is one invocation the emulator accepted or refused.
type AgentCoreCall struct {
	ARN        string // the runtime ARN, unescaped from the path
	RawPath    string // the path as sent (escaped)
	Qualifier  string // the qualifier query parameter ("" when absent)
	Session    string // the runtime-session header
	McpSession string // the Mcp-Session-Id header
	Method     string // the JSON-RPC method ("" for a response)
	Header     http.Header
	Status     int // the status the emulator answered with, when it refused (0 otherwise)
}

// AgentCore is test support: an emulator of Bedrock AgentCore's
// InvokeAgentRuntime on 127.0.0.1 (POST /runtimes/{ARN}/invocations).
// It checks each request's signature (Options.Verify), path, runtime
// session header (33–256 characters; 400 ValidationException otherwise)
// and records them, then forwards the MCP body to the runtime session's
// container: a go-sdk Streamable HTTP handler running a fresh MCP server.
// GET and DELETE answer 405, as AgentCore has no listen stream.
//
// Restart replaces a container as AgentCore does when a microVM is
// recycled: the new child has had no handshake, so every request but
// initialize is answered (HTTP 200, JSON) with -32602 "Invalid request
// parameters", the error a stdio server behind a stateful bridge gives
// before initialize; notifications are accepted and dropped. A sessionless
// 2026-07-28 request (Mcp-Protocol-Version 2026-…, no Mcp-Session-Id) is
// served by a stateless handler instead. Its methods
// are safe for concurrent use; the server is closed by t.Cleanup.
type AgentCore struct {
	URL string // the endpoint: http://127.0.0.1:port, no path

	opts      AgentCoreOptions
	srv       *httptest.Server
	stateless http.Handler

	mu         sync.Mutex
	calls      []AgentCoreCall       // guarded by mu
	containers map[string]*container // guarded by mu; by runtime session
	expire     int                   // guarded by mu: requests still to answer ExpiredTokenException
	modern     http.Handler          // guarded by mu: serves sessionless 2026-07-28 requests
}

// container is one runtime session's microVM: a stateful handler and
// whether its server saw initialize.
type container struct {
	h           http.Handler
	initialized bool
}

// NewAgentCore starts an emulator.
func NewAgentCore(t testing.TB, opts AgentCoreOptions) *AgentCore {
	t.Helper()
	if opts.NewServer == nil {
		opts.NewServer = func() *mcp.Server { return NewFeatureServer("agentcore").Server }
	}
	a := &AgentCore{opts: opts, containers: map[string]*container{}}
	if opts.Stateless {
		s := opts.NewServer()
		a.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = a.srv.URL
	t.Cleanup(a.srv.Close)
	return a
}

// ExpireNext makes the next n invocations fail with 403
// ExpiredTokenException (before their signature is checked).
func (a *AgentCore) ExpireNext(n int) {
	a.mu.Lock()
	a.expire = n
	a.mu.Unlock()
}

// Restart replaces the container of every runtime session (a fresh child
// that has not been initialized) and returns how many it replaced.
func (a *AgentCore) Restart() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.containers {
		a.containers[id] = &container{h: a.newHandler()}
	}
	return len(a.containers)
}

// Calls returns a copy of every invocation so far, in arrival order.
func (a *AgentCore) Calls() []AgentCoreCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]AgentCoreCall, len(a.calls))
	copy(out, a.calls)
	return out
}

// Count returns how many invocations arrived whose JSON-RPC method is
// method ("" counts all).
func (a *AgentCore) Count(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		if method == "" || c.Method == method {
			n++
		}
	}
	return n
}

// Sessions returns the distinct runtime session ids seen, in order of
// first use.
func (a *AgentCore) Sessions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, c := range a.calls {
		if c.Session != "" && !seen[c.Session] {
			seen[c.Session] = true
			out = append(out, c.Session)
		}
	}
	return out
}

func (a *AgentCore) newHandler() http.Handler {
	s := a.opts.NewServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

func awsError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg, "__type": typ})
}

func (a *AgentCore) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 100<<20))
	if err != nil {
		awsError(w, http.StatusBadRequest, "ValidationException", "unreadable body")
		return
	}
	call := AgentCoreCall{RawPath: r.URL.EscapedPath(), Qualifier: r.URL.Query().Get("qualifier"),
		Session: r.Header.Get(AgentCoreSessionHeader), McpSession: r.Header.Get("Mcp-Session-Id"), Header: r.Header.Clone()}
	var msg struct {
		Method string `json:"method"`
		ID     json.RawMessage
	}
	_ = json.Unmarshal(body, &msg)
	call.Method = msg.Method
	refuse := func(status int, typ, text string) {
		call.Status = status
		a.record(call)
		awsError(w, status, typ, text)
	}
	a.mu.Lock()
	expired := a.expire > 0
	if expired {
		a.expire--
	}
	a.mu.Unlock()
	if expired {
		refuse(http.StatusForbidden, "ExpiredTokenException", "The security token included in the request is expired")
		return
	}
	if a.opts.Verify != nil {
		if err := a.opts.Verify(r, body); err != nil {
			refuse(http.StatusForbidden, "InvalidSignatureException", err.Error())
			return
		}
	}
	const prefix, suffix = "/runtimes/", "/invocations"
	p := call.RawPath
	if !strings.HasPrefix(p, prefix) || !strings.HasSuffix(p, suffix) || len(p) <= len(prefix)+len(suffix) {
		refuse(http.StatusNotFound, "ResourceNotFoundException", "no such path: "+p)
		return
	}
	seg := p[len(prefix) : len(p)-len(suffix)]
	if strings.Contains(seg, "/") {
		refuse(http.StatusNotFound, "ResourceNotFoundException", "the ARN must be percent-encoded in the path: "+p)
		return
	}
	call.ARN, err = url.PathUnescape(seg)
	if err != nil || !strings.HasPrefix(call.ARN, "arn:aws") || !strings.Contains(call.ARN, ":bedrock-agentcore:") || !strings.Contains(call.ARN, ":runtime/") {
		refuse(http.StatusBadRequest, "ValidationException", "not a runtime ARN: "+seg)
		return
	}
	if n := len(call.Session); n < 33 || n > 256 {
		refuse(http.StatusBadRequest, "ValidationException", fmt.Sprintf("runtimeSessionId must be 33 to 256 characters, not %d", n))
		return
	}
	if r.Method != http.MethodPost {
		refuse(http.StatusMethodNotAllowed, "ValidationException", "InvokeAgentRuntime is POST only")
		return
	}
	a.record(call)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	switch {
	case a.opts.BackendURL != "":
		u, err := url.Parse(a.opts.BackendURL)
		if err != nil {
			awsError(w, http.StatusInternalServerError, "InternalServerException", err.Error())
			return
		}
		rp := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = u
			pr.Out.Host = u.Host
		}}
		rp.ServeHTTP(w, r)
	case a.stateless != nil:
		r.Header.Del("Mcp-Session-Id")
		a.stateless.ServeHTTP(w, r)
	case r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= "2026":
		// A sessionless (2026-07-28) request needs no handshake: the
		// container's server answers it statelessly.
		a.mu.Lock()
		if a.modern == nil {
			s := a.opts.NewServer()
			a.modern = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
		}
		h := a.modern
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	default:
		a.mu.Lock()
		c := a.containers[call.Session]
		if c == nil {
			c = &container{h: a.newHandler()}
			a.containers[call.Session] = c
		}
		isInit := msg.Method == "initialize"
		ready := c.initialized
		a.mu.Unlock()
		switch {
		case isInit:
			r.Header.Del("Mcp-Session-Id")
			// The container is ready once it answers 200, before the
			// client can see the answer and send on.
			c.h.ServeHTTP(&statusWriter{ResponseWriter: w, ok: func() {
				a.mu.Lock()
				c.initialized = true
				a.mu.Unlock()
			}}, r)
		case !ready && msg.ID == nil:
			w.WriteHeader(http.StatusAccepted) // a notification the fresh child drops
		case !ready:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"Invalid request parameters","data":"Received request before initialization was complete"}}`, msg.ID)
		default:
			c.h.ServeHTTP(w, r)
		}
	}
}

func (a *AgentCore) record(c AgentCoreCall) {
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
}

// statusWriter calls ok when a handler writes status 200, and passes
// Flush on.
type statusWriter struct {
	http.ResponseWriter
	ok    func()
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote && code == http.StatusOK {
		s.ok()
	}
	s.wrote = true
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
