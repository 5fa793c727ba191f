package router

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// hangingServer is a fakeServer whose tools/list never answers; listed
// is told when one is asked.
type hangingServer struct {
	*fakeServer
	listed chan struct{}
}

func (h *hangingServer) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	b, res, err := h.fakeServer.Join(ctx, down, init)
	if err != nil {
		return nil, nil, err
	}
	return &hangingBackend{Backend: b, listed: h.listed}, res, nil
}

type hangingBackend struct {
	session.Backend
	listed chan struct{}
}

func (b *hangingBackend) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	if req.Method != "tools/list" {
		return b.Backend.Call(ctx, req)
	}
	b.listed <- struct{}{}
	return &silentCall{ready: make(chan struct{})}, nil
}

// silentCall never answers.
type silentCall struct{ ready chan struct{} }

func (c *silentCall) Poll() (*jsonrpc.Message, bool) { return nil, false }
func (c *silentCall) Ready() <-chan struct{}         { return c.ready }
func (c *silentCall) Abandon(bool)                   {}
func (c *silentCall) LongLived() bool                { return false }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRouterListingCutShortByClientIsQuiet: a client that leaves while a
// member is being listed is not the member's failure: no WARN. A member
// that fails to answer while the client waits still is one.
func TestRouterListingCutShortByClientIsQuiet(t *testing.T) {
	var logged syncBuffer
	hang := &hangingServer{fakeServer: &fakeServer{name: "slow"}, listed: make(chan struct{}, 4)}
	view := &View{Servers: []Server{&fakeServer{name: "a", tools: []string{"t"}}, hang}}
	b, _, _ := join(t, view, Options{Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})

	ctx, leave := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := b.Call(ctx, jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/list", nil))
		if err == nil {
			_, _ = drainAll(ctx, c)
		}
	}()
	<-hang.listed // the member is being listed
	leave()       // and the client goes away
	<-done
	if w := logged.String(); strings.Contains(w, "listing failed") {
		t.Errorf("a listing cut short by the client was logged as a failure:\n%s", w)
	}

	// The client waits, the member does not answer within the router's
	// timeout: that is worth a warning.
	b2, _, _ := join(t, view, Options{Timeout: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	c, err := b2.Call(context.Background(), jsonrpc.NewRequest(jsonrpc.IntID(2), "tools/list", nil))
	if err != nil {
		t.Fatal(err)
	}
	<-hang.listed
	if _, err := drainAll(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if w := logged.String(); !strings.Contains(w, "level=WARN") || !strings.Contains(w, "listing failed") || !strings.Contains(w, "server=slow") {
		t.Errorf("a member too slow for the timeout was not warned about:\n%s", w)
	}
}
