package sse

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// ---- MessageReader ----

func TestMessageReader(t *testing.T) {
	big := strings.Repeat("x", 100)
	stream := "retry: 250\n\n" +
		"id: 1\ndata: {\"a\":1}\n\n" +
		"id: 2\r\ndata: {\"id\":7,\"big\":\"" + big + "\"}\r\n\r\n" +
		": comment\n" +
		"event: note\ndata: {\"b\":2}\n\n" +
		"id: 3\nevent: close\nretry: 40\n\n"
	for name, src := range map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"bytewise": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
	} {
		t.Run(name, func(t *testing.T) {
			var prefixes []string
			mr := NewMessageReader(src(stream), 64, func(p []byte) { prefixes = append(prefixes, string(p)) })
			var got []string
			for {
				ev, err := mr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				got = append(got, ev.Name+" "+ev.ID+" "+string(ev.Data))
			}
			want := []string{`message 1 {"a":1}`, `note 2 {"b":2}`}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("events %q, want %q", got, want)
			}
			if len(prefixes) != 1 || !strings.HasPrefix(prefixes[0], `{"id":7,"big":"xxx`) {
				t.Errorf("oversize prefixes %q", prefixes)
			}
			if id, ok := jsonrpc.PeekID([]byte(prefixes[0])); !ok || string(id) != "7" {
				t.Errorf("PeekID(prefix) = %s, %v", id, ok)
			}
			if mr.LastEventID() != "3" {
				t.Errorf("LastEventID = %q", mr.LastEventID())
			}
			if mr.Retry() != 40*time.Millisecond {
				t.Errorf("Retry = %v", mr.Retry())
			}
		})
	}
}

func TestMessageReaderOversizeAtEnd(t *testing.T) {
	mr := NewMessageReader(strings.NewReader("data: "+strings.Repeat("y", 100)), 10, nil)
	if _, err := mr.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("Next = %v, want io.ErrUnexpectedEOF", err)
	}
}
