package era

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// parked is an upstream call waiting for the client's answer to a
// server→client request, which the client got as input_required.
type parked struct {
	method, name string // what the state is bound to: the retry must match
	caller       string // and who: the authenticated caller's name, "" without auth
	b            session.Backend
	inner        session.Call
	reqs         []pendingRequest   // the server's requests the client is asked
	held         []*jsonrpc.Message // related notifications that came while it was gathered

	token string      // guarded by states.mu
	timer *time.Timer // guarded by states.mu
}

// states holds the parked calls by requestState token: at most max, each
// for at most ttl, after which its upstream call is cancelled.
type states struct {
	max  int
	ttl  time.Duration
	mint StateMinter // nil: random tokens

	mu     sync.Mutex
	m      map[string]*parked
	closed bool
}

func newStates(max int, ttl time.Duration) *states {
	return &states{max: max, ttl: ttl, m: map[string]*parked{}}
}

// pendingRequest is one server→client request of a parked call.
type pendingRequest struct {
	key string           // its key in inputRequests / inputResponses
	req *jsonrpc.Message // with the id the member gave it
}

// add appends a server request under a key named for its method
// (elicitation, sampling, roots; elicitation_2, … for more of a kind).
func (p *parked) add(m *jsonrpc.Message) {
	base := inputKey(m.Method)
	key := base
	for n := 2; slices.ContainsFunc(p.reqs, func(r pendingRequest) bool { return r.key == key }); n++ {
		key = fmt.Sprintf("%s_%d", base, n)
	}
	p.reqs = append(p.reqs, pendingRequest{key: key, req: m})
}

// tokenPrefix starts every requestState Switchboard mints; any other is the
// server's own and passes through.
const tokenPrefix = "sb1."

func isToken(s string) bool { return len(s) > len(tokenPrefix) && strings.HasPrefix(s, tokenPrefix) }

var errTooMany = errors.New("too many requests are waiting for input")

// park stores p under a new token and returns it.
func (s *states) park(p *parked) (string, error) {
	var token string
	if s.mint != nil {
		var err error
		if token, err = s.mint.MintState(p.method, p.name, p.caller, s.ttl); err != nil {
			return "", err
		}
		if !isToken(token) {
			return "", errors.New("requestState minted without its prefix")
		}
	} else {
		var b [18]byte
		_, _ = rand.Read(b[:])
		token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("shutting down")
	}
	if _, dup := s.m[token]; dup {
		return "", errors.New("requestState minted twice")
	}
	if len(s.m) >= s.max {
		return "", fmt.Errorf("%w (%d)", errTooMany, s.max)
	}
	p.token = token
	s.m[token] = p
	p.timer = time.AfterFunc(s.ttl, func() { s.expire(token, p) })
	setParked(p.inner, true)
	setParked(p.b, true)
	return token, nil
}

// take removes and returns the call parked under token, when the retry is
// for the same method and name, by the same caller; else nil and why (a
// token shown by another caller stays for its own).
func (s *states) take(token, method, name, caller string) (*parked, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[token]
	switch {
	case p == nil:
		return nil, "unknown, expired or already used"
	case p.caller != caller:
		return nil, "issued to another caller"
	case p.method != method || p.name != name:
		return nil, fmt.Sprintf("issued for %s %q, not %s %q", p.method, p.name, method, name)
	}
	delete(s.m, token)
	p.timer.Stop()
	setParked(p.b, false) // its member serves the retry now
	return p, ""
}

// expire drops p if it is still parked under token.
func (s *states) expire(token string, p *parked) {
	s.mu.Lock()
	live := s.m[token] == p
	if live {
		delete(s.m, token)
	}
	s.mu.Unlock()
	if live {
		s.drop(p)
	}
}

// drop cancels p's upstream call and ends its member.
func (s *states) drop(p *parked) {
	setParked(p.inner, false)
	p.inner.Abandon(true)
	setParked(p.b, false)
	p.b.Leave()
}

// dropWhere drops the parked calls match picks and returns how many.
func (s *states) dropWhere(match func(*parked) bool) int {
	s.mu.Lock()
	var out []*parked
	for token, p := range s.m {
		if match(p) {
			delete(s.m, token)
			p.timer.Stop()
			out = append(out, p)
		}
	}
	s.mu.Unlock()
	for _, p := range out {
		s.drop(p)
	}
	return len(out)
}

func (s *states) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *states) close() {
	s.mu.Lock()
	s.closed = true // no more parks
	s.mu.Unlock()
	s.dropWhere(func(*parked) bool { return true })
}

// parker is an upstream call or a lent member that can be marked as
// waiting for a client. A parked call (*upstream.Call) does not count as
// the call in flight that a server→client request belongs to; a parked
// member (Joiner.Lend's) may be ended to make room for other clients.
type parker interface{ SetParked(bool) }

func setParked(x any, on bool) {
	if p, ok := x.(parker); ok {
		p.SetParked(on)
	}
}
