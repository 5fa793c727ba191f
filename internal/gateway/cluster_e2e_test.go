package gateway_test

// Cluster mode end to end (issue 24): three switchboard processes (the
// built binary) sharing a redis-server, behind HAProxy, with the go-sdk
// as the client, on a stdio destination (shared and session isolation)
// and a remote Streamable HTTP one.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

// switchboardBin is the binary the cluster tests run, built once.
var switchboardBin struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// clusterBinary builds cmd/switchboard once per test run, into the
// state folder TestMain removes.
func clusterBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	switchboardBin.once.Do(func() {
		dir, err := os.MkdirTemp(os.Getenv("XDG_STATE_HOME"), "bin-")
		if err != nil {
			switchboardBin.err = err
			return
		}
		switchboardBin.path = filepath.Join(dir, "switchboard")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", switchboardBin.path, "github.com/switchboard-mcp/switchboard/cmd/switchboard")
		switchboardBin.out, switchboardBin.err = cmd.CombinedOutput()
	})
	if switchboardBin.err != nil {
		t.Fatalf("go build: %v\n%s", switchboardBin.err, switchboardBin.out)
	}
	return switchboardBin.path
}

// replicaProc is one switchboard process of a cluster.
type replicaProc struct {
	id   string
	port int
	cfg  string // its config file
	p    *clustertest.Process
}

func (r *replicaProc) base() string { return "http://127.0.0.1:" + strconv.Itoa(r.port) }

// clusterRig is a running cluster.
type clusterRig struct {
	t        *testing.T
	bin      string
	redis    *clustertest.Redis
	replicas []*replicaProc
	lb       *clustertest.HAProxy
	base     string // HAProxy's frontend, http://127.0.0.1:port
	tag      string
}

// rigOptions shape a cluster.
type rigOptions struct {
	sticky bool   // HAProxy sticks sessions to the replica that minted them; else round robin
	top    string // more global YAML of every replica
	remote string // the URL of a remote streamable_http destination "remote"; "" none
}

// startCluster runs three replicas, Redis and HAProxy.
func startCluster(t *testing.T, o rigOptions) *clusterRig {
	t.Helper()
	c := &clusterRig{t: t, bin: clusterBinary(t), redis: clustertest.StartRedis(t), tag: newTag(t)}
	dir := t.TempDir()
	for i := range 3 {
		r := &replicaProc{id: fmt.Sprintf("r%d", i+1), port: clustertest.FreePort(t)}
		top := fmt.Sprintf(`listen: 127.0.0.1:%d
audit: {path: stderr}
session_idle_timeout: 5m
%scluster:
  replica_id: %s
  advertise: 127.0.0.1:%d
  keys: ["%s"]
  heartbeat_ttl: 2s
  redis: {url: "redis://%s/0"}
`, r.port, o.top, r.id, r.port, clusterKeyNew, c.redis.Addr)
		yml := configYAML(t, c.tag, top, dest{name: "shared", mode: "plain"}, dest{name: "perses", mode: "plain", isolation: "session"})
		if o.remote != "" {
			yml += "  remote:\n    type: streamable_http\n    url: " + o.remote + "\n"
		}
		r.cfg = filepath.Join(dir, r.id+".yaml")
		if err := os.WriteFile(r.cfg, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		c.replicas = append(c.replicas, r)
		c.startReplica(r)
	}
	front := clustertest.FreePort(t)
	balance := "    balance roundrobin\n"
	if o.sticky {
		balance = `    balance leastconn
    stick-table type string len 64 size 10k expire 30m
    stick store-response res.hdr(mcp-session-id)
    stick match req.hdr(mcp-session-id)
`
	}
	var servers strings.Builder
	for i, r := range c.replicas {
		fmt.Fprintf(&servers, "    server %s 127.0.0.1:%d id %d\n", r.id, r.port, i+1)
	}
	cfg := fmt.Sprintf(`global
    log stderr format short local0 notice
defaults
    mode http
    option http-keep-alive
    timeout connect 1s
    timeout client 1m
    timeout server 1m
    retries 2
    option redispatch
frontend mcp
    bind 127.0.0.1:%d
    default_backend switchboard
backend switchboard
%s    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    default-server check inter 200ms fall 1 rise 1
%s`, front, balance, servers.String())
	c.lb = clustertest.StartHAProxy(t, cfg, "127.0.0.1:"+strconv.Itoa(front))
	c.base = "http://127.0.0.1:" + strconv.Itoa(front)
	t.Cleanup(func() {
		for _, r := range c.replicas {
			r.p.Stop()
		}
		waitGone(t, 10*time.Second, procsWithEnv(envServerTag+"="+c.tag)...)
	})
	return c
}

// startReplica (re)starts r and waits until it listens.
func (c *clusterRig) startReplica(r *replicaProc) {
	c.t.Helper()
	r.p = clustertest.Start(c.t, "switchboard "+r.id, []string{c.bin, "serve", "--config", r.cfg}, filepath.Dir(r.cfg), "switchboard listening")
}

// owner returns the replica holding a session of destination dest
// (its /healthz counts it), or nil.
func (c *clusterRig) owners(dest string) []*replicaProc {
	c.t.Helper()
	var out []*replicaProc
	for _, r := range c.replicas {
		select {
		case <-r.p.Done():
			continue
		default:
		}
		resp, err := http.Get(r.base() + "/healthz")
		if err != nil {
			continue
		}
		var h struct {
			Destinations []struct {
				Name     string
				Sessions int
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil {
			c.t.Fatalf("%s /healthz: %v", r.id, err)
		}
		for _, d := range h.Destinations {
			if d.Name == dest && d.Sessions > 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// clusterClient is a go-sdk client that records the log messages it
// gets.
type clusterClient struct {
	*mcp.Client
	mu   sync.Mutex
	logs []string // the data of each notifications/message
}

func newClusterClient() *clusterClient {
	c := &clusterClient{}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: "cluster-e2e", Version: "1.0.0"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, fmt.Sprint(req.Params.Data))
			c.mu.Unlock()
		},
	})
	return c
}

func (c *clusterClient) logged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.logs...)
}

// connect opens a legacy-era session (2025-11-25) on path through base.
func (c *clusterClient) connect(ctx context.Context, t *testing.T, base, path string) *mcp.ClientSession {
	t.Helper()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + path, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect %s: %v", path, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callText calls tool with args and returns its text, or the error.
func callText(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %v", res.Content)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), nil
}

// TestClusterRoundRobinForwards: HAProxy without stickiness spreads each
// session's requests over the three replicas; every call is still
// answered, correctly, by the session's owner (its process: one pid),
// through forwarding, the listen stream (GET) included.
func TestClusterRoundRobinForwards(t *testing.T) {
	up, _ := featureUpstream(t, "streamable_http", "remote")
	c := startCluster(t, rigOptions{remote: up.URL})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dest := range []string{"shared", "perses", "remote"} {
		cs := newClusterClient().connect(ctx, t, c.base, "/"+dest+"/mcp")
		pids := map[string]bool{}
		for i := range 9 {
			text := fmt.Sprintf("%s call %d", dest, i)
			want := text
			if dest == "remote" {
				want = "remote echo: " + text // the feature server's echo
			}
			got, err := callText(ctx, cs, "echo", map[string]any{"text": text})
			if err != nil || got != want {
				t.Fatalf("%s call %d: %q, %v; want %q", dest, i, got, err, want)
			}
			if dest != "remote" {
				pid, err := callText(ctx, cs, "pid", map[string]any{})
				if err != nil {
					t.Fatalf("%s pid: %v", dest, err)
				}
				pids[pid] = true
			}
		}
		if len(pids) > 1 {
			t.Errorf("%s: the calls reached %d processes (%v), want the owner's only", dest, len(pids), pids)
		}
		if o := c.owners(dest); len(o) != 1 {
			t.Errorf("%s: %d replicas hold the session, want 1 (the others forward)", dest, len(o))
		}
		// A replica that forwards audits the request without a
		// destination (no front of its own served it).
		if n := c.forwarded("/" + dest + "/mcp"); n < 3 {
			t.Errorf("%s: %d requests forwarded, want about two thirds of them", dest, n)
		}
	}
}

// forwarded counts the requests on path the replicas forwarded, from
// their audit lines (stderr).
func (c *clusterRig) forwarded(path string) int {
	n := 0
	for _, r := range c.replicas {
		for _, l := range strings.Split(r.p.Log(), "\n") {
			if strings.Contains(l, `"destination":"",`) && strings.Contains(l, `"path":"`+path+`"`) && strings.Contains(l, `"http_method":"POST"`) {
				n++
			}
		}
	}
	return n
}
