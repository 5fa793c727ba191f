package gate

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// BenchmarkGate is the gate's own cost on one tools/call (a fake server
// answering at once), without the rest of the path: pinning only (block,
// the tool approved) and pinning with every detector over the arguments
// and the result, at 64 B and 64 KiB of text in each. BenchmarkGuards in
// internal/gateway measures the whole path.
func BenchmarkGate(b *testing.B) {
	sec, err := guard.NewSecrets(guard.SecretsConfig{})
	if err != nil {
		b.Fatal(err)
	}
	pii, err := guard.NewPII(guard.PIIConfig{})
	if err != nil {
		b.Fatal(err)
	}
	all := []Detector{{"hidden", guard.Hidden{}}, {"markup", guard.Markup{}}, {"secrets", sec}, {"pii", pii}}
	for _, n := range []int{64, 64 << 10} {
		text := strings.Repeat("0123456789abcdef", n/16)
		for _, mode := range []string{"off", "pin", "all"} {
			b.Run(fmt.Sprintf("%dB/%s", n, mode), func(b *testing.B) {
				tool := `{"name":"echo","description":"Echo.","inputSchema":{"type":"object"}}`
				f := &fakeServer{tools: []string{tool}, result: `{"content":[{"type":"text","text":"` + text + `"}]}`}
				s := &Settings{Pinning: guard.Block, Pins: pinsOf(b, tool)}
				if mode == "all" {
					s.Detectors = all
				}
				g := New(f, s, Options{})
				be, _, err := g.Join(context.Background(), &down{}, initReq())
				if err != nil {
					b.Fatal(err)
				}
				if mode == "off" {
					be = fakeBackend{f} // the fake's own cost, to subtract
				}
				req := callReq("echo", `{"text":"`+text+`"}`)
				ask(b, be, context.Background(), req) // lists once
				b.SetBytes(int64(2 * n))
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					f.args = f.args[:0]
					m := ask(b, be, context.Background(), req)
					if jsonrpc.Member(m.Result, "content") == nil {
						b.Fatal(m.Encode())
					}
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// cpuTime is the process's user and system time so far: on a shared,
// loaded machine wall time says more about the neighbours than the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
