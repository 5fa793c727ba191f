package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkEchoLarge measures large tools/call messages (a base64
// screenshot, a whole file) through the whole path: HTTP in, the JSON-RPC
// scan and id rewrite, the stdio child's pipe both ways, and the answer
// out. The child is the "bulk" test server (peertest), which echoes the text without
// decoding it (its cost is small and the same for every change), so the
// numbers are the gateway's; request and answer are both about size
// bytes, as in the shared harness's LARGE settings.
//
// c1 is one call in flight, c16 sixteen, each on its own session and kept-
// alive connection of a raw client that allocates nothing per call, so
// allocs/op and B/op are the gateway's own; cpu-µs/op is this process's
// CPU per call (gateway and client, not the child).
//
//	go test -run '^$' -bench EchoLarge -benchmem -count 6 ./internal/gateway/
func BenchmarkEchoLarge(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
		for _, conc := range []int{1, 16} {
			b.Run(fmt.Sprintf("size=%dK/c%d", size>>10, conc), func(b *testing.B) {
				benchLarge(b, size, conc)
			})
		}
	}
}

func benchLarge(b *testing.B, size, conc int) {
	url := bulkGateway(b)
	client := &http.Client{}
	clients := make([]*rawClient, conc)
	for i := range clients {
		clients[i] = dialRaw(b, url, benchInit(b, client, url))
		clients[i].text = largeText(size)
	}
	client.CloseIdleConnections()
	b.SetBytes(int64(2 * size))
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[string]
	cpu0 := processCPU(b)
	b.ResetTimer()
	for _, rc := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) || failed.Load() != nil {
					return
				}
				if err := rc.callLarge(n, size); err != "" {
					failed.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if e := failed.Load(); e != nil {
		b.Fatal(*e)
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// largeText is an echo text of size bytes, printable and free of escapes,
// as base64 is.
func largeText(size int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	t := make([]byte, size)
	for i := range t {
		t[i] = alphabet[(i*7+i/64)%len(alphabet)]
	}
	return string(t)
}

// callLarge sends an echo of c.text with id and checks the answer: its id
// (the gateway rewrote it twice) and its length. It returns a failure, or
// "" (a benchmark's goroutine other than its own may not call Fatal).
func (c *rawClient) callLarge(id int64, size int) (failure string) {
	defer func() {
		if r := recover(); r != nil {
			failure = fmt.Sprint(r)
		}
	}()
	resp := c.call(panicTB{}, id)
	const prefix = `{"jsonrpc":"2.0","id":`
	var digits [20]byte
	want := strconv.AppendInt(digits[:0], id, 10)
	if !bytes.HasPrefix(resp, []byte(prefix)) || !bytes.HasPrefix(resp[len(prefix):], want) || len(resp) < size {
		return fmt.Sprintf("answer to %d: %d bytes starting %.80s", id, len(resp), resp)
	}
	return ""
}

// panicTB lets rawClient.call, written for the benchmark's own goroutine,
// run on others: a failure panics, and callLarge recovers it.
type panicTB struct{ testing.TB }

func (panicTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (panicTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (panicTB) Helper()                           {}

// bulkGateway serves one stdio destination d, shared, whose child is the
// bulk test server, and returns its endpoint's URL.
func bulkGateway(b *testing.B) string {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
max_sessions: 100
metrics: {enabled: false}
ui: {enabled: false}
destinations:
  d:
    type: stdio
    command: [%q]
    isolation: shared
    env: {SWITCHBOARD_TEST_SERVER: bulk, GORACE: atexit_sleep_ms=0}
`, exe)
	return serveBench(b, yaml) + "/d/mcp"
}
