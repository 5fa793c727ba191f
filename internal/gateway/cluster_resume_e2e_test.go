package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// resumeSession is a legacy-era session driven over plain HTTP, so that the
// test holds the listen stream and chooses its Last-Event-ID.
type resumeSession struct {
	t   *testing.T
	ctx context.Context
	url string
	sid string
	id  int
}

// post sends a JSON-RPC message and returns the response's result (nil
// for a notification), read from a JSON or an SSE answer.
func (s *resumeSession) post(method string, params any) json.RawMessage {
	s.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	notify := strings.HasPrefix(method, "notifications/")
	if !notify {
		s.id++
		msg["id"] = s.id
	}
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(s.ctx, http.MethodPost, s.url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if s.sid != "" {
		req.Header.Set("Mcp-Session-Id", s.sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if s.sid == "" {
		s.sid = resp.Header.Get("Mcp-Session-Id")
	}
	if notify {
		if resp.StatusCode != http.StatusAccepted {
			s.t.Fatalf("%s: status %d", method, resp.StatusCode)
		}
		return nil
	}
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r := sse.NewReader(resp.Body, 0)
		for {
			ev, err := r.Next()
			if err != nil {
				s.t.Fatalf("%s: the answer stream ended: %v", method, err)
			}
			if bytes.Contains(ev.Data, []byte(`"result"`)) || bytes.Contains(ev.Data, []byte(`"error"`)) {
				data = ev.Data
				break
			}
		}
	} else {
		data, _ = io.ReadAll(resp.Body)
	}
	var out struct {
		Result json.RawMessage
		Error  *struct{ Message string }
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Error != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("%s: status %d, %s (%v)", method, resp.StatusCode, data, err)
	}
	return out.Result
}

// resumeListen is a GET (listen) stream of a resumeSession.
type resumeListen struct {
	resp *http.Response
	r    *sse.Reader
}

// listen opens the session's listen stream, resuming after lastID ("":
// a new stream).
func (s *resumeSession) listen(lastID string) *resumeListen {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.ctx, http.MethodGet, s.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", s.sid)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET (Last-Event-ID %q): %v, %v", lastID, resp, err)
	}
	l := &resumeListen{resp: resp, r: sse.NewReader(resp.Body, 0)}
	s.t.Cleanup(func() { resp.Body.Close() })
	return l
}

// expect reads the stream's next events, resources/updated for each of
// uris in order, and returns their ids.
func (l *resumeListen) expect(t *testing.T, when string, uris ...string) []string {
	t.Helper()
	var ids []string
	for _, want := range uris {
		ev, err := l.r.Next()
		if err != nil {
			t.Fatalf("%s: the listen stream ended before %s: %v", when, want, err)
		}
		var m struct {
			Method string
			Params struct{ URI string }
		}
		_ = json.Unmarshal(ev.Data, &m)
		if m.Method != "notifications/resources/updated" || m.Params.URI != want || ev.ID == "" {
			t.Fatalf("%s: got %s (id %q), want resources/updated of %s with an id", when, ev.Data, ev.ID, want)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// TestClusterResumeListenStream: a client holds the listen (GET) stream
// of a session through HAProxy (sticky) and gets resources/updated
// events; the session's owner is killed (SIGKILL). Events keep coming
// (the next call is adopted by another replica, which restores the
// subscriptions); the client reconnects its GET through HAProxy, to a
// replica that is not the one that gave the events, with the
// Last-Event-ID of event 2 (events 3 and 4 lost in flight): it gets 3
// and 4 (from Redis), then 5 to 7 (queued while it was away), then 8
// live: every event, in order, once.
func TestClusterResumeListenStream(t *testing.T) {
	c := startCluster(t, rigOptions{sticky: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &resumeSession{t: t, ctx: ctx, url: c.base + "/perses/mcp"}
	s.post("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "resume-e2e", "version": "1"}})
	if s.sid == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	s.post("notifications/initialized", nil)
	uri := func(k int) string { return fmt.Sprintf("test://ev/%d", k) }
	const events = 8
	for k := 1; k <= events; k++ {
		s.post("resources/subscribe", map[string]any{"uri": uri(k)})
	}
	update := func(from, to int) {
		t.Helper()
		for k := from; k <= to; k++ {
			s.post("tools/call", map[string]any{"name": "update", "arguments": map[string]any{"uri": uri(k)}})
		}
	}

	first := s.listen("")
	update(1, 4)
	ids := first.expect(t, "before the kill", uri(1), uri(2), uri(3), uri(4))
	owners := c.owners("perses")
	if len(owners) != 1 {
		t.Fatalf("%d replicas hold the session, want 1", len(owners))
	}
	owners[0].p.Kill()
	first.resp.Body.Close()

	update(5, 7) // adopted by another replica: the subscriptions restored
	second := s.listen(ids[1])
	got := second.expect(t, "resumed after event 2 on another replica", uri(3), uri(4), uri(5), uri(6), uri(7))
	update(8, 8)
	got = append(got, second.expect(t, "live after the resumption", uri(8))...)
	if got[0] != ids[2] || got[1] != ids[3] {
		t.Errorf("replayed events 3 and 4 with ids %q, first sent as %q", got[:2], ids[2:])
	}
	seen := map[string]bool{}
	for _, id := range append(ids[:2], got...) {
		if seen[id] {
			t.Errorf("event id %q given twice", id)
		}
		seen[id] = true
		if strings.Contains(id, s.sid) {
			t.Errorf("event id %q holds the session token", id)
		}
	}
	if o := c.owners("perses"); len(o) != 1 || o[0] == owners[0] {
		t.Errorf("the session is held by %d replicas after the kill, want 1 other", len(o))
	}
}
