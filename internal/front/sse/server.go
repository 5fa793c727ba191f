// Package sse is the legacy HTTP+SSE front (protocol 2024-11-05): GET
// /{d}/sse opens a session and its event stream, whose first event names
// the URL the client POSTs its messages to; every answer travels on that
// one stream. Events are written with the codec of package internal/sse.
package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/reqbody"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// Destination is what the legacy front serves (the gateway implements it;
// the same method as streamable.Destination's).
type Destination interface {
	Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
}

// ServerOptions configure a Server. Zero values are documented per field.
type ServerOptions struct {
	Name string // destination name
	// View marks Name as an aggregated endpoint's: requests are recorded
	// with audit View = Name and the Destination left to the backend (the
	// member a call is routed to). False records Destination = Name.
	View        bool
	Sessions    *session.Table // required; shared with the Streamable HTTP front
	MessagePath string         // path announced in the endpoint event, e.g. "/github/message"
	// Timeout bounds the wait for each response; progress restarts it.
	// Zero means 30 s.
	Timeout time.Duration
	// MaxBody is the largest POST body accepted (413). Zero means 16 MiB.
	MaxBody int64
	// KeepAlive is the interval of keep-alive comments. Zero means 15 s;
	// negative disables them.
	KeepAlive time.Duration
	Done      <-chan struct{} // closed at shutdown: streams end
	Logger    *slog.Logger    // nil discards
}

// Server serves the legacy HTTP+SSE transport (protocol 2024-11-05): a GET
// opens the event stream and a session, whose first event names the URL
// for POSTs; every answer travels on that one stream.
type Server struct {
	dest Destination
	opts ServerOptions
	log  *slog.Logger
}

// NewServer returns a legacy SSE front for dest.
func NewServer(dest Destination, opts ServerOptions) *Server {
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 16 << 20
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{dest: dest, opts: opts, log: opts.Logger}
}

// note records the endpoint in the request's audit record.
func (s *Server) note(rec *audit.Record) {
	if s.opts.View {
		rec.View = s.opts.Name
	} else {
		rec.Destination = s.opts.Name
	}
}

// ServeStream handles GET /{d}/sse.
func (s *Server) ServeStream(w http.ResponseWriter, r *http.Request) {
	rec := audit.FromContext(r.Context())
	s.note(rec)
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		httpError(w, http.StatusMethodNotAllowed, "use GET to open the event stream")
		return
	}
	sess, err := s.opts.Sessions.New(s.opts.Name)
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	rec.Session = sess.ID
	defer sess.End(errors.New("event stream closed"))
	release := sess.Acquire()
	defer release()

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache, no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ev := sse.NewWriter(w)
	endpoint := s.opts.MessagePath + "?session_id=" + url.QueryEscape(sess.ID)
	if err := ev.Event("endpoint", "", []byte(endpoint)); err != nil {
		return
	}
	ev.Messages(r.Context(), sess.Listen(), s.opts.KeepAlive, sess.Ended(), s.opts.Done, nil) // the session ends with its stream
}

// ServeMessage handles POST /{d}/message?session_id=…
func (s *Server) ServeMessage(w http.ResponseWriter, r *http.Request) {
	rec := audit.FromContext(r.Context())
	s.note(rec)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		httpError(w, http.StatusMethodNotAllowed, "use POST to send a message")
		return
	}
	id := r.URL.Query().Get("session_id")
	if id == "" {
		id = r.URL.Query().Get("sessionId")
	}
	if !session.ValidID(id) {
		httpError(w, http.StatusBadRequest, "missing or malformed session_id")
		return
	}
	sess := s.opts.Sessions.Get(id)
	if sess == nil || sess.Dest != s.opts.Name {
		httpError(w, http.StatusNotFound, "session not found; open a new event stream")
		return
	}
	rec.Session = sess.ID
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	body, err := reqbody.Read(w, r, s.opts.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.opts.MaxBody))
		case errors.Is(err, reqbody.ErrStalled):
			httpError(w, http.StatusRequestTimeout, "reading request body: "+err.Error())
		default:
			httpError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		}
		return
	}
	rec.RequestBody = body
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	rec.MCPMethod, rec.RPCID = msg.Method, msg.ID
	if msg.Method == "tools/call" {
		rec.Tool, _ = msg.ParamName()
	}
	b := sess.Backend()
	if b == nil {
		if msg.Method != "initialize" || !msg.IsRequest() {
			// Answer on the stream, as the transport expects: a client
			// probing with server/discover falls back to initialize on it.
			if msg.IsRequest() {
				code := jsonrpc.InvalidRequest
				if msg.Method == "server/discover" {
					code = jsonrpc.MethodNotFound
				}
				sess.Deliver(jsonrpc.NewError(msg.ID, jsonrpc.Errorf(code, "%s: session not initialized; send initialize first", msg.Method)))
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		backend, res, err := s.dest.Open(r.Context(), sess, msg)
		if err != nil {
			s.log.Warn("initialize failed", "destination", s.opts.Name, "err", err)
			sess.Deliver(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
			w.WriteHeader(http.StatusAccepted)
			return
		}
		sess.SetBackend(backend)
		sess.Deliver(res)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch {
	case msg.IsRequest():
		call, err := b.Call(r.Context(), msg)
		if err != nil {
			sess.Deliver(jsonrpc.NewError(msg.ID, mcp.RPCError(err)))
		} else {
			go s.pump(sess, msg.ID, call)
		}
	case msg.IsNotification():
		err = b.Notify(r.Context(), msg)
	default:
		err = b.Respond(r.Context(), msg)
	}
	if err != nil && !msg.IsRequest() {
		s.log.Debug("message not forwarded", "err", err)
	}
	w.WriteHeader(http.StatusAccepted)
}

// pump moves a call's messages onto the session's stream, in order, with
// the response timeout. It ends with the call, the session or shutdown.
func (s *Server) pump(sess *session.Session, id []byte, call session.Call) {
	release := sess.Acquire()
	defer release()
	if session.Forward(call, s.opts.Timeout, sess.Ended(), s.opts.Done, sess.Deliver) {
		sess.Deliver(jsonrpc.NewError(id, jsonrpc.Errorf(mcp.CodeUpstreamTimeout, "no response from %s within %s", s.opts.Name, s.opts.Timeout)))
	}
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}
