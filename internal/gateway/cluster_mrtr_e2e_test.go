package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// modernPost sends a 2026-07-28 tools/call body to url and returns the
// final message of its answer (JSON or SSE).
func modernPost(ctx context.Context, t *testing.T, url, tool string, body []byte) wireMsg {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	hdr := modernHdr(tool)
	for i := 0; i < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r := sse.NewReader(resp.Body, 0)
		for {
			ev, err := r.Next()
			if err != nil {
				t.Fatalf("POST %s: the answer stream ended: %v", url, err)
			}
			if bytes.Contains(ev.Data, []byte(`"result"`)) || bytes.Contains(ev.Data, []byte(`"error"`)) {
				data = ev.Data
				break
			}
		}
	} else {
		data, _ = io.ReadAll(resp.Body)
	}
	var m wireMsg
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("POST %s: status %d, %s: %v", url, resp.StatusCode, data, err)
	}
	return m
}

// TestClusterRequestStateOtherReplica: a 2026-07-28 client calls a tool
// of a legacy stdio server at one replica, which parks the call and
// answers input_required with a sealed requestState naming it; the
// client's retry, sent to another replica, is forwarded to the first and
// completes the call with the client's answer. Once the first replica is
// killed, a retry of a call it parked gets the error of an expired
// requestState (-32602) at the other, and the requestState shows no
// field in clear.
func TestClusterRequestStateOtherReplica(t *testing.T) {
	c := startCluster(t, rigOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := c.replicas[0], c.replicas[1]
	caps := `{"sampling":{}}`
	ask := func(id int, text string) string {
		t.Helper()
		return inputRequired(t, modernPost(ctx, t, a.base()+"/shared/mcp", "ask", modernReq(id, "ask", `{"text":"`+text+`"}`, caps, "", "")), text)
	}

	token := ask(1, "first")
	if !strings.HasPrefix(token, "sb1.") || strings.Contains(token, "ask") || strings.Contains(token, a.id) {
		t.Errorf("requestState %q: want sb1. and a sealed token, no field in clear", token)
	}
	m := modernPost(ctx, t, b.base()+"/shared/mcp", "ask", modernReq(2, "ask", `{"text":"first"}`, caps, "", samplingAnswer(token, "the answer")))
	if m.Error != nil || !bytes.Contains(m.Result, []byte(`the answer`)) {
		t.Fatalf("the retry at another replica: %s, want the call completed with the answer", describe(m))
	}
	// Used: a second retry (at either replica) is refused.
	m = modernPost(ctx, t, b.base()+"/shared/mcp", "ask", modernReq(3, "ask", `{"text":"first"}`, caps, "", samplingAnswer(token, "again")))
	if m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("a used requestState: %s, want -32602", describe(m))
	}

	token = ask(4, "second")
	a.p.Kill()
	<-a.p.Done()
	m = modernPost(ctx, t, b.base()+"/shared/mcp", "ask", modernReq(5, "ask", `{"text":"second"}`, caps, "", samplingAnswer(token, "too late")))
	if m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("a retry of a call parked on a dead replica: %s, want -32602 (an expired requestState)", describe(m))
	}
}
