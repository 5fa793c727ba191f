package upstream

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/bigbuf"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// dispatch routes one message from connection gen. It runs on the
// connection's reader goroutine and never blocks on a client. line is
// valid only during the call: the message is decoded in place and
// detached (copied once, in its wire form) only where it is kept.
func (u *Upstream) dispatch(gen int, line []byte) {
	// The stall watchdog sees how long the reader holds the message.
	now := time.Now().UnixNano()
	u.lastHeard.Store(now)
	u.dispatching.Store(now)
	defer u.dispatching.Store(0)
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		u.log.Warn("invalid message from server skipped", "err", err, "line", audit.Clip(line, 256))
		return
	}
	switch {
	case msg.IsResponse():
		u.response(msg)
	case msg.IsRequest():
		msg.Detach()
		u.serverRequest(gen, msg)
	default:
		msg.Detach()
		u.notification(msg)
	}
}

func (u *Upstream) response(msg *jsonrpc.Message) {
	id, ok := jsonrpc.ParseIntID(msg.ID)
	u.mu.Lock()
	c := u.pending[id]
	var gaveUp time.Time
	var held *heldAnswer
	if ok && c != nil {
		held = u.probed(c, time.Now())
		u.unpend(c)
	} else if ok {
		gaveUp = u.gaveUp[id]
		delete(u.gaveUp, id)
	}
	u.mu.Unlock()
	if !ok || c == nil {
		if !gaveUp.IsZero() {
			u.log.Info("late response dropped: its call was given up (timed out or cancelled)", "id", id,
				"after", time.Since(gaveUp).Round(time.Millisecond))
			return
		}
		u.log.Debug("response to an unknown or finished request dropped", "id", string(msg.ID))
		return
	}
	if held != nil {
		// Counted once the answer is on its way: telling the stage
		// reads the server's CPU wait (see heldStall).
		defer u.heldStall(held, id, c.method)
	}
	if !c.sent.IsZero() {
		c.took = time.Since(c.sent)
	}
	if c.detached.Load() {
		c.q.Close()
		return
	}
	if !c.internal {
		msg.ID = c.clientID
	}
	if msg.Error != nil && !c.elicitURL && !c.internal { // the handshake's: see loginError
		msg = urlElicitationFallback(msg)
	} else if msg.Error != nil && c.elicitURL && bytes.Contains(msg.Error, []byte("-32042")) {
		if e := msg.ErrorOf(); e != nil && e.Code == mcp.CodeURLElicitationRequired {
			who := elicitee{m: c.member, d: c.elicitDown}
			if c.member != nil {
				who.d = c.member.d
			}
			u.noteElicited(who, e)
		}
	}
	// The client's answer, in its wire form: written as it is. A large
	// one is put in a pooled buffer, which the front gives back once the
	// answer is written (jsonrpc.Message.Release).
	if len(msg.Result)+len(msg.Error) >= bigbuf.Min {
		msg.DetachWith(bigbuf.Get)
	} else {
		msg.Detach()
	}
	c.answered.Store(time.Now().UnixNano())
	c.q.PushLast(msg)
}

// urlElicitationFallback rewrites an error response that asks for a URL
// elicitation (-32042: an OAuth destination's login, or the server's own)
// for a client that did not declare it can take one (or a 2026-07-28
// request): mcp.URLElicitationFallback. Other messages are returned as
// they are.
func urlElicitationFallback(msg *jsonrpc.Message) *jsonrpc.Message {
	if !bytes.Contains(msg.Error, []byte("-32042")) {
		return msg
	}
	var e jsonrpc.Error
	if json.Unmarshal(msg.Error, &e) != nil || e.Code != mcp.CodeURLElicitationRequired {
		return msg
	}
	return jsonrpc.NewError(msg.ID, mcp.URLElicitationFallback(&e))
}

// oversize fails the call whose response was too large, when its id can be
// read from the first bytes.
func (u *Upstream) oversize(gen int, prefix []byte) {
	rawID, ok := jsonrpc.PeekID(prefix)
	if !ok {
		u.log.Warn("oversized message from server skipped; its id could not be read")
		return
	}
	if HasMethod(prefix) {
		// A server→client request: its id is the server's, not ours.
		u.log.Warn("oversized request from server skipped", "id", string(rawID))
		return
	}
	id, ok := jsonrpc.ParseIntID(rawID)
	u.mu.Lock()
	c := u.pending[id]
	if ok && c != nil {
		u.unpend(c)
	}
	u.mu.Unlock()
	if c != nil {
		c.fail(jsonrpc.Errorf(mcp.CodeUpstreamTooLarge, "upstream %s: response exceeds the message size limit", u.opts.Name))
	}
}

// HasMethod reports whether the (possibly truncated) message prefix has a
// top-level "method" member before the cut, making it a request or a
// notification rather than a response.
func HasMethod(prefix []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		if k, ok := key.(string); !ok {
			return false
		} else if k == "method" {
			return true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
}

// owner finds where a message without a routing key belongs: the one call
// in flight (the newest of them if they all belong to one member), or the
// only member when nothing is in flight; m is nil when that call is a
// stateless request. When it cannot be told, c and m are nil and why says
// which case failed (noOwner or severalOwners). mu held.
func (u *Upstream) owner() (m *Member, c *Call, why ownerProblem) {
	var newest *Call
	for _, p := range u.pending {
		if p.internal || p.parked.Load() || p.subscription {
			// A subscription stream never carries progress, log
			// messages or requests (2026-07-28); a parked call's server
			// waits for its client.
			continue
		}
		if newest != nil && (p.member == nil || p.member != newest.member) {
			return nil, nil, severalOwners
		}
		if newest == nil || p.id > newest.id {
			newest = p
		}
	}
	if newest != nil {
		return newest.member, newest, ownerFound // member nil: a stateless request
	}
	if len(u.members) == 1 {
		for m := range u.members {
			if _, bound := m.d.(CallBound); !bound {
				return m, nil, ownerFound
			}
		}
	}
	return nil, nil, noOwner
}

// CallBound is implemented by a Downstream that takes server→client
// requests only on the stream of the call that raised them: it has no
// stream of its own to answer them on (package era's members, each lent to
// one 2026-07-28 request at a time, and its subscriptions/listen streams).
// With none of its calls in flight a server→client request is refused at
// once, as for no member at all, rather than delivered where nobody
// answers it.
type CallBound interface{ CallBound() }

// ownerProblem is why owner could not attribute a message.
type ownerProblem int

const (
	ownerFound     ownerProblem = iota
	noOwner                     // nothing in flight, and not exactly one member
	severalOwners               // calls of different members in flight
	statelessOwner              // set by serverRequest: the owning call is a stateless request
)

// refusal is the error a server→client request method gets when owner
// failed with why.
func (why ownerProblem) refusal(method string) *jsonrpc.Error {
	switch why {
	case noOwner:
		return jsonrpc.Errorf(mcp.CodeRequestRefused,
			"switchboard: no session has a call in flight to receive this request; "+
				"a shared server can send %s only while handling a client's call "+
				"(or configure this destination with isolation: session)", method)
	case statelessOwner:
		return jsonrpc.Errorf(mcp.CodeRequestRefused,
			"switchboard: the call in flight is a stateless request, which cannot receive %s", method)
	}
	return jsonrpc.Errorf(mcp.CodeRequestRefused,
		"switchboard: cannot tell which client session %s belongs to (several sessions have calls in flight); "+
			"configure this destination with isolation: session", method)
}

func (u *Upstream) serverRequest(gen int, msg *jsonrpc.Message) {
	if msg.Method == "ping" {
		u.reply(jsonrpc.NewResult(msg.ID, nil))
		return
	}
	u.mu.Lock()
	m, c, why := u.owner()
	if why == ownerFound && m == nil {
		why = statelessOwner // a stateless request cannot take server→client requests
	}
	var refuse *jsonrpc.Error
	if why != ownerFound {
		refuse = why.refusal(msg.Method)
	} else if need := CapabilityFor(msg.Method); need != "" && !m.caps[need] {
		refuse = jsonrpc.Errorf(jsonrpc.MethodNotFound, "the client did not declare the %s capability", need)
	}
	var down int64
	if refuse == nil {
		u.nextRev++
		down = u.nextRev
		u.reverse[down] = &serverRequest{upID: msg.ID, member: m, gen: gen}
	}
	u.mu.Unlock()
	if refuse != nil {
		u.log.Warn("server→client request refused", "method", msg.Method, "reason", refuse.Message)
		u.reply(jsonrpc.NewError(msg.ID, refuse))
		return
	}
	out := *msg
	out.ID = jsonrpc.IntID(down)
	if c != nil {
		c.deliver(&out)
	} else {
		m.d.Deliver(&out)
	}
}

// capabilityFor maps each server→client request method to the client
// capability it needs.
var capabilityFor = map[string]string{
	"sampling/createMessage": "sampling",
	"elicitation/create":     "elicitation",
	"roots/list":             "roots",
}

// CapabilityFor is the client capability a server→client request method
// needs ("sampling", "elicitation", "roots"), or "" for any other method.
func CapabilityFor(method string) string { return capabilityFor[method] }

// reply answers the server directly (ping, refusals).
func (u *Upstream) reply(m *jsonrpc.Message) {
	if err := u.write(m); err != nil {
		u.log.Debug("reply to server failed", "err", err)
	}
}

func (u *Upstream) notification(msg *jsonrpc.Message) {
	// 2026-07-28 subscription streams tag their notifications (resources/
	// updated included: it belongs to the stream, not to legacy members).
	// Progress and log messages never travel on them.
	if msg.Method != "notifications/progress" && msg.Method != "notifications/message" {
		if sid, s, e, ok := jsonrpc.Lookup(msg.Params, "_meta", mcp.MetaSubscriptionID); ok {
			id, _ := jsonrpc.ParseIntID(sid)
			u.mu.Lock()
			c := u.pending[id]
			u.mu.Unlock()
			if c != nil {
				out := &jsonrpc.Message{Method: msg.Method, Params: jsonrpc.Splice(msg.Params, s, e, c.clientID)}
				c.deliver(out)
			}
			return
		}
	}
	switch msg.Method {
	case "notifications/progress":
		u.progress(msg)
		return
	case "notifications/message":
		u.logMessage(msg)
		return
	case "notifications/resources/updated":
		uri, _ := jsonrpc.StringMember(msg.Params, "uri")
		u.deliverWhere(msg, func(m *Member) bool { return m.subs[uri] })
		return
	case "notifications/cancelled":
		// The server cancels a request it sent to a client.
		rid, s, e, ok := jsonrpc.Lookup(msg.Params, "requestId")
		if !ok {
			return
		}
		u.mu.Lock()
		var target *serverRequest
		var down int64
		for d, sr := range u.reverse {
			if bytes.Equal(sr.upID, rid) {
				target, down = sr, d
				break
			}
		}
		if target != nil {
			delete(u.reverse, down)
		}
		u.mu.Unlock()
		if target != nil {
			out := &jsonrpc.Message{Method: msg.Method, Params: jsonrpc.Splice(msg.Params, s, e, jsonrpc.IntID(down))}
			target.member.d.Deliver(out)
		}
		return
	}
	// list_changed and anything else: every member.
	u.deliverWhere(msg, func(*Member) bool { return true })
}

// deliverWhere delivers msg to the listen stream of every member that keep
// admits; keep runs with mu held.
func (u *Upstream) deliverWhere(msg *jsonrpc.Message, keep func(*Member) bool) {
	u.mu.Lock()
	var to []*Member
	for m := range u.members {
		if keep(m) {
			to = append(to, m)
		}
	}
	u.mu.Unlock()
	for _, m := range to {
		m.d.Deliver(msg)
	}
}

func (u *Upstream) progress(msg *jsonrpc.Message) {
	tok, s, e, ok := jsonrpc.Lookup(msg.Params, "progressToken")
	if !ok {
		return
	}
	id, _ := jsonrpc.ParseIntID(tok)
	u.mu.Lock()
	c := u.pending[id]
	u.mu.Unlock()
	if c == nil || c.token == nil {
		u.log.Debug("progress for an unknown or finished request dropped", "token", string(tok))
		return
	}
	c.deliver(&jsonrpc.Message{Method: msg.Method, Params: jsonrpc.Splice(msg.Params, s, e, c.token)})
}

// logMessage delivers notifications/message to the call that caused it when
// that can be told (one owner), else to every member whose level admits it.
func (u *Upstream) logMessage(msg *jsonrpc.Message) {
	level, _ := jsonrpc.StringMember(msg.Params, "level")
	li := levelIndex(level)
	u.mu.Lock()
	m, c, why := u.owner()
	// A message that belongs to one call goes to its session if its level
	// admits it, and to no other session ever.
	admit := why == ownerFound && c != nil && (m == nil || m.level <= li)
	u.mu.Unlock()
	switch {
	case why != ownerFound || c == nil:
		u.deliverWhere(msg, func(m *Member) bool { return m.level <= li })
	case admit:
		c.deliver(msg)
	}
}
