package upstream

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// lockedBuffer is a log destination safe for the reader goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLateResponseLogged: a response to a call given up (timed out or
// cancelled) is logged at Info with how late it came, so a slow server
// can be told from a silent one; a response to an id never issued stays
// a debug line.
func TestLateResponseLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		h := newHarness(t, Options{Shared: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		a, _ := h.join("")
		c := h.call(a, `1`, "tools/call", "")
		internal := h.lastSent("tools/call").ID
		c.Abandon(true)
		time.Sleep(1500 * time.Millisecond) // synctest's clock: the response comes 1.5 s late
		conn := h.srv.conn(t)
		conn.send(jsonrpc.NewResult(internal, nil))
		conn.send(jsonrpc.NewResult(jsonrpc.IntID(999999), nil))
		synctest.Wait()
		out := logged.String()
		if !strings.Contains(out, "late response dropped") || !strings.Contains(out, "after=1.5s") ||
			!strings.Contains(out, "id="+string(internal)) {
			t.Fatalf("log %q, want the late response with its delay", out)
		}
		if strings.Count(out, "late response dropped") != 1 {
			t.Fatalf("log %q: the unknown id was logged as late", out)
		}
	})
}
