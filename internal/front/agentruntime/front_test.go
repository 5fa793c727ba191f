package agentruntime

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// fakeGateway stands in for the gateway: initialize opens session s-N,
// "block" waits for release, any other method echoes the session it got;
// session "gone" answers 404 (initialize with ?gone opens it).
type fakeGateway struct {
	mu      sync.Mutex
	n       int
	paths   []string
	entered chan struct{}
	release chan struct{}
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.paths = append(g.paths, r.URL.Path)
	g.mu.Unlock()
	sid := r.Header.Get(mcp.HeaderSessionID)
	if sid == "gone" {
		http.Error(w, "no such session", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var m struct {
		Method string `json:"method"`
	}
	_ = json.NewDecoder(r.Body).Decode(&m)
	switch m.Method {
	case "initialize":
		g.mu.Lock()
		g.n++
		id := fmt.Sprintf("s-%d", g.n)
		if r.URL.Query().Has("gone") {
			id = "gone"
		}
		w.Header().Set(mcp.HeaderSessionID, id)
		g.mu.Unlock()
	case "block":
		g.entered <- struct{}{}
		<-g.release
	}
	fmt.Fprintf(w, "session=%s", sid)
}

func newFront(t *testing.T, max int) (*Front, *fakeGateway, *httptest.Server) {
	g := &fakeGateway{entered: make(chan struct{}), release: make(chan struct{})}
	clock := time.Unix(1000, 0)
	var cmu sync.Mutex
	f := New(g, Options{Endpoint: "/server/mcp", MaxBindings: max, Now: func() time.Time {
		cmu.Lock()
		defer cmu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}})
	srv := httptest.NewServer(f.HTTP())
	t.Cleanup(srv.Close)
	return f, g, srv
}

func do(t *testing.T, method, url, rid, sid, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if rid != "" {
		req.Header.Set(HeaderRuntimeSession, rid)
	}
	if sid != "" {
		req.Header.Set(mcp.HeaderSessionID, sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestFrontBindsRuntimeSessions(t *testing.T) {
	f, g, srv := newFront(t, 2)
	inv := srv.URL + "/invocations"
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize"}`
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`
	if _, _, h := do(t, "POST", inv, "A", "", init); h.Get(mcp.HeaderSessionID) != "s-1" {
		t.Fatalf("initialize opened %q", h.Get(mcp.HeaderSessionID))
	}
	if _, body, _ := do(t, "POST", inv, "A", "", call); body != "session=s-1" {
		t.Errorf("runtime id A only: %s, want session=s-1", body)
	}
	if _, body, _ := do(t, "POST", inv, "A", "other", call); body != "session=other" {
		t.Errorf("Mcp-Session-Id wins: %s", body)
	}
	if _, body, _ := do(t, "POST", inv, "B", "", call); body != "session=" {
		t.Errorf("unbound runtime id: %s, want no session", body)
	}
	// An initialize (also in a batch) never gets the bound session; it rebinds.
	if _, body, _ := do(t, "POST", inv, "A", "", "["+init+"]"); body != "session=" {
		t.Errorf("batched initialize: %s, want no session", body)
	}
	if _, body, _ := do(t, "POST", inv, "A", "", init); body != "session=" {
		t.Errorf("initialize: %s, want no session", body)
	}
	if _, body, _ := do(t, "POST", inv, "A", "", call); body != "session=s-2" {
		t.Errorf("after the second initialize: %s, want session=s-2", body)
	}
	// The table is bounded: the oldest binding goes.
	do(t, "POST", inv, "B", "", init) // s-3
	do(t, "POST", inv, "C", "", init) // s-4: A is the oldest, it goes
	if f.Bindings() != 2 {
		t.Errorf("%d bindings, want 2", f.Bindings())
	}
	if _, body, _ := do(t, "POST", inv, "A", "", call); body != "session=" {
		t.Errorf("evicted runtime id: %s, want no session", body)
	}
	// DELETE unbinds.
	if code, _, _ := do(t, "DELETE", inv, "B", "", ""); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	if _, body, _ := do(t, "POST", inv, "B", "", call); body != "session=" {
		t.Errorf("after DELETE: %s, want no session", body)
	}
	// A 404 (the session expired) unbinds.
	do(t, "POST", inv+"?gone", "D", "", init)
	if code, _, _ := do(t, "POST", inv, "D", "", call); code != http.StatusNotFound {
		t.Errorf("expired session: %d, want 404", code)
	}
	if _, body, _ := do(t, "POST", inv, "D", "", call); body != "session=" {
		t.Errorf("after a 404: %s, want no session", body)
	}
	for _, p := range g.paths {
		if p != "/server/mcp" {
			t.Errorf("gateway saw path %s, want /server/mcp", p)
		}
	}
	if code, _, _ := do(t, "POST", srv.URL+"/mcp", "", "", call); code != http.StatusNotFound {
		t.Errorf("/mcp on the HTTP contract: %d, want 404", code)
	}
}

func TestFrontPingBusy(t *testing.T) {
	_, g, srv := newFront(t, 0)
	ping := func() (string, int64) {
		_, body, _ := do(t, "GET", srv.URL+"/ping", "", "", "")
		var p struct {
			Status  string `json:"status"`
			Updated int64  `json:"time_of_last_update"`
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatalf("/ping: %v: %s", err, body)
		}
		return p.Status, p.Updated
	}
	st, t0 := ping()
	if st != "Healthy" {
		t.Fatalf("idle /ping = %s", st)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(t, "POST", srv.URL+"/invocations", "", "", `{"jsonrpc":"2.0","id":1,"method":"block"}`)
	}()
	<-g.entered
	st, t1 := ping()
	if st != "HealthyBusy" || t1 <= t0 {
		t.Errorf("/ping during a call = %s at %d, want HealthyBusy after %d", st, t1, t0)
	}
	close(g.release)
	<-done
	if st, t2 := ping(); st != "Healthy" || t2 <= t1 {
		t.Errorf("/ping after the call = %s at %d, want Healthy after %d", st, t2, t1)
	}
}
