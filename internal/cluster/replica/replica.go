// Package replica is this replica's part in a cluster (docs/cluster.md):
// it mints and opens the sealed session ids, forwards a
// request whose session another live replica owns to that replica over a
// signed hop, verifies the hops it receives, and adopts the sessions of
// dead replicas (the handshake to replay and, with Redis, the log level
// and subscriptions to restore).
//
// The gateway builds one Replica when the config has a cluster block and
// hands it to the edge (Hop, Forward) and to the Streamable HTTP fronts
// (Mint, Adopt, Note, Ended); without it they get nil and keep their
// single-replica paths.
package replica

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/cluster/hopauth"
	"github.com/switchboard-mcp/switchboard/internal/cluster/sessionstore"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/sealed"
)

// Options configure a Replica. Required unless told.
type Options struct {
	// Self is this replica: its id (in session ids and the membership)
	// and the address the others forward to.
	Self cluster.Replica
	// Secrets are the sealing secrets (the first seals, all open); the
	// hop keys derive from them too.
	Secrets [][]byte
	// Members lists the live replicas.
	Members cluster.Members
	// Store holds the session records; nil (no Redis): adoption replays
	// the handshake only.
	Store *sessionstore.Store
	// MaxAge is how long a session id opens after it was minted; zero
	// means 24 h.
	MaxAge time.Duration
	// MaxBody bounds a forwarded body (the front's own bound applies at
	// the owner); zero means 16 MiB.
	MaxBody int64
	// Drain, when closed, ends the listen (GET) streams this replica
	// forwards (it is draining; their clients reconnect elsewhere). Nil:
	// never.
	Drain <-chan struct{}
	// Logger receives the cluster's warnings; nil discards. Tokens and
	// their fields are never logged, only the 16-character session id.
	Logger *slog.Logger
}

// Replica is this replica's part in the cluster; safe for concurrent use.
type Replica struct {
	opts   Options
	sealer *sealed.Sealer
	hop    *hopauth.Keys
	client *http.Client
	log    *slog.Logger

	// touched is when each session's record was last written or
	// touched (id → time.Time), so that a busy session touches its
	// record at most every quarter of its TTL.
	touched sync.Map

	// mu guards members and membersAt: the membership last read and
	// when (zero: never), reused for memberTTL so that a forwarded
	// request does not read it from Redis each time.
	mu        sync.Mutex
	members   []cluster.Replica
	membersAt time.Time
}

// memberTTL is how long a membership read is reused for routing. A
// replica that died since is found unreachable by the hop (and its
// session adopted, as without the cache); an owner missing from the
// reused list is looked up afresh before its session is taken for
// orphaned, so a replica that just joined is never robbed of a session.
const memberTTL = time.Second

// bufPool holds the buffers copyFlushing streams a hop's answer through
// (*[]byte, 32 KiB), so that a forwarded call allocates none.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// New returns the Replica of opts.
func New(opts Options) (*Replica, error) {
	if opts.Self.ID == "" || strings.ContainsAny(opts.Self.ID, "{}") {
		return nil, fmt.Errorf("cluster: bad replica id %q", opts.Self.ID)
	}
	s, err := sealed.New(opts.Secrets)
	if err != nil {
		return nil, fmt.Errorf("cluster.keys: %w", err)
	}
	h, err := hopauth.New(opts.Secrets)
	if err != nil {
		return nil, fmt.Errorf("cluster.keys: %w", err)
	}
	opts.MaxAge = cmp.Or(opts.MaxAge, 24*time.Hour)
	opts.MaxBody = cmp.Or(opts.MaxBody, 16<<20)
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	tr := &http.Transport{
		Proxy:               nil, // a hop goes straight to the owner
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // the bytes pass through as the owner wrote them
	}
	return &Replica{opts: opts, sealer: s, hop: h, client: &http.Client{Transport: tr}, log: log}, nil
}

// ID returns this replica's id.
func (r *Replica) ID() string { return r.opts.Self.ID }

// Close closes the idle hop connections.
func (r *Replica) Close() { r.client.CloseIdleConnections() }

// binding is what a session id is sealed for: the endpoint's path and
// the caller (its authentication method and its name, stable across
// token refreshes); no caller without authentication.
func binding(path string, id *auth.Identity) sealed.Binding {
	b := sealed.Binding{Destination: path}
	if id != nil {
		b.Issuer, b.Subject = id.Method, id.Name()
	}
	return b
}

// initParams is what an initialize request carries that a session id
// keeps.
type initParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	ClientInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
}

// Mint seals the id of a new session at path for the caller of ctx from
// its initialize request: the token (the Mcp-Session-Id) and the session's
// name, which logs show. With Redis, the session's record names this
// replica its owner.
func (r *Replica) Mint(ctx context.Context, path string, init *jsonrpc.Message) (token, name string, err error) {
	var p initParams
	if len(init.Params) > 0 {
		if err := json.Unmarshal(init.Params, &p); err != nil {
			return "", "", &jsonrpc.Error{Code: jsonrpc.InvalidParams, Message: "initialize params: " + err.Error()}
		}
	}
	var caps []byte
	if len(p.Capabilities) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, p.Capabilities) == nil {
			caps = b.Bytes()
		}
	}
	tok, sess, err := r.sealer.SealSession(binding(path, auth.FromContext(ctx)), sealed.Session{
		Owner: r.opts.Self.ID, Protocol: p.ProtocolVersion, ClientName: p.ClientInfo.Name, ClientVersion: p.ClientInfo.Version,
		Capabilities: caps, Expires: time.Now().Add(r.opts.MaxAge)})
	if err != nil {
		return "", "", err
	}
	if st := r.opts.Store; st != nil {
		if err := st.Put(ctx, sess.ID, sessionstore.Record{Owner: r.opts.Self.ID}); err != nil {
			r.log.Warn("cluster: session record not written; the session cannot be adopted with its state", "session", sess.ID, "err", err)
		} else {
			r.touched.Store(sess.ID, time.Now())
		}
	}
	return tok, sess.ID, nil
}

// ErrMoved is Adopt's error when another replica adopted the session
// first: the client retries (503), and its next request is forwarded
// there.
var ErrMoved = mcp.Sentinel("the session moved to another replica; retry", http.StatusServiceUnavailable, mcp.CodeUpstreamUnavailable)

// Adoption is what a replica needs to serve a session it did not open.
type Adoption struct {
	Name string // the session's 16-character id, for logs
	// Init is the client's initialize request, rebuilt from the id, to
	// replay to this replica's upstream; Initialized is its
	// notifications/initialized.
	Init, Initialized *jsonrpc.Message
	// Restore are the requests that bring the upstream back to the
	// session's state: logging/setLevel, then resources/subscribe per
	// subscription (with Redis; none without).
	Restore []*jsonrpc.Message
}

// Adopt opens token for the caller of ctx at path and makes this replica
// the session's owner. A token that does not open (malformed, altered,
// sealed with a key no longer configured, for another caller or path,
// expired) is sealed.ErrInvalid: the front answers 404 as for an unknown
// session. ErrMoved when another live replica adopted it first.
func (r *Replica) Adopt(ctx context.Context, path, token string) (Adoption, error) {
	sess, err := r.sealer.OpenSession(binding(path, auth.FromContext(ctx)), token)
	if err != nil {
		return Adoption{}, err
	}
	a := Adoption{Name: sess.ID}
	params := map[string]any{"protocolVersion": sess.Protocol,
		"clientInfo":   map[string]string{"name": sess.ClientName, "version": sess.ClientVersion},
		"capabilities": json.RawMessage(cmp.Or(string(sess.Capabilities), "{}"))}
	a.Init = jsonrpc.NewRequest(json.RawMessage(`"switchboard-adopt"`), "initialize", jsonrpc.Marshal(params))
	a.Initialized = jsonrpc.NewNotification("notifications/initialized", nil)
	st := r.opts.Store
	if st == nil {
		return a, nil
	}
	rec, found, err := st.Get(ctx, sess.ID)
	if err != nil {
		r.log.Warn("cluster: session record unreadable; adopting the session without its state", "session", sess.ID, "err", err)
		return a, nil
	}
	dead := sess.Owner
	if found && rec.Owner != "" {
		dead = rec.Owner
	}
	if err := st.Claim(ctx, sess.ID, dead, r.opts.Self.ID); err != nil {
		if errors.Is(err, sessionstore.ErrOwned) {
			return Adoption{}, fmt.Errorf("%w (%v)", ErrMoved, err)
		}
		r.log.Warn("cluster: session not claimed; adopting it anyway", "session", sess.ID, "err", err)
	}
	r.touched.Store(sess.ID, time.Now())
	if rec.LogLevel != "" {
		a.Restore = append(a.Restore, jsonrpc.NewRequest(json.RawMessage(`"switchboard-restore-level"`), "logging/setLevel",
			jsonrpc.Marshal(map[string]string{"level": rec.LogLevel})))
	}
	for i, uri := range rec.Subscriptions {
		a.Restore = append(a.Restore, jsonrpc.NewRequest(json.RawMessage(fmt.Sprintf(`"switchboard-restore-sub-%d"`, i)), "resources/subscribe",
			jsonrpc.Marshal(map[string]string{"uri": uri})))
	}
	r.log.Info("cluster: adopted a session of a replica gone", "session", sess.ID, "from", dead,
		"restored", len(a.Restore))
	return a, nil
}

// Note records in the session's record a request that changes its state:
// logging/setLevel, resources/subscribe and resources/unsubscribe; any
// other request only touches the record, at most every quarter of its
// TTL. Without Redis it does nothing.
func (r *Replica) Note(ctx context.Context, name string, req *jsonrpc.Message) {
	st := r.opts.Store
	if st == nil || name == "" {
		return
	}
	var key string
	switch req.Method {
	case "logging/setLevel":
		key = "level"
	case "resources/subscribe", "resources/unsubscribe":
		key = "uri"
	default:
		if t, ok := r.touched.Load(name); ok && time.Since(t.(time.Time)) < st.TTL()/4 {
			return
		}
		r.touched.Store(name, time.Now())
		if _, err := st.Touch(ctx, name); err != nil {
			r.log.Warn("cluster: session record not touched", "session", name, "err", err)
		}
		return
	}
	v, _ := jsonrpc.StringMember(req.Params, key)
	rec, _, err := st.Get(ctx, name)
	if err != nil {
		r.log.Warn("cluster: session record unreadable; its state is not recorded", "session", name, "err", err)
		return
	}
	rec.Owner = r.opts.Self.ID
	switch req.Method {
	case "logging/setLevel":
		rec.LogLevel = v
	case "resources/subscribe":
		if !slices.Contains(rec.Subscriptions, v) {
			rec.Subscriptions = append(rec.Subscriptions, v)
		}
	case "resources/unsubscribe":
		rec.Subscriptions = slices.DeleteFunc(rec.Subscriptions, func(s string) bool { return s == v })
	}
	if err := st.Put(ctx, name, rec); err != nil {
		r.log.Warn("cluster: session state not recorded", "session", name, "err", err)
		return
	}
	r.touched.Store(name, time.Now())
}

// Ended drops the record of a session that ended (DELETE).
func (r *Replica) Ended(ctx context.Context, name string) {
	r.touched.Delete(name)
	if st := r.opts.Store; st != nil && name != "" {
		if err := st.Delete(ctx, name); err != nil {
			r.log.Warn("cluster: session record not deleted", "session", name, "err", err)
		}
	}
}

// statePrefix starts every requestState the gateway mints (package
// era's prefix); MintState's tokens are it and a sealed token.
const statePrefix = "sb1."

// stateBinding is what a requestState is sealed for: the caller. (The
// parked call at the owner checks the method and name again.)
func stateBinding(caller string) sealed.Binding {
	return sealed.Binding{Destination: "requestState", Subject: caller}
}

// MintState seals the requestState of a call parked on this replica
// (era.StateMinter): the owner inside, so that a retry reaching another
// replica is forwarded here (Forward); a random handle makes each unique.
func (r *Replica) MintState(method, name, caller string, ttl time.Duration) (string, error) {
	tok, err := r.sealer.SealRequestState(stateBinding(caller), sealed.RequestState{
		Owner: r.opts.Self.ID, Handle: sealed.NewID(), Method: method, Name: name, Expires: time.Now().Add(ttl)})
	if err != nil {
		return "", err
	}
	return statePrefix + tok, nil
}

// stateOwner returns the live replica holding the call a 2026-07-28
// retry resumes (its params.requestState), when that is another one; ok
// false otherwise (no or a foreign requestState, this replica's, or its
// owner gone: the retry is served here and gets the error of an expired
// state).
func (r *Replica) stateOwner(ctx context.Context, body []byte, id *auth.Identity) (to cluster.Replica, ok bool) {
	if !bytes.Contains(body, []byte(`"requestState"`)) {
		return cluster.Replica{}, false
	}
	var msg struct {
		Params struct {
			RequestState string `json:"requestState"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || !strings.HasPrefix(msg.Params.RequestState, statePrefix) {
		return cluster.Replica{}, false
	}
	st, err := r.sealer.OpenRequestState(stateBinding(id.Name()), msg.Params.RequestState[len(statePrefix):])
	if err != nil || st.Owner == r.opts.Self.ID {
		return cluster.Replica{}, false
	}
	members, err := r.opts.Members.Members(ctx)
	if err != nil {
		return cluster.Replica{}, false
	}
	return findMember(members, st.Owner, "")
}

// Hop reports whether req was forwarded by another replica, verifying
// its signature (and reading a POST's body for it, which req keeps). A
// request with a hop header that does not verify is an error: the edge
// refuses it (403), as it would otherwise be served here whoever owns its
// session.
func (r *Replica) Hop(req *http.Request) (bool, error) {
	if len(req.Header[hopauth.Header]) == 0 {
		return false, nil
	}
	body, err := r.readBody(req)
	if err != nil {
		return false, err
	}
	if err := r.hop.Verify(req, body); err != nil {
		return false, err
	}
	return true, nil
}

// readBody reads req's body whole (at most MaxBody) and puts it back.
func (r *Replica) readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, r.opts.MaxBody+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > r.opts.MaxBody {
		return nil, fmt.Errorf("request body exceeds %d bytes", r.opts.MaxBody)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// route decides who serves the session of token at path for id's
// caller: ok is false when this replica does (it owns the session, or
// its owner is gone and this replica claimed it: the front adopts it),
// or when the token does not open (the front answers 404); else to is
// the live replica to forward to. tried is a replica found unreachable
// (taken for dead).
func (r *Replica) route(ctx context.Context, path, token string, id *auth.Identity, tried string) (to cluster.Replica, ok bool) {
	sess, err := r.sealer.OpenSession(binding(path, id), token)
	if err != nil {
		return cluster.Replica{}, false
	}
	owner := sess.Owner
	st := r.opts.Store
	if st != nil {
		if rec, found, err := st.Get(ctx, sess.ID); err == nil && found && rec.Owner != "" {
			owner = rec.Owner
		}
	}
	if owner == r.opts.Self.ID {
		return cluster.Replica{}, false
	}
	// An owner not in the membership reused is looked for in a fresh read
	// before it is taken for gone.
	var members []cluster.Replica
	for _, fresh := range []bool{false, true} {
		if members, err = r.membership(ctx, fresh); err != nil {
			r.log.Warn("cluster: membership unreadable; serving the session here", "session", sess.ID, "err", err)
			return cluster.Replica{}, false
		}
		if m, ok := findMember(members, owner, tried); ok {
			return m, true
		}
	}
	if st == nil {
		return cluster.Replica{}, false
	}
	// The owner is gone: of the replicas that see it so at once, one
	// claims the session; the others forward to it.
	err = st.Claim(ctx, sess.ID, owner, r.opts.Self.ID)
	if !errors.Is(err, sessionstore.ErrOwned) {
		return cluster.Replica{}, false // claimed (or Redis failed: adopt anyway)
	}
	if rec, found, gerr := st.Get(ctx, sess.ID); gerr == nil && found {
		return findMember(members, rec.Owner, tried)
	}
	return cluster.Replica{}, false
}

// findMember returns the replica of members whose id is id, unless id is
// skip.
func findMember(members []cluster.Replica, id, skip string) (cluster.Replica, bool) {
	i := slices.IndexFunc(members, func(m cluster.Replica) bool { return m.ID == id && id != skip })
	if i < 0 {
		return cluster.Replica{}, false
	}
	return members[i], true
}

// membership returns the live replicas: the list read less than
// memberTTL ago, or (fresh, or none read recently) a new read.
func (r *Replica) membership(ctx context.Context, fresh bool) ([]cluster.Replica, error) {
	r.mu.Lock()
	m, at := r.members, r.membersAt
	r.mu.Unlock()
	if !fresh && !at.IsZero() && time.Since(at) < memberTTL {
		return m, nil
	}
	m, err := r.opts.Members.Members(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.members, r.membersAt = m, time.Now()
	r.mu.Unlock()
	return m, nil
}

// hopHeaders are not passed on a hop (RFC 9110 §7.6.1), nor the hop
// signature a client might send.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", hopauth.Header}

// Forward serves req at the replica that owns its session (Mcp-Session-Id)
// when that is another live replica, and reports whether it did; it must
// be called after authentication, with the caller's credentials still on
// req (the owner authenticates the caller again). The response streams
// back as the owner writes it (SSE included). When the owner cannot be
// reached (connection refused: it died), the session is claimed (Redis)
// and Forward returns false with req intact: this replica adopts it; or,
// when another replica claimed it first, the request goes there.
// A hop that breaks after it was sent fails the request with 502: only the
// calls in flight on a dying owner fail.
func (r *Replica) Forward(w http.ResponseWriter, req *http.Request, id *auth.Identity) bool {
	token := req.Header.Get(mcp.HeaderSessionID)
	if token == "" {
		return r.forwardRetry(w, req, id)
	}
	to, ok := r.route(req.Context(), req.URL.Path, token, id, "")
	if !ok {
		return false
	}
	body, err := r.readBody(req)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return true
	}
	for attempt := 0; ; attempt++ {
		done, unreachable := r.forwardTo(w, req, to, body)
		if done {
			return true
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if !unreachable || attempt > 0 {
			return false
		}
		// The owner died: claim the session, or forward to the
		// replica that claimed it first.
		if to, ok = r.route(req.Context(), req.URL.Path, token, id, to.ID); !ok {
			return false
		}
	}
}

// forwardRetry serves a 2026-07-28 POST whose requestState another live
// replica minted at that replica, where its call is parked; false (req
// intact) for any other request.
func (r *Replica) forwardRetry(w http.ResponseWriter, req *http.Request, id *auth.Identity) bool {
	if req.Method != http.MethodPost || req.Header.Get(mcp.HeaderProtocolVersion) < mcp.ModernVersion {
		return false
	}
	body, err := r.readBody(req)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return true
	}
	to, ok := r.stateOwner(req.Context(), body, id)
	if !ok {
		return false
	}
	done, _ := r.forwardTo(w, req, to, body)
	if !done { // the owner died: its parked call with it
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return done
}

// forwardTo sends req (with body) to replica to and streams its answer
// back: done. Not done when to could not be reached (unreachable).
func (r *Replica) forwardTo(w http.ResponseWriter, req *http.Request, to cluster.Replica, body []byte) (done, unreachable bool) {
	out, err := http.NewRequestWithContext(req.Context(), req.Method, "http://"+to.Addr+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadGateway, "cluster: bad owner address")
		return true, false
	}
	if body == nil {
		out.Body = http.NoBody
	}
	out.Header = req.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Host = req.Host
	r.hop.Sign(out, body)
	resp, err := r.client.Do(out)
	if err != nil {
		if isUnreachable(err) && req.Context().Err() == nil {
			r.log.Info("cluster: the session's owner is unreachable", "owner", to.ID, "err", err)
			return false, true
		}
		writeError(w, http.StatusBadGateway, "cluster: the replica serving this session failed during the request; retry")
		return true, false
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if !slices.Contains(hopHeaders, k) {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	if req.Method == http.MethodGet && r.opts.Drain != nil {
		copied := make(chan struct{})
		defer close(copied)
		go func() { // ends with the copy, or ends it on drain
			select {
			case <-r.opts.Drain:
				resp.Body.Close()
			case <-copied:
			}
		}()
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		copyFlushing(w, resp.Body)
		return true, false
	}
	// A whole answer (JSON, an error): headers and body leave in one
	// write when it is small, as the owner's own would.
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	_, _ = io.CopyBuffer(w, resp.Body, *bp)
	return true, false
}

// isUnreachable reports an error of a hop that never reached its owner:
// the connection was refused or could not be made.
func isUnreachable(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		(errors.As(err, &op) && op.Op == "dial")
}

// copyFlushing copies src to w, flushing the headers at once and then
// after each read, so that events reach the client as the owner sends
// them.
func copyFlushing(w http.ResponseWriter, src io.Reader) {
	rc := http.NewResponseController(w)
	_ = rc.Flush() // the headers: a quiet stream (a GET) must start at once
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// writeError answers a JSON-RPC error without an id.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(msg)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%s}}`+"\n", mcp.CodeUpstreamUnavailable, b)
}
