// Package streamable serves the MCP Streamable HTTP transport to clients:
// POST, GET and DELETE on one endpoint, for both protocol eras.
//
// Legacy era (2025-11-25 and earlier): an initialize POST without
// Mcp-Session-Id opens a session (Switchboard mints the id); later POSTs
// carry it; GET opens a listen stream; DELETE ends the session.
//
// Modern era (2026-07-28): a POST whose params carry
// _meta["io.modelcontextprotocol/protocolVersion"] is stateless. Its
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers are checked against
// the body (400 with -32020 on a mismatch), and closing the response stream
// cancels the request.
//
// Every request answer is chosen lazily: when the first message for a call
// is its response and the client accepts JSON, the answer is one JSON
// object; as soon as anything else comes first (progress, a log message, a
// server→client request) the answer becomes an SSE stream, flushed per event.
//
// The package writes the wire format itself (see package sse) rather than
// using the go-sdk's StreamableHTTPHandler: the gateway forwards messages it
// does not decode, and the go-sdk handler decodes every message into typed
// values and owns the session semantics Switchboard must control.
package streamable

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/cluster/replica"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/mcpheader"
	"github.com/switchboard-mcp/switchboard/internal/reqbody"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Destination is what the handler serves: one upstream or an aggregated
// view. The gateway implements it.
type Destination interface {
	// Open attaches a new legacy session: it runs (or reuses) the upstream
	// handshake and returns the session's backend and the InitializeResult
	// response for the client.
	Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
	// Stateless sends a 2026-07-28 request, which belongs to no session.
	Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error)
}

// Options configure a Handler. Zero values are documented per field.
type Options struct {
	Name string // destination name; sessions are scoped to it
	// View marks Name as an aggregated endpoint's (a router): requests are
	// recorded with audit View = Name and the Destination left to the
	// backend, which names the member a call is routed to. False records
	// Destination = Name.
	View     bool
	Sessions *session.Table // required; shared with the legacy SSE front
	// Timeout bounds the wait for a response; progress notifications
	// restart it. Zero means 30 s. Subscription streams have no deadline.
	Timeout time.Duration
	// MaxBody is the largest request body accepted (413 beyond). Zero means 16 MiB.
	MaxBody int64
	// KeepAlive is the interval of SSE comment keep-alives. Zero means
	// 15 s; negative disables them.
	KeepAlive time.Duration
	// GetStreams caps the concurrent GET listen streams of one session;
	// one more gets 409 Conflict (the answer the SDKs' servers give to a
	// stream they do not take, and not 405, which would say the endpoint
	// has no GET stream at all). Zero means 8.
	GetStreams int
	// Done, when closed, ends every open stream (graceful shutdown).
	Done <-chan struct{}
	// Drain, when closed, ends the listen (GET) streams only: a cluster
	// replica draining, whose clients reconnect to another replica while
	// its calls finish. Nil: never.
	Drain  <-chan struct{}
	Logger *slog.Logger // nil discards
	// ParamHeaders returns the x-mcp-header bindings of the named tool, for
	// validating the Mcp-Param-* headers of a 2026-07-28 tools/call
	// (SEP-2243); req is that call. No bindings (an unknown tool) means
	// nothing to check. Nil disables the validation; an error is logged and
	// the call goes through unvalidated.
	ParamHeaders func(ctx context.Context, req *jsonrpc.Message, tool string) ([]mcpheader.ParamBinding, error)
	// Cluster makes the session ids sealed tokens that any replica of a
	// cluster opens, and adopts a session this replica does not hold (its
	// owner died, or the request was forwarded here). Nil (a single
	// replica): random ids, sessions are this process's.
	Cluster Cluster
	// Events keeps the events of the listen (GET) streams: each event
	// gets an id, <stream tag>_<cursor>, and a GET with the Last-Event-ID
	// of one replays the events of that stream after it, then continues
	// it (see listenLogged). Nil: events without ids, Last-Event-ID
	// ignored.
	Events EventLog
}

// Cluster is what the handler needs of a cluster (*replica.Replica).
type Cluster interface {
	// Mint seals the id of a new session at path for the request's
	// caller: the token is the Mcp-Session-Id, name what logs show.
	Mint(ctx context.Context, path string, init *jsonrpc.Message) (token, name string, err error)
	// Adopt opens token for the caller at path and makes this replica the
	// session's owner. A token that does not open is sealed.ErrInvalid.
	Adopt(ctx context.Context, path, token string) (replica.Adoption, error)
	// Note records a request of the session (named name) that may change
	// its state (logging/setLevel, resources/subscribe…).
	Note(ctx context.Context, name string, req *jsonrpc.Message)
	// Ended says the session ended (DELETE).
	Ended(ctx context.Context, name string)
}

// Handler serves one Streamable HTTP endpoint.
type Handler struct {
	dest Destination
	opts Options
	log  *slog.Logger
	// adoptMu serialises adoptions (Options.Cluster), so that two
	// requests of one session arriving together adopt it once.
	adoptMu sync.Mutex
	// listening are the listen streams served with event ids (Events),
	// for a resumption to take over the stream it resumes.
	listening listeners
}

// NewHandler returns a Handler for dest.
func NewHandler(dest Destination, opts Options) *Handler {
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 16 << 20
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.GetStreams == 0 {
		opts.GetStreams = 8
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{dest: dest, opts: opts, log: log}
}

// headerValue is h.Get(key) for a key already in canonical form (the
// constants above, "Content-Type"): a map lookup without canonicalising
// the key again on every request, as net/http stores them canonical.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := audit.FromContext(r.Context())
	if h.opts.View {
		rec.View = h.opts.Name
	} else {
		rec.Destination = h.opts.Name
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, rec)
	case http.MethodGet:
		h.get(w, r, rec)
	case http.MethodDelete:
		h.delete(w, r, rec)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "method %s not allowed", r.Method))
	}
}

// accepts reports which answer forms the client takes. preferSSE is set
// when the client lists text/event-stream before application/json: its
// answers are then streams even when the response comes first.
func accepts(r *http.Request) (jsonOK, sseOK, preferSSE bool) {
	a := r.Header["Accept"] // canonical key: no canonicalisation per request
	if len(a) == 0 {
		return true, true, false
	}
	first := ""
	for _, v := range a {
		for more := true; more; {
			var part string
			part, v, more = strings.Cut(v, ",")
			mt := mediaRange(part)
			switch mt {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			default:
				continue
			}
			if first == "" {
				first = mt
			}
		}
	}
	return jsonOK, sseOK, sseOK && first == "text/event-stream"
}

// mediaRange returns the lower-case type/subtype of a media range, without
// parameters. It is cheaper than mime.ParseMediaType, which builds a map of
// parameters this package never reads, on every request.
func mediaRange(v string) string {
	v, _, _ = strings.Cut(v, ";")
	v = strings.TrimSpace(v)
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(v)
		}
	}
	return v
}

// errSessionNotFound answers a session id this endpoint does not hold.
var errSessionNotFound = jsonrpc.Errorf(jsonrpc.InvalidRequest, "session not found (it ended or expired); initialize a new one")

// lookupSession validates the Mcp-Session-Id header and finds the session.
// It writes the error answer and returns nil when there is none.
func (h *Handler) lookupSession(w http.ResponseWriter, r *http.Request, id string) *session.Session {
	if h.opts.Cluster != nil {
		return h.clusterSession(w, r, id)
	}
	if !session.ValidID(id) {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "malformed Mcp-Session-Id"))
		return nil
	}
	s := h.opts.Sessions.Get(id)
	if s == nil || s.Dest != h.opts.Name || s.Backend() == nil {
		writeError(w, http.StatusNotFound, nil, errSessionNotFound)
		return nil
	}
	return s
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request, rec *audit.Record) {
	if mediaRange(headerValue(r.Header, "Content-Type")) != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "Content-Type must be application/json"))
		return
	}
	jsonOK, sseOK, preferSSE := accepts(r)
	if !jsonOK && !sseOK {
		writeError(w, http.StatusNotAcceptable, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "Accept must include application/json or text/event-stream"))
		return
	}
	body, err := reqbody.Read(w, r, h.opts.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "request body exceeds %d bytes", h.opts.MaxBody))
		case errors.Is(err, reqbody.ErrStalled):
			writeError(w, http.StatusRequestTimeout, nil, jsonrpc.Errorf(jsonrpc.ParseError, "reading request body: %v", err))
		default:
			writeError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.ParseError, "reading request body: %v", err))
		}
		return
	}
	rec.RequestBody = body
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, mcp.RPCError(err)) // a *jsonrpc.Error, or ErrBatch
		return
	}
	rec.MCPMethod, rec.RPCID = msg.Method, msg.ID
	if msg.Method == "tools/call" {
		rec.Tool, _ = msg.ParamName()
	}
	jsonOK = jsonOK && !preferSSE // from here: "may the answer be plain JSON"

	hv := headerValue(r.Header, mcp.HeaderProtocolVersion)
	_, hasMeta := msg.MetaString(mcp.MetaProtocolVersion)
	if hasMeta || hv >= mcp.ModernVersion {
		// 2026-07-28: stateless; Mcp-Session-Id is ignored altogether.
		releaseBody(rec, body, h.stateless(w, r, rec, msg, jsonOK, sseOK))
		return
	}
	if hv != "" && msg.Method != "initialize" && !mcp.Known(hv) {
		writeError(w, http.StatusBadRequest, msg.ID, &jsonrpc.Error{Code: jsonrpc.UnsupportedProtocolVersion,
			Message: "unsupported MCP-Protocol-Version " + strconv.Quote(hv),
			Data:    jsonrpc.Marshal(map[string]any{"supported": append(mcp.LegacyVersions(), mcp.ModernVersion), "requested": hv})})
		return
	}
	sid := headerValue(r.Header, mcp.HeaderSessionID)
	switch {
	case sid == "" && msg.Method == "initialize" && msg.IsRequest():
		h.initialize(w, r, rec, msg, jsonOK)
		return
	case sid == "":
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.InvalidRequest,
			"missing Mcp-Session-Id header: send initialize first (or a 2026-07-28 request with _meta)"))
		return
	}
	s := h.lookupSession(w, r, sid)
	if s == nil {
		return
	}
	rec.Session = s.LogName()
	s.Hold()
	defer s.Release()
	b := s.Backend()
	switch {
	case msg.IsRequest():
		if msg.Method == "initialize" {
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.InvalidRequest, "session is already initialized"))
			return
		}
		if h.opts.Cluster != nil {
			h.opts.Cluster.Note(r.Context(), s.Name, msg)
		}
		call, err := b.Call(r.Context(), msg)
		if err != nil {
			h.fail(w, msg, err)
			return
		}
		releaseBody(rec, body, h.answer(w, r, rec, call, jsonOK, sseOK, false))
	default:
		send := b.Respond
		if msg.IsNotification() {
			send = b.Notify
		}
		if err := send(r.Context(), msg); err != nil {
			h.fail(w, msg, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, rec *audit.Record, msg *jsonrpc.Message, jsonOK bool) {
	var s *session.Session
	var err error
	if c := h.opts.Cluster; c != nil {
		var token, name string
		if token, name, err = c.Mint(r.Context(), r.URL.Path, msg); err == nil {
			s, err = h.opts.Sessions.NewWithID(h.opts.Name, token, name)
		}
	} else {
		s, err = h.opts.Sessions.New(h.opts.Name)
	}
	if err != nil {
		h.fail(w, msg, err)
		return
	}
	rec.Session = s.LogName()
	backend, res, err := h.dest.Open(r.Context(), s, msg)
	if err != nil {
		s.End(err)
		h.fail(w, msg, err)
		return
	}
	s.SetBackend(backend)
	w.Header().Set(mcp.HeaderSessionID, s.ID)
	h.writeFinal(w, rec, res, jsonOK, false)
}

// stateless serves a 2026-07-28 request; answered as answer reports it.
func (h *Handler) stateless(w http.ResponseWriter, r *http.Request, rec *audit.Record, msg *jsonrpc.Message, jsonOK, sseOK bool) (answered bool) {
	if !msg.IsRequest() {
		// No client notification is defined over HTTP in this era
		// (cancellation is closing the stream): accept and drop.
		w.WriteHeader(http.StatusAccepted)
		return false
	}
	if e := checkHeaders(r, msg); e != nil {
		writeError(w, http.StatusBadRequest, msg.ID, e)
		return false
	}
	if e := h.checkParamHeaders(r, msg); e != nil {
		writeError(w, http.StatusBadRequest, msg.ID, e)
		return false
	}
	call, err := h.dest.Stateless(r.Context(), msg)
	if err != nil {
		h.fail(w, msg, err)
		return false
	}
	return h.answer(w, r, rec, call, jsonOK, sseOK, true)
}

// checkHeaders validates the 2026-07-28 request-metadata headers against the
// body; nil when they agree.
func checkHeaders(r *http.Request, msg *jsonrpc.Message) *jsonrpc.Error {
	hv := headerValue(r.Header, mcp.HeaderProtocolVersion)
	if hv == "" {
		return jsonrpc.Errorf(jsonrpc.HeaderMismatch, "MCP-Protocol-Version header is required for requests carrying _meta %q", mcp.MetaProtocolVersion)
	}
	metaVersion, ok := msg.MetaString(mcp.MetaProtocolVersion)
	if !ok || metaVersion == "" {
		return jsonrpc.Errorf(jsonrpc.InvalidParams, "missing or invalid _meta field %q", mcp.MetaProtocolVersion)
	}
	if hv != metaVersion {
		return jsonrpc.Errorf(jsonrpc.HeaderMismatch, "MCP-Protocol-Version header %q does not match _meta protocolVersion %q", hv, metaVersion)
	}
	if v := headerValue(r.Header, mcp.HeaderMethod); v != msg.Method {
		return jsonrpc.Errorf(jsonrpc.HeaderMismatch, "Mcp-Method header %q does not match method %q", v, msg.Method)
	}
	var key string
	switch msg.Method {
	case "tools/call", "prompts/get":
		key = "name"
	case "resources/read":
		key = "uri"
	default:
		return nil
	}
	want, _ := jsonrpc.StringMember(msg.Params, key)
	got, ok := mcpheader.DecodeHeaderValue(headerValue(r.Header, mcp.HeaderName))
	if !ok || got != want || headerValue(r.Header, mcp.HeaderName) == "" {
		return jsonrpc.Errorf(jsonrpc.HeaderMismatch, "Mcp-Name header does not match params.%s", key)
	}
	return nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, rec *audit.Record) {
	sid := headerValue(r.Header, mcp.HeaderSessionID)
	if sid == "" {
		if v := headerValue(r.Header, mcp.HeaderProtocolVersion); v != "" && !mcp.IsLegacy(v) {
			// A modern client: this era has no GET stream.
			w.Header().Set("Allow", "POST")
			writeError(w, http.StatusMethodNotAllowed, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "GET is not supported in protocol %s", v))
			return
		}
		writeError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "missing Mcp-Session-Id header"))
		return
	}
	if _, sseOK, _ := accepts(r); !sseOK {
		writeError(w, http.StatusNotAcceptable, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "Accept must include text/event-stream"))
		return
	}
	s := h.lookupSession(w, r, sid)
	if s == nil {
		return
	}
	rec.Session = s.LogName()
	if !s.OpenStream(h.opts.GetStreams) {
		writeError(w, http.StatusConflict, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest,
			"this session has %d GET streams open already, its bound; close one first", h.opts.GetStreams))
		return
	}
	defer s.CloseStream()
	release := s.Stream() // busy while open; closed, the orphan rule applies
	defer release()
	ev := startSSE(w, http.StatusOK, true) // the stream may stay quiet
	rec.Status = http.StatusOK
	ctx := r.Context()
	if h.opts.Drain != nil {
		// A draining replica ends its listen streams (Options.Drain).
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() { // ends with the stream, or ends it
			select {
			case <-h.opts.Drain:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	if h.opts.Events != nil {
		h.listenLogged(ctx, ev, s, headerValue(r.Header, "Last-Event-Id"))
		return
	}
	if m := ev.Messages(ctx, s.Listen(), h.opts.KeepAlive, s.Ended(), h.opts.Done, nil); m != nil {
		s.Deliver(m) // the stream broke: keep the message for another
	}
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, rec *audit.Record) {
	sid := headerValue(r.Header, mcp.HeaderSessionID)
	if sid == "" {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "missing Mcp-Session-Id header"))
		return
	}
	s := h.lookupSession(w, r, sid)
	if s == nil {
		return
	}
	rec.Session = s.LogName()
	s.End(nil)
	if h.opts.Cluster != nil {
		h.opts.Cluster.Ended(r.Context(), s.Name)
	}
	if h.opts.Events != nil {
		if err := h.opts.Events.SessionClosed(r.Context(), s.LogName()); err != nil {
			h.log.Warn("the session's listen events not dropped (they expire)", "session", s.LogName(), "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
