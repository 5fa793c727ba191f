package main

// Issue 25's pinning on /ui: the status page shows an admin what changed
// (the diff `switchboard pin` prints) and approves it by a same-origin
// POST, which records the pin as `switchboard pin --approve` does; the
// gateway reloads and the sessions list again.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/statusui"
)

const (
	adminToken  = "admin-token-8c2f4e"
	viewerToken = "viewer-token-1d7a90"
)

func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(h[:])
}

// uiStatus reads /ui/status.json as the client of tok.
func uiStatus(ctx context.Context, t *testing.T, base, tok string) statusui.Status {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ui/status.json", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status.json: %d %s", resp.StatusCode, b)
	}
	var st statusui.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// postApprove POSTs an approval as the client of tok with headers hdr
// and returns the status and body.
func postApprove(ctx context.Context, t *testing.T, base, tok string, body any, hdr map[string]string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ui/pins/approve", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// openListen opens a 2026-07-28 subscriptions/listen stream on url for
// tool list changes, as the client of tok, and returns a reader of its
// events' data.
func openListen(ctx context.Context, t *testing.T, url, tok string) func() string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("subscriptions/listen: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	return func() string {
		t.Helper()
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
				return strings.TrimSpace(d)
			}
		}
		t.Fatalf("the listen stream ended: %v", sc.Err())
		return ""
	}
}

// TestPinUIApprove: in block mode after a rug pull, /ui/status.json
// shows the changed and new tools with the diff `switchboard pin` prints;
// a status-only client may read but not approve, a cross-site POST and
// one naming a digest the page did not show are refused; the admin's
// same-origin approval writes the pin file, is audited, and the session
// is told tools/list_changed and lists and calls the approved tool while
// the others stay hidden; a 2026-07-28 client's subscriptions/listen
// stream is told too.
func TestPinUIApprove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startPinServer(t)
	path := pinConfig(t, srv.url, "block")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, fmt.Sprintf(`ui: {enabled: true}
clients:
  admin: {tokens: [%q], destinations: ["*"], namespaces: ["*"], admin: true}
  viewer: {tokens: [%q], status: true}
`, tokenHash(adminToken), tokenHash(viewerToken))...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	runPin(t, "--config", path, "--approve")
	srv.rugPull()
	base, sink := startPinGateway(t, path)

	s := &surface{name: "/pinned/mcp", changed: make(chan struct{}, 1)}
	cs, err := newClient(s.changed).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/pinned/mcp",
		HTTPClient: &http.Client{Transport: bearer(adminToken)}}, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.cs = cs
	s.waitTools(ctx, t, []string{"stable"})

	st := uiStatus(ctx, t, base, viewerToken)
	if st.Admin {
		t.Error("a status-only client is shown as admin")
	}
	if len(st.Pins) != 1 || st.Pins[0].Destination != "pinned" || st.Pins[0].Mode != "block" || !st.Pins[0].Listed {
		t.Fatalf("pins: %+v", st.Pins)
	}
	tools := map[string]statusui.PinTool{}
	for _, pt := range st.Pins[0].Tools {
		tools[pt.Name] = pt
	}
	for name, status := range map[string]string{"echo": "changed", "add": "changed", "extra": "new", "renamed": "new", "rename_me": "removed"} {
		if tools[name].Status != status {
			t.Errorf("%s: status %q, want %q (%+v)", name, tools[name].Status, status, st.Pins[0].Tools)
		}
	}
	if _, ok := tools["stable"]; ok {
		t.Error("an approved tool is listed as pending")
	}
	// The diff is the one `switchboard pin` prints.
	out := runPin(t, "--config", path)
	for _, name := range []string{"echo", "add"} {
		d := tools[name].Diff
		if !strings.Contains(d, "@@") {
			t.Errorf("%s: no diff: %q", name, d)
		}
		for _, l := range strings.Split(strings.TrimSpace(d), "\n") {
			if !strings.Contains(out, "           "+l+"\n") {
				t.Errorf("%s: the page's diff line %q is not in switchboard pin's output:\n%s", name, l, out)
			}
		}
	}
	if !strings.Contains(tools["echo"].Diff, "+Echo the text. <IMPORTANT>") {
		t.Errorf("echo's diff: %q", tools["echo"].Diff)
	}

	echo := map[string]string{"destination": "pinned", "tool": "echo", "digest": tools["echo"].Digest}
	same := map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}
	if code, msg := postApprove(ctx, t, base, viewerToken, echo, same); code != http.StatusForbidden || !strings.Contains(msg, "admin: true") {
		t.Errorf("a status-only client's approval: %d %s", code, msg)
	}
	if code, msg := postApprove(ctx, t, base, adminToken, echo, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("a cross-site approval: %d %s", code, msg)
	}
	stale := map[string]string{"destination": "pinned", "tool": "echo", "digest": tools["add"].Digest}
	if code, msg := postApprove(ctx, t, base, adminToken, stale, same); code != http.StatusConflict {
		t.Errorf("an approval of a digest not listed: %d %s", code, msg)
	}
	if st := uiStatus(ctx, t, base, adminToken); !st.Admin {
		t.Error("the admin is not shown as admin")
	}
	events := openListen(ctx, t, base+"/pinned/mcp", adminToken)
	if ack := events(); !strings.Contains(ack, `"notifications/subscriptions/acknowledged"`) || !strings.Contains(ack, `"toolsListChanged":true`) {
		t.Errorf("the listen stream's acknowledgement: %s", ack)
	}
	if code, msg := postApprove(ctx, t, base, adminToken, echo, same); code != http.StatusNoContent {
		t.Fatalf("the admin's approval: %d %s", code, msg)
	}

	pf, err := guard.LoadPins(guard.PinPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if got := pf.Destinations["pinned"].Tools["echo"].Digest; got != tools["echo"].Digest {
		t.Errorf("the pin file has echo at %s, want %s", got, tools["echo"].Digest)
	}
	if ev := events(); !strings.Contains(ev, `"method":"notifications/tools/list_changed"`) || !strings.Contains(ev, `"io.modelcontextprotocol/subscriptionId":"listen-1"`) {
		t.Errorf("the listen stream after the approval: %s", ev)
	}
	s.waitTools(ctx, t, []string{"echo", "stable"}) // list_changed, then the list
	if ok, text := s.call(ctx, t, "echo"); !ok {
		t.Errorf("echo after approval: %s", text)
	}
	if ok, _ := s.call(ctx, t, "extra"); ok {
		t.Error("extra ran unapproved")
	}
	var approved, refused int
	for _, l := range sink.all() {
		if strings.Contains(l, `"guard":"pin approved (ui)"`) && strings.Contains(l, `"client":"admin"`) && strings.Contains(l, `"tool":"echo"`) {
			approved++
		}
		if strings.Contains(l, `"guard":"pin approval refused (ui)"`) {
			refused++
		}
	}
	if approved != 1 || refused != 1 { // the 409; 403s are refused before anything is read
		t.Errorf("audit: %d approvals, %d refusals, want 1 and 1", approved, refused)
	}
	if st := uiStatus(ctx, t, base, viewerToken); len(st.Pins) == 1 {
		for _, pt := range st.Pins[0].Tools {
			if pt.Name == "echo" {
				t.Errorf("echo still pending after approval: %+v", pt)
			}
		}
	}
}
