package gateway_test

// Cluster mode end to end (issue 24): three switchboard processes (the
// built binary) sharing a redis-server, behind HAProxy, with the go-sdk
// as the client, on a stdio destination (shared and session isolation)
// and a remote Streamable HTTP one.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
func clusterBinary(t testing.TB) string {
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
	sock     string // HAProxy's stats socket
	tag      string
}

// waitUp waits until HAProxy has r up (its health check passed), from
// its stats socket; a bounded poll of another process's state.
func (c *clusterRig) waitUp(r *replicaProc) {
	c.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if conn, err := net.Dial("unix", c.sock); err == nil {
			_, _ = conn.Write([]byte("show servers state switchboard\n"))
			out, _ := io.ReadAll(conn)
			conn.Close()
			for _, l := range strings.Split(string(out), "\n") {
				// be_id be_name srv_id srv_name srv_addr srv_op_state …; 2 is up
				if f := strings.Fields(l); len(f) > 5 && f[3] == r.id && f[5] == "2" {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("HAProxy does not have %s up within %v", r.id, waitFor)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	t0 := time.Now()
	defer func() { t.Logf("cluster started in %v", time.Since(t0)) }()
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
	sock := filepath.Join(dir, "haproxy.sock")
	cfg := fmt.Sprintf(`global
    log stderr format short local0 info
    stats socket %s level admin
defaults
    mode http
    log global
    option httplog
    # Keep-alive with the clients, a new connection to a replica per
    # request: a request is never sent on a kept-alive connection of a
    # replica that died (HAProxy would close the client's connection
    # without an answer for it to retry, which a POST is not), it meets
    # a refused connection and is redispatched (deploy/haproxy).
    option http-server-close
    timeout connect 1s
    timeout client 1m
    timeout server 1m
    retries 2
    option redispatch
    # A replica that dies under a request: a JSON-RPC error, and the
    # client's connection closed with it (HAProxy closes it; without
    # Connection: close the client would send its next request into it).
    http-error status 502 content-type application/json hdr Connection close string '{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"the replica serving this session failed during the request"}}'
frontend mcp
    bind 127.0.0.1:%d
    default_backend switchboard
backend switchboard
    http-reuse never
%s    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    # A loaded machine may answer a check late: 2 s to answer, 2 misses.
    timeout check 2s
    default-server check inter 200ms fall 2 rise 1
%s`, sock, front, balance, servers.String())
	c.lb = clustertest.StartHAProxy(t, cfg, "127.0.0.1:"+strconv.Itoa(front))
	c.sock = sock
	c.base = "http://127.0.0.1:" + strconv.Itoa(front)
	t.Cleanup(func() {
		for _, r := range c.replicas {
			t0 := time.Now()
			r.p.Stop()
			t.Logf("%s stopped in %v", r.id, time.Since(t0))
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
	mu     sync.Mutex
	logs   []string      // guarded by mu: the data of each notifications/message
	signal chan struct{} // guarded by mu: closed and replaced at each message
}

func newClusterClient() *clusterClient {
	c := &clusterClient{signal: make(chan struct{})}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: "cluster-e2e", Version: "1.0.0"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, fmt.Sprint(req.Params.Data))
			close(c.signal)
			c.signal = make(chan struct{})
			c.mu.Unlock()
		},
	})
	return c
}

// waitLog waits until a log message with data want has come (false after
// waitFor).
func (c *clusterClient) waitLog(want string) bool {
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got, sig := slices.Contains(c.logs, want), c.signal
		c.mu.Unlock()
		if got {
			return true
		}
		select {
		case <-sig:
		case <-deadline.C:
			return false
		}
	}
}

func (c *clusterClient) logged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.logs...)
}

// connect opens a legacy-era session (2025-11-25) on path through base;
// its listen stream reconnects (the go-sdk's default retries) when a
// replica dies.
func (c *clusterClient) connect(ctx context.Context, t *testing.T, base, path string) *mcp.ClientSession {
	t.Helper()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + path},
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

// TestClusterKillOwner: HAProxy sticks each session to the replica that
// minted it; that replica is killed (SIGKILL) while the clients are
// between calls. Each client's next call succeeds, with the same
// Mcp-Session-Id, on the replica that adopts the session: the handshake
// replayed, the log level and the subscriptions restored (a session's own
// process is a new one that got them; a shared one filters by the
// restored level).
func TestClusterKillOwner(t *testing.T) {
	up, _ := featureUpstream(t, "streamable_http", "remote")
	c := startCluster(t, rigOptions{sticky: true, remote: up.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type client struct {
		dest string
		cl   *clusterClient
		cs   *mcp.ClientSession
		id   string
		pid  string
	}
	// checkLevel: a debug message is filtered out, a warning delivered.
	checkLevel := func(cl *client, when string) {
		t.Helper()
		for _, lv := range []string{"debug", "warning"} {
			if _, err := callText(ctx, cl.cs, "log", map[string]any{"level": lv, "text": when + "-" + lv}); err != nil {
				t.Fatalf("%s %s: log: %v", cl.dest, when, err)
			}
		}
		// Messages come in order: once the warning is here, so would be
		// the debug message had it passed.
		arrived := cl.cl.waitLog(when + "-warning")
		got := strings.Join(cl.cl.logged(), ",")
		if !arrived || strings.Contains(got, when+"-debug") {
			t.Errorf("%s %s: the client got log messages %q; want the warning only (level warning)", cl.dest, when, got)
		}
	}
	var clients []*client
	for _, dest := range []string{"shared", "perses", "remote"} {
		cl := &client{dest: dest, cl: newClusterClient()}
		cs, err := cl.cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.base + "/" + dest + "/mcp"},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect %s: %v", dest, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		cl.cs, cl.id = cs, cs.ID()
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
			t.Fatalf("%s: setLevel: %v", dest, err)
		}
		if dest != "remote" {
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched"}); err != nil {
				t.Fatalf("%s: subscribe: %v", dest, err)
			}
			checkLevel(cl, "before")
			if cl.pid, err = callText(ctx, cs, "pid", map[string]any{}); err != nil {
				t.Fatal(err)
			}
		}
		clients = append(clients, cl)
	}
	owners := c.owners("perses")
	if len(owners) != 1 {
		t.Fatalf("%d replicas hold the perses session, want 1", len(owners))
	}
	victim := owners[0]
	t0 := time.Now()
	victim.p.Kill()
	defer func() { t.Logf("after the kill: %v", time.Since(t0)) }()

	for _, cl := range clients {
		text := "after the kill: " + cl.dest
		want := text
		if cl.dest == "remote" {
			want = "remote echo: " + text
		}
		got, err := callText(ctx, cl.cs, "echo", map[string]any{"text": text})
		if err != nil || got != want {
			t.Fatalf("%s: the first call after the owner's kill: %q, %v; want %q", cl.dest, got, err, want)
		}
		if cl.cs.ID() != cl.id {
			t.Errorf("%s: the session id changed", cl.dest)
		}
		t.Logf("%s: first call after the kill answered at %v", cl.dest, time.Since(t0))
		if cl.dest == "remote" {
			continue
		}
		checkLevel(cl, "after")
		if cl.dest != "perses" {
			continue
		}
		out, err := callText(ctx, cl.cs, "state", map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		var st serverState
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("state %q: %v", out, err)
		}
		pid, _ := callText(ctx, cl.cs, "pid", map[string]any{})
		if pid == cl.pid || !slices.Equal(st.Levels, []string{"warning"}) || !slices.Equal(st.Subs, []string{"subscribe:test://watched"}) {
			t.Errorf("perses after adoption: pid %s (was %s), levels %v, subscriptions %v; want a new process with [warning] and [test://watched]",
				pid, cl.pid, st.Levels, st.Subs)
		}
	}
	if o := c.owners("perses"); len(o) != 1 || o[0] == victim {
		t.Errorf("after the kill the perses session is held by %v", o)
	}
}

// TestClusterKillDuringBurst: clients call without pause through a
// sticky HAProxy while the replica owning some of their sessions is
// killed: only calls in flight on it fail, each with an error (no
// hang), at most one per session (the call in flight); every answer that comes is the one
// asked for (0 misrouted); the next calls succeed on the adopters.
func TestClusterKillDuringBurst(t *testing.T) {
	c := startCluster(t, rigOptions{sticky: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const sessions, after = 6, 5
	type result struct {
		failed, misrouted int
		// failedAfter: calls begun after the kill that failed; okAfter:
		// those that succeeded.
		failedAfter, okAfter int
		errs                 []string
	}
	results := make([]result, sessions)
	css := make([]*mcp.ClientSession, sessions)
	for i := range sessions {
		dest := []string{"perses", "shared"}[i%2]
		css[i] = newClusterClient().connect(ctx, t, c.base, "/"+dest+"/mcp")
	}
	// Each session's owner: the parent of its server process. The
	// victim: the replica holding the most.
	onReplica := make([]int, sessions) // pid of the owner
	count := map[int]int{}
	for i, cs := range css {
		out, err := callText(ctx, cs, "pid", map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(out)
		ppid, _, ok := procState(pid)
		if !ok {
			t.Fatalf("session %d: no process %d", i, pid)
		}
		onReplica[i] = ppid
		count[ppid]++
	}
	var victim *replicaProc
	most := -1
	for _, r := range c.replicas {
		if n := count[r.p.PID()]; n > most {
			victim, most = r, n
		}
	}
	killed := make(chan struct{})
	started := make(chan struct{}, sessions)
	var wg sync.WaitGroup
	for i, cs := range css {
		wg.Go(func() {
			res := &results[i]
			for n := 0; res.okAfter+res.failedAfter+res.misrouted < after; n++ {
				text := fmt.Sprintf("session %d call %d", i, n)
				var begunAfter bool // the kill was over when the call began
				select {
				case <-killed:
					begunAfter = true
				default:
				}
				got, err := callText(ctx, cs, "echo", map[string]any{"text": text})
				if n == 2 {
					started <- struct{}{}
				}
				switch {
				case err != nil:
					res.failed++
					res.errs = append(res.errs, err.Error())
					if begunAfter {
						res.failedAfter++
					}
				case got != text:
					res.misrouted++
				case begunAfter:
					res.okAfter++
				}
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	for range sessions {
		<-started
	}
	victim.p.Kill()
	close(killed)
	wg.Wait()
	failed := 0
	for i, r := range results {
		failed += r.failed
		for _, e := range r.errs {
			// HAProxy's 502, or the connection closed when the answer
			// had begun: an error at once, never a hang.
			if !strings.Contains(e, "Bad Gateway") && !strings.HasSuffix(e, "EOF") {
				t.Errorf("session %d: a failed call's error is %q, want HAProxy's 502 or the connection closed", i, e)
			}
		}
		if onReplica[i] != victim.p.PID() {
			if r.failed > 0 || r.misrouted > 0 {
				t.Errorf("session %d (on another replica): %d failed (%v), %d misrouted; want 0", i, r.failed, r.errs, r.misrouted)
			}
			continue
		}
		// The call in flight may fail (each session has one at most);
		// no call begun after the kill may.
		if r.misrouted > 0 || r.failedAfter > 0 || r.failed > 1 {
			t.Errorf("session %d: %d misrouted, %d failed (%v), of which %d begun after the kill; want 0, at most 1 (in flight), 0",
				i, r.misrouted, r.failed, r.errs, r.failedAfter)
		}
		t.Logf("session %d (on the replica killed): %d failed %q, %d succeeded after the kill", i, r.failed, r.errs, r.okAfter)
	}
	t.Logf("%d sessions, %d on the replica killed (%s): %d calls failed, all of sessions on it", sessions, most, victim.id, failed)
}

// TestClusterRateLimit: a client's rate limit of N requests a second holds
// across the three replicas (the budget is in Redis): through HAProxy's
// round robin, the requests admitted in a few seconds are within 10% of
// burst + N × elapsed, not three times that.
func TestClusterRateLimit(t *testing.T) {
	// A burst of a second's worth: a stall of the loaded machine shorter
	// than that loses no budget (GCRA keeps at most the burst).
	const rate, burst = 10, 10
	c := startCluster(t, rigOptions{top: `clients:
  alice:
    tokens: ["sha256:` + sha256Hex("alice-cluster-token") + `"]
    destinations: ["*"]
    rate_limit: {rate: ` + strconv.Itoa(rate) + `, burst: ` + strconv.Itoa(burst) + `}
`})
	hc := &http.Client{Timeout: waitFor}
	target := c.base
	// Each request is charged, then answered 404 (its session id does
	// not open): cheap, and never a session.
	send := func() (int, error) {
		req, _ := http.NewRequest("POST", target+"/shared/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer alice-cluster-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", "not-a-session")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	const workers, span = 4, 4 * time.Second
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for time.Since(start) < span {
				code, err := send()
				mu.Lock()
				if err != nil {
					counts[-1]++
				} else {
					counts[code]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	admitted := counts[http.StatusNotFound]
	want := float64(burst) + rate*elapsed.Seconds()
	t.Logf("in %v: %v (status: count); admitted %d, want %.0f ± 10%%", elapsed.Round(time.Millisecond), counts, admitted, want)
	if counts[-1] > 0 || len(counts) != 2 || counts[http.StatusTooManyRequests] == 0 {
		t.Errorf("answers %v: want 404 (admitted) and 429 only", counts)
	}
	if d := float64(admitted) - want; d > 0.1*want || d < -0.1*want {
		t.Errorf("%d requests admitted in %v, want %.0f ± 10%% (rate %d/s, burst %d, over 3 replicas)", admitted, elapsed, want, rate, burst)
	}
}

// TestClusterRollingRestart: every replica in turn is stopped (SIGTERM,
// waited for) and started again, while clients call without pause
// through a sticky HAProxy: a replica drains (readyz 503, its calls in
// flight finish, the load balancer sends elsewhere, the sessions are
// adopted there) and no call fails.
func TestClusterRollingRestart(t *testing.T) {
	c := startCluster(t, rigOptions{sticky: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const sessions = 4
	type result struct {
		ok, misrouted int
		errs          []string
	}
	results := make([]result, sessions)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range sessions {
		dest := []string{"perses", "shared"}[i%2]
		cs := newClusterClient().connect(ctx, t, c.base, "/"+dest+"/mcp")
		wg.Go(func() {
			res := &results[i]
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("session %d call %d", i, n)
				got, err := callText(ctx, cs, "echo", map[string]any{"text": text})
				switch {
				case err != nil:
					res.errs = append(res.errs, err.Error())
				case got != text:
					res.misrouted++
				default:
					res.ok++
				}
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	for _, r := range c.replicas {
		r.p.Stop()
		c.startReplica(r)
		c.waitUp(r) // before the next one goes: two replicas always serve
	}
	close(stop)
	wg.Wait()
	for i, r := range results {
		t.Logf("session %d: %d calls answered", i, r.ok)
		if len(r.errs) > 0 || r.misrouted > 0 || r.ok == 0 {
			t.Errorf("session %d: %d failed (%v), %d misrouted, %d answered; want 0, 0, some", i, len(r.errs), r.errs, r.misrouted, r.ok)
		}
	}
}
