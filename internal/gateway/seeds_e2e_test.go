package gateway_test

// End-to-end tests of compatibility with the projects Switchboard replaces
// (the seeds): mithril-proxy's destinations.yml with flat `name: url`
// destinations, and the /health probe of mithril-proxy and MCProxy.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// sseAtSSEPath serves a go-sdk feature server over legacy HTTP+SSE at /sse
// only (404 elsewhere), on 127.0.0.1, as a mithril-proxy upstream was
// served: its configured URL is the base, without /sse.
func sseAtSSEPath(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := peertest.NewFeatureServer(name).Server
	mux := http.NewServeMux()
	mux.Handle("/sse", mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// TestMithrilDestinationsFile loads mithril-proxy destinations.yml files
// whose destinations are written as `name: url` (under destinations: and
// at the top level) and calls a tool through both fronts of the flat sse
// destination.
func TestMithrilDestinationsFile(t *testing.T) {
	skipRemoteShort(t)
	up := sseAtSSEPath(t, "flat")
	for _, tt := range []struct{ name, yaml string }{
		{"under destinations", "destinations:\n  legacy: " + up.URL + "/\n"},
		{"top level", "legacy: " + up.URL + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tt.yaml), filepath.Join(t.TempDir(), "destinations.yml"))
			if err != nil {
				t.Fatalf("config:\n%s\n%v", tt.yaml, err)
			}
			if d := cfg.Destinations["legacy"]; d == nil || d.Type != config.TypeSSE || d.URL != up.URL+"/sse" {
				t.Fatalf("legacy = %+v, want type sse at %s/sse", d, up.URL)
			}
			h, _ := serveConfig(t, newTag(t), cfg, gateway.Options{}, nil)
			defer h.stop()
			for _, f := range remoteFronts {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cs := f.connect(ctx, t, h, "legacy", peertest.NewRecordingClient("mithril").Client)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": f.name}})
				if err != nil || len(res.Content) != 1 {
					t.Fatalf("%s: echo: %v %+v", f.name, err, res)
				}
				if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "flat echo: "+f.name {
					t.Errorf("%s: echo answered %+v", f.name, res.Content[0])
				}
				_ = cs.Close()
				cancel()
			}
		})
	}
}

// TestHealthShapes: /health answers 200 with mithril-proxy's
// {"status":"ok"} for a native config and MCProxy's
// {"status":"healthy","version":...} for an mcproxy.json, to GET and HEAD
// only.
func TestHealthShapes(t *testing.T) {
	for _, tt := range []struct {
		name, file, body, status string
	}{
		{"native", "switchboard.yaml", "destinations: {}\n", "ok"},
		{"mithril", "destinations.yml", "", "ok"},
		{"claude desktop", "claude_desktop_config.json", `{"mcpServers": {}}`, "ok"},
		{"mcproxy", "mcproxy.json", `{"servers": [], "namespaces": {}}`, "healthy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tt.body), filepath.Join(t.TempDir(), tt.file))
			if err != nil {
				t.Fatal(err)
			}
			h, _ := serveConfig(t, newTag(t), cfg, gateway.Options{}, nil)
			defer h.stop()

			r, err := h.client.Get(h.url("/health"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			var got map[string]any
			if r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &got) != nil {
				t.Fatalf("GET /health: %d %s %s", r.StatusCode, r.Header.Get("Content-Type"), b)
			}
			if v, _ := got["version"].(string); got["status"] != tt.status || v == "" || len(got) != 2 {
				t.Errorf("GET /health = %s, want status %q and a version", b, tt.status)
			}

			req, _ := http.NewRequest(http.MethodHead, h.url("/health"), nil)
			r, err = h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != 200 || len(b) != 0 {
				t.Errorf("HEAD /health: %d with %d body bytes, want 200 and none", r.StatusCode, len(b))
			}

			for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPut} {
				req, _ := http.NewRequest(m, h.url("/health"), nil)
				r, err := h.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				r.Body.Close()
				if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
					t.Errorf("%s /health: %d Allow %q, want 405 with Allow: GET, HEAD", m, r.StatusCode, r.Header.Get("Allow"))
				}
			}
		})
	}
}
