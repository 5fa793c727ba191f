package era

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// listenRequest is the params.notifications of subscriptions/listen.
type listenRequest struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

// listenCall is a 2026-07-28 subscriptions/listen served by a legacy
// member: it is the member's downstream, so the server's list_changed and
// resources/updated (for the URIs it subscribed to) arrive here and go to
// the client tagged with the subscription id.
type listenCall struct {
	id     json.RawMessage
	q      *jsonrpc.Queue
	agreed listenRequest

	mu   sync.Mutex
	b    session.Backend // nil until joined, and after Abandon
	done bool
}

func (t *ModernOverLegacy) listen(ctx context.Context, req *jsonrpc.Message) session.Call {
	var want listenRequest
	if n := jsonrpc.Member(req.Params, "notifications"); n != nil {
		if err := json.Unmarshal(n, &want); err != nil {
			return failure(req, jsonrpc.Errorf(jsonrpc.InvalidParams, "subscriptions/listen: params.notifications: %v", err))
		}
	}
	c := &listenCall{id: req.ID, q: jsonrpc.NewQueue(1024)}
	jctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	b, res, err := t.join.Join(jctx, c, initFor(req))
	if err != nil {
		return failure(req, mcp.RPCError(fmt.Errorf("%s: %w", t.opts.Name, err)))
	}
	caps := jsonrpc.Member(res.Result, "capabilities")
	offered := offeredListen(caps)
	c.agreed = listenRequest{Tools: want.Tools && offered.Tools, Prompts: want.Prompts && offered.Prompts,
		Resources: want.Resources && offered.Resources}
	if string(jsonrpc.Member(caps, "resources", "subscribe")) == "true" {
		for _, uri := range want.URIs {
			sub := jsonrpc.NewRequest(json.RawMessage(`"sub"`), "resources/subscribe", jsonrpc.Marshal(map[string]string{"uri": uri}))
			sc, err := b.Call(jctx, sub)
			if err != nil {
				continue
			}
			if r, err := session.Drain(jctx, sc, nil); err == nil && r.Error == nil {
				c.agreed.URIs = append(c.agreed.URIs, uri)
			}
		}
	}
	c.mu.Lock()
	ended := c.done
	if !ended {
		c.b = b
	}
	c.mu.Unlock()
	if ended {
		b.Leave() // the server ended while subscribing
		return failure(req, jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "%s: the server ended", t.opts.Name))
	}
	c.q.Push(jsonrpc.NewNotification("notifications/subscriptions/acknowledged", jsonrpc.Marshal(map[string]any{
		"notifications": c.agreed,
		"_meta":         map[string]json.RawMessage{mcp.MetaSubscriptionID: req.ID},
	})), true)
	return c
}

// offeredListen is what a server with capabilities caps can notify of a
// subscriptions/listen: the lists it announces listChanged for.
func offeredListen(caps json.RawMessage) listenRequest {
	on := func(list string) bool { return string(jsonrpc.Member(caps, list, "listChanged")) == "true" }
	return listenRequest{Tools: on("tools"), Prompts: on("prompts"), Resources: on("resources")}
}

// Deliver takes the member's notifications (upstream.Downstream).
func (c *listenCall) Deliver(m *jsonrpc.Message) {
	if !m.IsNotification() {
		return // a server→client request has no caller here (upstream refuses it: CallBound)
	}
	agreed := false // progress and log messages never travel on a listen stream
	switch m.Method {
	case "notifications/tools/list_changed":
		agreed = c.agreed.Tools
	case "notifications/prompts/list_changed":
		agreed = c.agreed.Prompts
	case "notifications/resources/list_changed":
		agreed = c.agreed.Resources
	case "notifications/resources/updated":
		uri, _ := jsonrpc.StringMember(m.Params, "uri")
		agreed = slices.Contains(c.agreed.URIs, uri)
	}
	if !agreed {
		return
	}
	tag := make([]byte, 0, len(mcp.MetaSubscriptionID)+len(c.id)+3)
	tag = append(tag, jsonrpc.Quote(mcp.MetaSubscriptionID)...)
	tag = append(tag, ':')
	tag = append(tag, c.id...)
	c.q.Push(&jsonrpc.Message{Method: m.Method, Params: withMeta(m.Params, tag)}, false)
}

// CallBound: the stream takes no server→client request (upstream refuses
// one raised while no call of the member is in flight).
func (c *listenCall) CallBound() {}

// End: the server is gone for good; the stream ends.
func (c *listenCall) End(error) { c.Abandon(true) }

func (c *listenCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *listenCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *listenCall) LongLived() bool                { return true }

// Abandon ends the subscription: the member leaves, which unsubscribes.
func (c *listenCall) Abandon(bool) {
	c.mu.Lock()
	b := c.b
	c.b = nil
	done := c.done
	c.done = true
	c.mu.Unlock()
	if done {
		return
	}
	c.q.Close()
	if b != nil {
		b.Leave()
	}
}
