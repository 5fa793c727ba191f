package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/cluster/clustertest"
)

// BenchmarkClusterHop measures the gateway CPU a call costs through a
// forwarding hop against the same call sent to the session's owner
// (issue 24: "CPU per call through a forwarding hop vs direct"). Two
// replicas (the built binary, as in production) share a redis-server; 16
// sessions of a stdio destination (shared isolation, the test server's
// echo) are minted by r1; about 16 calls are in flight over net/http's
// client. direct sends them to r1; hop sends them to r2, which forwards
// each to r1. The metric is the replicas' CPU time (user and system, from
// /proc; not the stdio child's, not the client's) per call, both replicas
// summed, and each replica's part:
//
//	go test -c -o /tmp/gw.test ./internal/gateway/ && cd internal/gateway &&
//	for i in 1 2 3 4 5; do nice -n 10 /tmp/gw.test -test.run '^$' -test.bench ClusterHop -test.benchtime 5000x; done
//
// Each run starts its own replicas and measures direct then hop; take
// the medians of the interleaved runs (docs/cluster.md has them). With
// SWITCHBOARD_BENCH_PROFILE=dir each replica writes its CPU profile to
// dir/<id>.prof when it stops.
func BenchmarkClusterHop(b *testing.B) {
	bin := clusterBinary(b)
	redis := clustertest.StartRedis(b)
	tag := newTag(b)
	dir := b.TempDir()
	bases := make([]string, 2)
	procs := make([]*clustertest.Process, 2)
	for i := range 2 {
		id, port := fmt.Sprintf("r%d", i+1), clustertest.FreePort(b)
		top := fmt.Sprintf(`listen: 127.0.0.1:%d
max_sessions: 100
cluster:
  replica_id: %s
  advertise: 127.0.0.1:%d
  keys: ["%s"]
  redis: {url: "redis://%s/0"}
`, port, id, port, clusterKeyNew, redis.Addr)
		cfg := filepath.Join(dir, id+".yaml")
		if err := os.WriteFile(cfg, []byte(configYAML(b, tag, top, dest{name: "d", mode: "plain"})), 0o600); err != nil {
			b.Fatal(err)
		}
		argv := []string{bin, "serve", "--config", cfg}
		if d := os.Getenv("SWITCHBOARD_BENCH_PROFILE"); d != "" {
			argv = append(argv, "--cpuprofile", filepath.Join(d, id+".prof")) // written when it stops
		}
		procs[i] = clustertest.Start(b, "switchboard "+id, argv, dir, "switchboard listening")
		bases[i] = "http://127.0.0.1:" + strconv.Itoa(port) + "/d/mcp"
	}
	b.Cleanup(func() {
		for _, p := range procs {
			p.Stop()
		}
		waitGone(b, 10*time.Second, procsWithEnv(envServerTag+"="+tag)...)
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	ids := make([]string, 16)
	for i := range ids {
		ids[i] = benchInit(b, client, bases[0]) // r1 owns them all
	}
	for _, mode := range []string{"direct", "hop"} {
		b.Run(mode, func(b *testing.B) {
			url := bases[0]
			if mode == "hop" {
				url = bases[1]
			}
			for _, sid := range ids { // warm: connections, the hop's pool
				benchPost(b, client, url, sid, `{"jsonrpc":"2.0","id":0,"method":"ping"}`)
			}
			var next, rid atomic.Int64
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			cpu0 := []time.Duration{procCPU(b, procs[0].PID()), procCPU(b, procs[1].PID())}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				sid := ids[int(next.Add(1))%len(ids)]
				for pb.Next() {
					n := rid.Add(1)
					body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, n)
					if resp := benchPost(b, client, url, sid, body); !strings.Contains(string(resp), `"hello"`) {
						b.Errorf("unexpected answer %s", resp)
						return
					}
				}
			})
			b.StopTimer()
			owner := procCPU(b, procs[0].PID()) - cpu0[0]
			hop := procCPU(b, procs[1].PID()) - cpu0[1]
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			b.ReportMetric(per(owner+hop), "gw-cpu-µs/op")
			b.ReportMetric(per(owner), "owner-cpu-µs/op")
			b.ReportMetric(per(hop), "hop-cpu-µs/op")
		})
	}
}

// procCPU is the CPU time (user and system, all threads, not its
// children) process pid has used, from /proc/pid/stat (in clock ticks,
// 100 a second on Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// pid (comm) state ppid …: utime and stime are fields 14 and 15,
	// the 12th and 13th after the command's closing parenthesis.
	i := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(ut+st) * (time.Second / 100)
}
