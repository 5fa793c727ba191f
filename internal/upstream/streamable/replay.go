package streamable

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// Handshake replay after an error answer.
//
// A server can lose its handshake without losing the session: AgentCore
// restarts a runtime's container (a new stdio child behind the same
// endpoint), and the new child answers every request with -32602 ("Invalid
// request parameters") or a "not initialized" error instead of the 404 a
// Streamable HTTP server gives for a forgotten session. The connection then
// does what it does after a 404: replays the cached initialize and
// notifications/initialized (recover; its owner restores the log level and
// subscriptions on Reinitialized; recover tells the client with a
// notifications/message, logger "switchboard", level warning), and sends
// the request again, once.
//
// A healthy server's genuine -32602 (invalid params) must come back
// unchanged, so such an answer is only a suspicion: the connection then
// pings the session, and replays only if the ping is refused the same way
// (a server that lost its handshake refuses everything; one that merely
// disliked the params answers the ping). So a genuine -32602 costs one ping
// and is delivered as it came. The retried request's answer is delivered
// whatever it is, and at most maxReplays replays happen per minute per
// connection: beyond that the answers are delivered as they are, so a
// broken upstream cannot make the connection loop.
const (
	maxReplays   = 5
	replayWindow = time.Minute
	maxResends   = 3 // sends of one request after the first
)

// lostHandshake reports whether e is the kind of error a server gives a
// request it received before (or without) initialize.
func lostHandshake(e *jsonrpc.Error) bool {
	if e == nil {
		return false
	}
	if e.Code == jsonrpc.InvalidParams {
		return true
	}
	text := strings.ToLower(e.Message + " " + string(e.Data))
	return strings.Contains(text, "not initialized") || strings.Contains(text, "before initialization") ||
		strings.Contains(text, "not been initialized") || strings.Contains(text, "uninitialized")
}

// replayHandshake handles answer m to request p when it shows the server
// lost its handshake: it replays the handshake, sends p again and reports
// true (p's answer is then the retry's). It reports false, having done
// nothing visible, when m is to be delivered as it is.
func (c *ClientConn) replayHandshake(p *post, m *jsonrpc.Message) bool {
	if p.init || p.modern != "" || p.id == nil || !lostHandshake(m.ErrorOf()) {
		return false
	}
	c.mu.Lock()
	cached, moved := c.initMsg != nil, c.epoch != p.epoch
	c.mu.Unlock()
	// A request sent again is refused again: delivered as it is, unless
	// another request replayed the handshake since it was sent (it may
	// have reached the server between that initialize and its
	// initialized): then it is sent once more, up to maxResends in all.
	// Without such a replay, the ping tells a lost handshake from a
	// genuine invalid-params answer.
	if !cached || p.resent >= maxResends || p.resent > 0 && !moved {
		return false
	}
	if !moved && !c.pingRefused(p.sid) {
		// The ping was answered: a genuine refusal, unless another
		// request's replay began or ended meanwhile (the server was
		// without handshake when p reached it).
		c.mu.Lock()
		moved = c.epoch != p.epoch || c.reinit != nil
		c.mu.Unlock()
		if !moved {
			return false
		}
	}
	c.mu.Lock()
	now := time.Now()
	c.replays = slices.DeleteFunc(c.replays, func(t time.Time) bool { return now.Sub(t) >= replayWindow })
	if len(c.replays) >= maxReplays {
		c.mu.Unlock()
		c.log.Warn("upstream lost its MCP handshake again; not replaying (too many replays in a minute)", "method", p.msg.Method)
		return false
	}
	c.replays = append(c.replays, now)
	already := c.epoch != p.epoch // replayed since p was sent: just retry
	c.mu.Unlock()

	p.resent++
	if !already {
		c.log.Warn("upstream lost its MCP handshake (restarted?); replaying initialize", "method", p.msg.Method)
		if err := c.recover(p.sid); err != nil {
			if !abandoned(p) {
				c.failPost(p, fmt.Sprintf("upstream lost its MCP handshake and it could not be replayed: %v", err))
			}
			return true
		}
	}
	c.exchange(p, true)
	return true
}

// pingRefused pings session sid and reports whether the ping, too, was
// refused as by a server without handshake.
func (c *ClientConn) pingRefused(sid string) bool {
	resp, err := c.ping(sid, "switchboard-handshake-probe")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	refused := false
	_ = c.readAnswer(resp, func(_ []byte, m *jsonrpc.Message) bool {
		if m.IsResponse() && string(m.ID) == `"switchboard-handshake-probe"` {
			refused = lostHandshake(m.ErrorOf())
			return true
		}
		return false // anything else on the probe's stream is dropped
	})
	return refused
}

// notifyClient delivers a notifications/message from Switchboard itself.
func (c *ClientConn) notifyClient(text string) {
	params, _ := json.Marshal(map[string]any{"level": "warning", "logger": "switchboard", "data": text})
	c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":` + string(params) + `}`))
}
