package session

import "github.com/switchboard-mcp/switchboard/internal/jsonrpc"

// Answer is a Call whose messages are all known when it is made: an answer
// made without an upstream (an error, a merged list, a meta-tool's result,
// a policy refusal), the response last. Poll hands them out in order and
// then reports the call ended.
type Answer struct{ q jsonrpc.Queue }

// NewAnswer returns a Call holding msgs (none: a call that has ended).
func NewAnswer(msgs ...*jsonrpc.Message) *Answer {
	c := &Answer{}
	c.q.Init(len(msgs) + 1)
	for i, m := range msgs {
		if i == len(msgs)-1 {
			c.q.PushLast(m)
		} else {
			c.q.Push(m, true)
		}
	}
	if len(msgs) == 0 {
		c.q.Close()
	}
	return c
}

func (c *Answer) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *Answer) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *Answer) Abandon(bool)                   {}
func (c *Answer) LongLived() bool                { return false }
