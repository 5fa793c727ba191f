package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Sealing secrets of the cluster tests (at least 32 bytes each).
const (
	clusterKeyOld = "old-cluster-key-0123456789abcdef-0123"
	clusterKeyNew = "new-cluster-key-fedcba9876543210-4567"
)

// clusterTop is the global YAML of a replica: two clients and a cluster
// block without Redis (its peers: none, so every other replica's session
// is adopted).
func clusterTop(id string, keys ...string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = `"` + k + `"`
	}
	return `clients:
  alice:
    tokens: ["sha256:` + sha256Hex("alice-cluster-token") + `"]
    destinations: ["*"]
  bob:
    tokens: ["sha256:` + sha256Hex("bob-cluster-token") + `"]
    destinations: ["*"]
cluster:
  replica_id: ` + id + `
  advertise: 127.0.0.1:1
  keys: [` + strings.Join(q, ", ") + `]
`
}

// TestClusterSealedSessionIDs: with a cluster block the Mcp-Session-Id is
// a sealed token that another replica with the key opens (it adopts the
// session, replaying the client's handshake from the token); a token
// sealed with a key rotated out, altered by one byte, or presented by
// another caller answers 404; neither the token nor its plaintext fields
// (client name, capabilities) appear in any log or audit line.
func TestClusterSealedSessionIDs(t *testing.T) {
	d := dest{name: "d", mode: "plain", isolation: "session"} // its process gets the client's handshake
	r1 := start(t, clusterTop("r1", clusterKeyOld), d)
	r2 := start(t, clusterTop("r2", clusterKeyNew, clusterKeyOld), d) // rotation: the new key first, the old one still opens
	r3 := start(t, clusterTop("r3", clusterKeyNew), d)                // the old key dropped
	alice := []string{"Authorization", "Bearer alice-cluster-token"}
	bob := []string{"Authorization", "Bearer bob-cluster-token"}

	init := rpc(0, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{"experimental": map[string]any{"plaintext-marker-cap": map[string]any{}}},
		"clientInfo":      map[string]any{"name": "plaintext-marker-client", "version": "9.8.7"},
	})
	r := r1.do("POST", "/d/mcp", init, alice...)
	if r.status != 200 {
		t.Fatalf("initialize: %s", r)
	}
	tok := r.header.Get("Mcp-Session-Id")
	if len(tok) < 100 { // a plain id (a UUID: 36 characters) is far shorter than a sealed token
		t.Fatalf("session id %q is not a sealed token", tok)
	}
	with := func(hdr []string) []string { return append([]string{"Mcp-Session-Id", tok}, hdr...) }
	if r := r1.do("POST", "/d/mcp", rpc(nil, "notifications/initialized", nil), with(alice)...); r.status != http.StatusAccepted {
		t.Fatalf("initialized: %s", r)
	}
	echo := func(h *harness, id string, hdr []string) *resp {
		t.Helper()
		return h.do("POST", "/d/mcp", rpc(1, "tools/call", toolParams("echo", map[string]any{"text": "hi"}, nil)),
			append([]string{"Mcp-Session-Id", id}, hdr...)...)
	}
	if r := echo(r1, tok, alice); r.status != 200 || parseTool(t, r.last(t)).Text != "hi" {
		t.Fatalf("call on the owner: %s", r)
	}

	// Another principal, on the owner and on a replica that would adopt.
	for _, h := range []*harness{r1, r2} {
		if r := echo(h, tok, bob); r.status != http.StatusNotFound {
			t.Errorf("bob with alice's session id: %s, want 404", r)
		}
	}
	// One byte altered, anywhere: 404, on the owner too.
	for _, i := range []int{0, 1, 20, len(tok) / 2, len(tok) - 1} {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		if r := echo(r1, string(b), alice); r.status != http.StatusNotFound {
			t.Errorf("byte %d altered: %s, want 404", i, r)
		}
	}
	// The key rotated out: 404.
	if r := echo(r3, tok, alice); r.status != http.StatusNotFound {
		t.Errorf("a replica without the sealing key: %s, want 404", r)
	}
	// A replica with the key adopts it: same id, the handshake replayed
	// with the client's own clientInfo and capabilities.
	if r := echo(r2, tok, alice); r.status != 200 || parseTool(t, r.last(t)).Text != "hi" {
		t.Fatalf("call on a replica that adopts: %s", r)
	}
	r = r2.do("POST", "/d/mcp", rpc(2, "tools/call", toolParams("state", map[string]any{}, nil)), with(alice)...)
	st := parseTool(t, r.last(t)).State
	var client struct{ Name, Version string }
	if err := json.Unmarshal(st.Client, &client); err != nil || client.Name != "plaintext-marker-client" || client.Version != "9.8.7" {
		t.Errorf("the adopter's upstream got clientInfo %s, want the client's own", st.Client)
	}

	for i, h := range []*harness{r1, r2, r3} {
		var all strings.Builder
		for _, rec := range h.logs.all() {
			all.WriteString(rec.Msg + rec.Attrs + "\n")
		}
		all.WriteString(strings.Join(h.audit.raw(), "\n"))
		for _, secret := range []string{tok, tok[:40], tok[len(tok)-40:], "plaintext-marker", "9.8.7"} {
			if strings.Contains(all.String(), secret) {
				t.Errorf("replica %d's log or audit shows %.50q", i+1, secret)
			}
		}
	}
}
