package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

// TestHAProxyConfig runs the example deploy/haproxy/haproxy.cfg (its
// addresses replaced by loopback ones) in front of three HTTP servers that
// mint session ids as a replica does: every request carrying a session id
// reaches the replica that minted it, sessions spread over the replicas,
// a client's kept-alive connection gets a new connection to the replica
// for each request (so none is sent on a connection of a replica that
// died), and when a session's replica is down its requests go to another.
func TestHAProxyConfig(t *testing.T) {
	cfg, err := os.ReadFile("haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	front := fmt.Sprintf("127.0.0.1:%d", clustertest.FreePort(t))
	text := strings.Replace(string(cfg), "bind :8080", "bind "+front, 1)
	text = strings.Replace(text, "inter 2s", "inter 100ms", 1) // a dead replica is seen quickly

	replicas := make([]*replica, 3)
	for i := range replicas {
		replicas[i] = startReplica(t, fmt.Sprintf("r%d", i+1))
		text = strings.Replace(text, fmt.Sprintf("10.0.1.%d:8080", i+1), replicas[i].addr, 1)
	}
	clustertest.StartHAProxy(t, text, front)

	post := func(sid string) (who, minted string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+front+"/github/mcp", strings.NewReader(`{}`))
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		return string(body), resp.Header.Get("Mcp-Session-Id")
	}

	owner := map[string]string{} // session id -> replica
	for range 12 {
		who, sid := post("")
		if sid == "" {
			t.Fatal("no session id minted")
		}
		owner[sid] = who
	}
	spread := map[string]int{}
	for _, who := range owner {
		spread[who]++
	}
	if len(spread) < 2 {
		t.Errorf("12 sessions all went to %v; want them spread", spread)
	}
	for sid, who := range owner {
		for range 3 {
			if got, _ := post(sid); got != who {
				t.Fatalf("a request of %s's session reached %s", who, got)
			}
		}
	}

	// One kept-alive client connection, a new replica connection per
	// request (option http-server-close).
	var sid string
	for id := range owner {
		sid = id
		break
	}
	client := &http.Client{Transport: &http.Transport{}}
	var replicaConns []string
	for i := range 2 {
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost,
			"http://"+front+"/github/mcp", strings.NewReader(`{}`))
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i == 1 && !reused {
			t.Error("HAProxy did not keep the client's connection alive")
		}
		replicaConns = append(replicaConns, resp.Header.Get("X-Replica-Conn"))
	}
	if replicaConns[0] == "" || replicaConns[0] == replicaConns[1] {
		t.Errorf("two requests on one client connection reached the replica on connections %q; want a new one each", replicaConns)
	}

	// r1 goes down: its sessions' requests reach a live replica.
	replicas[0].stop()
	for sid, who := range owner {
		if who != "r1" {
			continue
		}
		if got, _ := post(sid); got == "r1" || got == "" {
			t.Errorf("r1's session answered by %q after r1 stopped", got)
		}
	}
}

// connKey is the context key of a replica connection's number.
type connKey struct{}

// replica is an HTTP server that mints a session id (about as long as a
// sealed one) for a request without one and answers with its name.
type replica struct {
	name string
	addr string
	srv  *http.Server
	once sync.Once
}

func startReplica(t *testing.T, name string) *replica {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, addr: l.Addr().String()}
	var conns atomic.Int64
	r.srv = &http.Server{ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, conns.Add(1))
	}, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("X-Replica-Conn", strconv.FormatInt(req.Context().Value(connKey{}).(int64), 10))
		if req.URL.Path == "/readyz" {
			io.WriteString(w, `{"status":"ready"}`)
			return
		}
		if req.Header.Get("Mcp-Session-Id") == "" {
			b := make([]byte, 190)
			rand.Read(b)
			w.Header().Set("Mcp-Session-Id", base64.RawURLEncoding.EncodeToString(b))
		}
		io.WriteString(w, name)
	})}
	go r.srv.Serve(l) // ends when stop closes the server
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() { r.once.Do(func() { r.srv.Close() }) }
