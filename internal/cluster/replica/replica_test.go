package replica

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/auth"
	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
	"github.com/switchboard-mcp/switchboard/internal/cluster/hopauth"
	"github.com/switchboard-mcp/switchboard/internal/cluster/sessionstore"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/sealed"
)

var (
	keyA = []byte("replica-test-key-aaaaaaaaaaaaaaaaaaaaaaaa")
	keyB = []byte("replica-test-key-bbbbbbbbbbbbbbbbbbbbbbbb")
)

// newReplica returns the replica id with the given members and store.
func newReplica(t *testing.T, id string, members cluster.Members, st *sessionstore.Store, secrets ...[]byte) *Replica {
	t.Helper()
	if len(secrets) == 0 {
		secrets = [][]byte{keyA}
	}
	r, err := New(Options{Self: cluster.Replica{ID: id, Addr: "127.0.0.1:1"}, Secrets: secrets, Members: members, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func initialize(t *testing.T) *jsonrpc.Message {
	t.Helper()
	return jsonrpc.NewRequest(json.RawMessage(`1`), "initialize", json.RawMessage(`{"protocolVersion":"2025-11-25",
		"capabilities":{ "sampling" : {} },"clientInfo":{"name":"unit","version":"9.1"}}`))
}

var alice = &auth.Identity{Method: "token", Client: &auth.Client{Name: "alice"}}

func asAlice() context.Context { return auth.NewContext(context.Background(), alice) }

// TestMintAdoptWithoutRedis: a minted id opens on another replica with
// the key, for the same path and caller only; the adoption replays the
// client's own handshake (protocol, client info, compact capabilities);
// without Redis there is nothing to restore.
func TestMintAdoptWithoutRedis(t *testing.T) {
	r1 := newReplica(t, "r1", cluster.Static{}, nil)
	r2 := newReplica(t, "r2", cluster.Static{}, nil, keyB, keyA) // rotation: keyA still opens
	tok, name, err := r1.Mint(asAlice(), "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(name) != 16 || strings.Contains(tok, name) {
		t.Fatalf("Mint: name %q (want 16 characters, not in the token)", name)
	}
	a, err := r2.Adopt(asAlice(), "/d/mcp", tok)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != name || len(a.Restore) != 0 || a.Init.Method != "initialize" || a.Initialized.Method != "notifications/initialized" {
		t.Fatalf("Adopt = %+v", a)
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      map[string]string
	}
	if err := json.Unmarshal(a.Init.Params, &p); err != nil {
		t.Fatal(err)
	}
	if p.ProtocolVersion != "2025-11-25" || string(p.Capabilities) != `{"sampling":{}}` || p.ClientInfo["name"] != "unit" || p.ClientInfo["version"] != "9.1" {
		t.Errorf("replayed initialize params %s", a.Init.Params)
	}
	bob := auth.NewContext(context.Background(), &auth.Identity{Method: "token", Client: &auth.Client{Name: "bob"}})
	for what, try := range map[string]func() error{
		"another path":   func() error { _, err := r2.Adopt(asAlice(), "/e/mcp", tok); return err },
		"another caller": func() error { _, err := r2.Adopt(bob, "/d/mcp", tok); return err },
		"no caller":      func() error { _, err := r2.Adopt(context.Background(), "/d/mcp", tok); return err },
		"a key not held": func() error {
			_, err := newReplica(t, "r3", cluster.Static{}, nil, keyB).Adopt(asAlice(), "/d/mcp", tok)
			return err
		},
		"one byte altered": func() error {
			b := []byte(tok)
			b[len(b)/2] ^= 1
			_, err := r2.Adopt(asAlice(), "/d/mcp", string(b))
			return err
		},
	} {
		if err := try(); !errors.Is(err, sealed.ErrInvalid) {
			t.Errorf("Adopt with %s: %v, want sealed.ErrInvalid", what, err)
		}
	}
	// Bad initialize params are the client's error, not a session.
	if _, _, err := r1.Mint(asAlice(), "/d/mcp", jsonrpc.NewRequest(json.RawMessage(`1`), "initialize", json.RawMessage(`[1]`))); err == nil {
		t.Error("Mint with array params succeeded")
	}
	// Note and Ended without Redis do nothing (and do not fail).
	r1.Note(asAlice(), name, jsonrpc.NewRequest(json.RawMessage(`2`), "logging/setLevel", json.RawMessage(`{"level":"info"}`)))
	r1.Ended(asAlice(), name)
}

// TestNoteAdoptRestore: with Redis, Mint records the owner; Note records
// the log level and the subscriptions (not other calls); Adopt claims
// the session and restores them in order; the replica taken for dead
// can no longer record the session's state; Ended deletes the record.
func TestNoteAdoptRestore(t *testing.T) {
	rdb := clustertest.StartRedis(t).Client(t)
	st := sessionstore.New(rdb, "sb:", time.Minute)
	ctx := asAlice()
	r1 := newReplica(t, "r1", cluster.Static{}, st)
	r2 := newReplica(t, "r2", cluster.Static{}, st)
	r3 := newReplica(t, "r3", cluster.Static{}, st)
	tok, name, err := r1.Mint(ctx, "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := st.Get(ctx, name); !ok || err != nil || rec.Owner != "r1" {
		t.Fatalf("record after Mint: %+v, %v, %v", rec, ok, err)
	}
	note := func(method, params string) {
		r1.Note(ctx, name, jsonrpc.NewRequest(json.RawMessage(`7`), method, json.RawMessage(params)))
	}
	note("logging/setLevel", `{"level":"warning"}`)
	note("resources/subscribe", `{"uri":"test://a"}`)
	note("resources/subscribe", `{"uri":"test://b"}`)
	note("resources/subscribe", `{"uri":"test://a"}`) // once
	note("resources/subscribe", `{"uri":"test://c"}`)
	note("resources/unsubscribe", `{"uri":"test://b"}`)
	note("tools/call", `{"name":"echo"}`) // only touches
	rec, _, err := st.Get(ctx, name)
	if err != nil || rec.Owner != "r1" || rec.LogLevel != "warning" || strings.Join(rec.Subscriptions, ",") != "test://a,test://c" {
		t.Fatalf("record after Note: %+v, %v", rec, err)
	}

	a, err := r2.Adopt(ctx, "/d/mcp", tok)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range a.Restore {
		v, _ := jsonrpc.StringMember(m.Params, "level")
		if v == "" {
			v, _ = jsonrpc.StringMember(m.Params, "uri")
		}
		got = append(got, m.Method+" "+v)
	}
	if want := "logging/setLevel warning,resources/subscribe test://a,resources/subscribe test://c"; strings.Join(got, ",") != want {
		t.Errorf("Restore = %q, want %q", got, want)
	}
	if rec, _, _ := st.Get(ctx, name); rec.Owner != "r2" {
		t.Errorf("owner after Adopt: %q, want r2", rec.Owner)
	}
	// Adopt is the front's decision once Forward did not forward (the
	// owner is gone or unknown): r3 takes the session over from r2.
	if a, err := r3.Adopt(ctx, "/d/mcp", tok); err != nil || len(a.Restore) != 3 {
		t.Errorf("Adopt by r3: %d to restore, %v", len(a.Restore), err)
	}
	// r1, back, may no longer record the session's state.
	note("logging/setLevel", `{"level":"debug"}`)
	if rec, _, _ := st.Get(ctx, name); rec.Owner != "r3" || rec.LogLevel != "warning" {
		t.Errorf("record after a Note of the replica taken for dead: %+v", rec)
	}
	r2.Ended(ctx, name)
	if _, ok, _ := st.Get(ctx, name); ok {
		t.Error("the record outlived Ended")
	}
}

// owner is an httptest server standing for the replica that owns a
// session: it verifies the hop signature as the edge does (Hop) and
// answers with what it received.
type owner struct {
	*httptest.Server
	served atomic.Int32
}

func newOwner(t *testing.T, r *Replica) *owner {
	t.Helper()
	o := &owner{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hop, err := r.Hop(req)
		if !hop || err != nil {
			http.Error(w, "not a hop", http.StatusForbidden)
			return
		}
		o.served.Add(1)
		body, _ := io.ReadAll(req.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Connection", "keep-alive") // a hop header: not passed on
		w.Header().Set("X-Owner", r.ID())
		io.WriteString(w, "event: message\ndata: "+req.Method+" "+req.Header.Get("Authorization")+" "+string(body)+"\n\n")
	}))
	t.Cleanup(o.Close)
	return o
}

func addr(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

func post(token, body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://gw/d/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(mcp.HeaderSessionID, token)
	}
	return req
}

// TestHop: a request without the hop header is not a hop; a signed one
// is (its body still readable); a forged, altered or differently keyed
// signature is an error.
func TestHop(t *testing.T) {
	r := newReplica(t, "r1", cluster.Static{}, nil)
	if hop, err := r.Hop(post("", "{}")); hop || err != nil {
		t.Errorf("a plain request: %v, %v", hop, err)
	}
	sign := func(secret []byte, body string) *http.Request {
		k, err := hopauth.New([][]byte{secret})
		if err != nil {
			t.Fatal(err)
		}
		req := post("tok", body)
		k.Sign(req, []byte(body))
		return req
	}
	req := sign(keyA, `{"a":1}`)
	if hop, err := r.Hop(req); !hop || err != nil {
		t.Fatalf("a signed request: %v, %v", hop, err)
	}
	if b, _ := io.ReadAll(req.Body); string(b) != `{"a":1}` {
		t.Errorf("the body after Hop: %q", b)
	}
	req = sign(keyA, `{"a":1}`)
	req.Body = io.NopCloser(strings.NewReader(`{"a":2}`))
	if hop, err := r.Hop(req); hop || err == nil {
		t.Errorf("an altered body: %v, %v", hop, err)
	}
	if hop, err := r.Hop(sign(keyB, `{}`)); hop || err == nil {
		t.Errorf("another cluster's key: %v, %v", hop, err)
	}
	req = post("tok", "{}")
	req.Header.Set(hopauth.Header, "forged")
	if hop, err := r.Hop(req); hop || err == nil {
		t.Errorf("a forged header: %v, %v", hop, err)
	}
}

// TestForward: the routing decisions. No session id, a token that does
// not open, or a session this replica owns: not forwarded (served here).
// A session of another live replica: forwarded once, signed, with the
// caller's credentials and the body, the answer streamed back without
// hop headers. A dead owner (connection refused): with Redis the session
// is claimed and served here; a session another replica claimed first
// goes there. A replica that joined after the membership was last read
// is found (read afresh).
func TestForward(t *testing.T) {
	rdb := clustertest.StartRedis(t).Client(t)
	st := sessionstore.New(rdb, "sb:", time.Minute)
	ctx := asAlice()
	members := cluster.Static{}
	r1 := newReplica(t, "r1", &members, st)
	r2 := newReplica(t, "r2", &members, st)
	r3 := newReplica(t, "r3", &members, st)
	o2, o3 := newOwner(t, r2), newOwner(t, r3)
	members = cluster.Static{{ID: "r1", Addr: deadAddr(t)}, {ID: "r2", Addr: addr(o2.Server)}, {ID: "r3", Addr: addr(o3.Server)}}

	forward := func(r *Replica, req *http.Request) (bool, *httptest.ResponseRecorder) {
		w := httptest.NewRecorder()
		return r.Forward(w, req.WithContext(ctx), alice), w
	}
	tok2, _, err := r2.Mint(ctx, "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := forward(r1, post("", "{}")); ok {
		t.Error("a request without a session id was forwarded")
	}
	if ok, _ := forward(r1, post("not-a-token", "{}")); ok {
		t.Error("a token that does not open was forwarded (the front answers 404)")
	}
	if ok, _ := forward(r2, post(tok2, "{}")); ok {
		t.Error("the owner forwarded its own session")
	}
	ok, w := forward(r1, post(tok2, `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if !ok || w.Code != 200 || o2.served.Load() != 1 {
		t.Fatalf("forward to the live owner: %v, %d, served %d", ok, w.Code, o2.served.Load())
	}
	if got, want := w.Body.String(), `data: POST Bearer secret {"jsonrpc":"2.0","id":1,"method":"ping"}`; !strings.Contains(got, want) {
		t.Errorf("the forwarded answer %q, want it to contain %q", got, want)
	}
	if w.Header().Get("X-Owner") != "r2" || w.Header().Get("Connection") != "" || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("the forwarded answer's headers: %v", w.Header())
	}

	// r1 minted a session, and died (its address refuses connections).
	tok1, name1, err := newReplica(t, "r1", &members, st).Mint(ctx, "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := forward(r2, post(tok1, "{}")); ok {
		t.Fatal("a session of a dead owner was forwarded; want it claimed and served here")
	}
	if rec, _, _ := st.Get(ctx, name1); rec.Owner != "r2" {
		t.Errorf("the dead owner's session is owned by %q, want r2 (claimed)", rec.Owner)
	}
	// r3 gets the next request of that session: it goes to r2.
	if ok, w := forward(r3, post(tok1, "{}")); !ok || w.Header().Get("X-Owner") != "r2" || o2.served.Load() != 2 {
		t.Errorf("a session claimed by r2, at r3: forwarded %v to %q", ok, w.Header().Get("X-Owner"))
	}

	// r4 joins after r1 read (and reuses) the membership: a session r4
	// minted is forwarded to it, not taken for orphaned.
	r4 := newReplica(t, "r4", &members, st)
	o4 := newOwner(t, r4)
	members = append(members, cluster.Replica{ID: "r4", Addr: addr(o4.Server)})
	tok4, name4, err := r4.Mint(ctx, "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	if ok, w := forward(r1, post(tok4, "{}")); !ok || w.Header().Get("X-Owner") != "r4" {
		t.Errorf("a session of a replica that just joined: forwarded %v to %q, want r4", ok, w.Header().Get("X-Owner"))
	}
	if rec, _, _ := st.Get(ctx, name4); rec.Owner != "r4" {
		t.Errorf("the new replica's session is owned by %q", rec.Owner)
	}

	// The owner's record names a replica that no longer listens although
	// the membership still lists it: the refused hop claims the session.
	tok3, name3, err := r3.Mint(ctx, "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	o3.Close()
	if ok, _ := forward(r2, post(tok3, "{}")); ok {
		t.Error("a hop to an owner that refuses connections answered; want the session adopted here")
	}
	if rec, _, _ := st.Get(ctx, name3); rec.Owner != "r2" {
		t.Errorf("after a refused hop the session is owned by %q, want r2", rec.Owner)
	}
}

// TestForwardWithoutRedis: with a static membership and no store, a
// session of a listed replica is forwarded to it; a session whose owner
// is not listed is served here (adopted with its handshake only).
func TestForwardWithoutRedis(t *testing.T) {
	ctx := asAlice()
	members := cluster.Static{}
	r1 := newReplica(t, "r1", &members, nil)
	r2 := newReplica(t, "r2", &members, nil)
	o2 := newOwner(t, r2)
	members = cluster.Static{{ID: "r1", Addr: deadAddr(t)}, {ID: "r2", Addr: addr(o2.Server)}}
	tok, _, err := r2.Mint(ctx, "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	if !r1.Forward(w, post(tok, "{}").WithContext(ctx), alice) || o2.served.Load() != 1 {
		t.Errorf("not forwarded to the listed owner")
	}
	tokX, _, err := newReplica(t, "gone", &members, nil).Mint(ctx, "/d/mcp", initialize(t))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Forward(httptest.NewRecorder(), post(tokX, "{}").WithContext(ctx), alice) {
		t.Error("a session of a replica not in the membership was forwarded")
	}
}
