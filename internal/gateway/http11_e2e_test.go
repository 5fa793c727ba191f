package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// TestHTTP1Front: a client's session on one kept-alive HTTP/1.1
// connection, written and read as raw bytes. In between the connection
// asks for /healthz: the session's later calls on it go on as before.
func TestHTTP1Front(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`listen: 127.0.0.1:0
destinations:
  d:
    type: stdio
    command: [%q]
    env: {%s: plain, %s: %s, GORACE: atexit_sleep_ms=0}
`, exe, envServerMode, envServerTag, newTag(t))), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	sid := ""
	do := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req := method + " " + path + " HTTP/1.1\r\nHost: " + ln.Addr().String() +
			"\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
		if sid != "" {
			req += "Mcp-Session-Id: " + sid + "\r\nMcp-Protocol-Version: 2025-11-25\r\n"
		}
		req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	resp, body := do("POST", "/d/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if sid = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != 200 || sid == "" || !strings.Contains(body, `"serverInfo"`) {
		t.Fatalf("initialize: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do("POST", "/d/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	call := func(id int) {
		t.Helper()
		resp, body := do("POST", "/d/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a&b %d"}}}`, id, id))
		var m struct {
			ID     int `json:"id"`
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &m) != nil || m.ID != id ||
			len(m.Result.Content) != 1 || m.Result.Content[0].Text != fmt.Sprintf("a&b %d", id) {
			t.Fatalf("call %d: %d %q", id, resp.StatusCode, body)
		}
	}
	call(2)
	call(3)
	if resp, body := do("GET", "/healthz", ""); resp.StatusCode != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	call(4)
	if resp, _ := do("DELETE", "/d/mcp", ""); resp.StatusCode != 200 && resp.StatusCode != 204 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
}
