package gateway_test

// Cluster mode end to end with the TypeScript SDK's client (issue 24): the
// npm @modelcontextprotocol/sdk, from the inspector's node_modules under
// Node 22, is the client of sessions on the three destination kinds while
// the replica owning all of them is killed.

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// tsClusterClient is a Node program: for each URL it connects a TypeScript
// SDK client (protocol 2025-11-25, the era with Mcp-Session-Id), sets the
// log level to warning, subscribes to test://watched (stdio destinations),
// checks the level filter, and prints "before <json>" then "ts-client
// ready". On SIGUSR2 it makes each session's next calls, checks the level
// filter again, prints "after <json>" and exits. Any failure is printed
// as "fail <message>" with exit status 1.
const tsClusterClient = `import { pathToFileURL } from "node:url";
const [dir, ...urls] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(dir + "/client/index.js").href);
const { StreamableHTTPClientTransport } = await import(pathToFileURL(dir + "/client/streamableHttp.js").href);
const { LoggingMessageNotificationSchema } = await import(pathToFileURL(dir + "/types.js").href);

const fail = (msg) => { console.log("fail " + msg); process.exit(1); };
const text = (res) => {
  if (res.isError) throw new Error("tool error: " + JSON.stringify(res.content));
  return res.content.filter((c) => c.type === "text").map((c) => c.text).join("");
};

// One session per URL; logs[i] holds the data of each log message.
const sessions = [];
for (const url of urls) {
  const s = { url, stdio: !url.includes("/remote/"), logs: [], waiters: [] };
  s.client = new Client({ name: "cluster-ts-e2e", version: "1.0.0" });
  s.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    s.logs.push(String(n.params.data));
    for (const w of s.waiters.splice(0)) w();
  });
  s.transport = new StreamableHTTPClientTransport(new URL(url));
  await s.client.connect(s.transport);
  sessions.push(s);
}

// waitLog: until a log message want has come (false after 10 s).
const waitLog = async (s, want) => {
  const deadline = Date.now() + 10000;
  while (!s.logs.includes(want)) {
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, left);
      s.waiters.push(() => { clearTimeout(timer); resolve(); });
    });
  }
  return true;
};

// checkLevel: at level warning a debug message is filtered out and a
// warning delivered (in order: once the warning is here, so would be the
// debug message had it passed).
const checkLevel = async (s, when) => {
  for (const level of ["debug", "warning"]) {
    text(await s.client.callTool({ name: "log", arguments: { level, text: when + "-" + level } }));
  }
  if (!(await waitLog(s, when + "-warning")) || s.logs.includes(when + "-debug")) {
    fail(s.url + " " + when + ": log messages " + JSON.stringify(s.logs) + ", want the warning only");
  }
};

const snapshot = async (phase) => {
  const out = [];
  for (const s of sessions) {
    const msg = phase + " " + s.url;
    const echo = text(await s.client.callTool({ name: "echo", arguments: { text: msg } }));
    const r = { url: s.url, session: s.transport.sessionId, echo, want: msg };
    if (s.stdio) {
      await checkLevel(s, phase);
      r.pid = text(await s.client.callTool({ name: "pid", arguments: {} }));
      r.state = JSON.parse(text(await s.client.callTool({ name: "state", arguments: {} })));
    }
    out.push(r);
  }
  return out;
};

try {
  for (const s of sessions) {
    await s.client.setLoggingLevel("warning");
    if (s.stdio) await s.client.subscribeResource({ uri: "test://watched" });
  }
  const before = await snapshot("before");
  const go = new Promise((resolve) => process.once("SIGUSR2", resolve));
  console.log("before " + JSON.stringify(before));
  console.log("ts-client ready");
  await go;
  const after = await snapshot("after");
  console.log("after " + JSON.stringify(after));
  for (const s of sessions) await s.client.close();
  process.exit(0);
} catch (e) {
  fail(String(e && e.stack || e));
}
`

// tsSnapshot is one session's state as the Node client reports it.
type tsSnapshot struct {
	URL     string      `json:"url"`
	Session string      `json:"session"`
	Echo    string      `json:"echo"`
	Want    string      `json:"want"`
	PID     string      `json:"pid"`
	State   serverState `json:"state"`
}

// tsLine returns the JSON after prefix on the last line of log starting
// with it.
func tsLine(t *testing.T, log, prefix string) []tsSnapshot {
	t.Helper()
	var found string
	for _, l := range strings.Split(log, "\n") {
		if s, ok := strings.CutPrefix(l, prefix+" "); ok {
			found = s
		}
	}
	var out []tsSnapshot
	if err := json.Unmarshal([]byte(found), &out); err != nil {
		t.Fatalf("the TypeScript client printed no %q line (%v):\n%s", prefix, err, log)
	}
	return out
}

// setServer changes a replica's administrative state in HAProxy ("ready"
// or "maint") through its stats socket.
func (c *clusterRig) setServer(r *replicaProc, state string) {
	c.t.Helper()
	conn, err := net.Dial("unix", c.sock)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("set server switchboard/" + r.id + " state " + state + "\n")); err != nil {
		c.t.Fatal(err)
	}
	out, err := io.ReadAll(conn)
	if err != nil || strings.TrimSpace(string(out)) != "" {
		c.t.Fatalf("HAProxy: set server %s state %s: %q, %v", r.id, state, out, err)
	}
}

// TestClusterKillOwnerTypeScript: TestClusterKillOwner with the
// TypeScript SDK's client. HAProxy has only r1 in service while the
// client opens its sessions (stdio shared and session isolation, remote
// streamable_http), so r1 owns the three; then the others come back and r1
// is killed (SIGKILL) while the client is between calls. Each session's
// next call succeeds with the same Mcp-Session-Id, on the replica that
// adopts it, with the log level and the subscription intact.
func TestClusterKillOwnerTypeScript(t *testing.T) {
	node := peertest.Node(t)
	_, idir := peertest.InspectorCLI(t)
	sdk := filepath.Join(idir, "..", "..", "sdk", "dist", "esm")
	up, _ := featureUpstream(t, "streamable_http", "remote")
	c := startCluster(t, rigOptions{sticky: true, remote: up.URL})
	victim := c.replicas[0]
	c.waitUp(victim)
	for _, r := range c.replicas[1:] {
		c.setServer(r, "maint")
	}
	script := filepath.Join(t.TempDir(), "cluster-client.mjs")
	if err := os.WriteFile(script, []byte(tsClusterClient), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := []string{node, script, sdk}
	for _, d := range []string{"shared", "perses", "remote"} {
		argv = append(argv, c.base+"/"+d+"/mcp")
	}
	cl := clustertest.Start(t, "typescript client", argv, filepath.Dir(script), "ts-client ready")
	before := tsLine(t, cl.Log(), "before")
	for _, d := range []string{"shared", "perses", "remote"} {
		if o := c.owners(d); len(o) != 1 || o[0] != victim {
			t.Fatalf("%s: the session is held by %v, want %s only", d, o, victim.id)
		}
	}
	for _, r := range c.replicas[1:] {
		c.setServer(r, "ready")
		c.waitUp(r)
	}
	t0 := time.Now()
	victim.p.Kill()
	if err := syscall.Kill(cl.PID(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cl.Done():
	case <-time.After(2 * time.Minute): // a failure bound
		t.Fatalf("the TypeScript client did not finish within 2 minutes:\n%s", cl.Log())
	}
	t.Logf("the TypeScript client's calls after the kill ended at %v", time.Since(t0))
	if strings.Contains(cl.Log(), "\nfail ") || strings.HasPrefix(cl.Log(), "fail ") {
		t.Fatalf("the TypeScript client failed:\n%s", cl.Log())
	}
	after := tsLine(t, cl.Log(), "after")
	if len(after) != len(before) {
		t.Fatalf("%d sessions after, %d before", len(after), len(before))
	}
	for i, a := range after {
		b := before[i]
		want := a.Want
		if strings.Contains(a.URL, "/remote/") {
			want = "remote echo: " + want
		}
		if a.Echo != want || b.Session == "" || a.Session != b.Session {
			t.Errorf("%s after the kill: echo %q (want %q), session id the same: %v", a.URL, a.Echo, want, a.Session == b.Session && b.Session != "")
		}
		t.Logf("%s: session %s… kept; upstream pid %s → %s", a.URL, a.Session[:min(len(a.Session), 12)], b.PID, a.PID)
		if !strings.Contains(a.URL, "/perses/") {
			continue
		}
		if a.PID == b.PID || !slices.Equal(a.State.Levels, []string{"warning"}) || !slices.Equal(a.State.Subs, []string{"subscribe:test://watched"}) {
			t.Errorf("perses after adoption: pid %s (was %s), levels %v, subscriptions %v; want a new process with [warning] and [test://watched]",
				a.PID, b.PID, a.State.Levels, a.State.Subs)
		}
	}
	for _, d := range []string{"shared", "perses", "remote"} {
		if o := c.owners(d); len(o) != 1 || o[0] == victim {
			t.Errorf("after the kill the %s session is held by %v", d, o)
		}
	}
}
