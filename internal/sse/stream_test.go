package sse

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// failAfter fails every write after its first n.
type failAfter struct {
	n   int
	buf bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("broken pipe")
	}
	f.n--
	return f.buf.Write(p)
}

func TestWriterMessages(t *testing.T) {
	note := func(s string) *jsonrpc.Message { return jsonrpc.NewNotification("n/"+s, nil) }

	t.Run("until the queue is drained", func(t *testing.T) {
		var q jsonrpc.Queue
		q.Init(4)
		q.Push(note("a"), true)
		q.Push(note("b"), true)
		q.Close()
		var out bytes.Buffer
		if m := NewWriter(&out).Messages(t.Context(), &q, 0, nil, nil, nil); m != nil {
			t.Errorf("unsent %v", m)
		}
		if got := out.String(); strings.Count(got, "event: message\n") != 2 || !strings.Contains(got, "n/b") {
			t.Errorf("stream %q", got)
		}
	})
	t.Run("a failed write returns its message", func(t *testing.T) {
		var q jsonrpc.Queue
		q.Init(4)
		q.Push(note("a"), true)
		q.Push(note("b"), true)
		w := &failAfter{n: 1}
		if m := NewWriter(w).Messages(t.Context(), &q, 0, nil, nil, nil); m == nil || m.Method != "n/b" {
			t.Errorf("unsent %v, want n/b", m)
		}
	})
	t.Run("keep-alives until ended", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var q jsonrpc.Queue
			q.Init(4)
			ended := make(chan struct{})
			var out bytes.Buffer
			go func() { time.Sleep(35 * time.Second); close(ended) }() // synctest's clock
			NewWriter(&out).Messages(context.Background(), &q, 10*time.Second, ended, nil, nil)
			if got := strings.Count(out.String(), ": keep-alive\n"); got != 3 {
				t.Errorf("%d keep-alives in 35 s at 10 s, want 3: %q", got, out.String())
			}
		})
	})
}
