package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/guard"
)

// BenchmarkGuards is BenchmarkEcho's c1 case (one call in flight, the raw
// client, observability off) with guards off, with pinning only (block,
// the echo tool approved: one digest lookup per call) and with pinning and
// every detector (hidden, markup, secrets, pii over the arguments and the
// result, action monitor), at the shared harness's 64 B and at 64 KiB of
// echoed text. Compare calls/s (ns/op) and cpu-µs/op of the guarded cases
// with guards=off:
//
//	go test -run '^$' -bench Guards -count 6 ./internal/gateway/ > guards.txt
//	benchstat -col /guards guards.txt
func BenchmarkGuards(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"64B", 64}, {"64KiB", 64 << 10}} {
		for _, mode := range []string{"off", "pin", "all"} {
			b.Run(size.name+"/guards="+mode, func(b *testing.B) {
				url := guardsGateway(b, mode)
				rc := dialRaw(b, url, benchInit(b, &http.Client{}, url))
				rc.text = strings.Repeat("0123456789abcdef", size.n/16)
				rc.want = []byte(`"` + rc.text + `"`)
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				cpu0 := processCPU(b)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if resp := rc.call(b, int64(i+1)); !bytes.Contains(resp, rc.want) {
						b.Fatalf("unexpected answer %.200s", resp)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// guardsGateway serves the test binary's plain server as /d/mcp with the
// guards of mode, its tools approved in a pin file beside the config, and
// returns the endpoint's URL.
func guardsGateway(b *testing.B, mode string) string {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	pins := filepath.Join(b.TempDir(), "bench.pins.json")
	guards := ""
	switch mode {
	case "pin":
		guards = fmt.Sprintf("guards: {pins: %q, defaults: {pinning: block}}", pins)
	case "all":
		guards = fmt.Sprintf("guards: {pins: %q, defaults: {pinning: block, detectors: [hidden, markup, secrets, pii]}}", pins)
	}
	yml := fmt.Sprintf(`listen: 127.0.0.1:0
metrics: {enabled: false}
ui: {enabled: false}
max_message_bytes: 4MiB
%s
destinations:
  d:
    type: stdio
    command: [%q]
    env: {SWITCHBOARD_TEST_SERVER: plain, GORACE: atexit_sleep_ms=0}
`, guards, exe)
	cfg, err := config.Parse([]byte(yml), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	if cfg.Guards != nil { // approve what the server lists, as switchboard pin --approve does
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := gateway.ListTools(ctx, cfg, "d", nil)
		if err != nil {
			b.Fatal(err)
		}
		var defs []guard.Definition
		for _, t := range l.Tools {
			d, err := guard.Define(t)
			if err != nil {
				b.Fatal(err)
			}
			defs = append(defs, d)
		}
		pf := &guard.PinFile{}
		guard.Approve(pf.Server("d"), defs, l.Instructions, time.Now())
		if err := guard.SavePins(cfg.Guards.Pins, pf); err != nil {
			b.Fatal(err)
		}
	}
	return serveBenchOpts(b, yml, gateway.Options{}) + "/d/mcp"
}
