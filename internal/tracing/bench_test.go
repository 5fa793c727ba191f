package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// BenchmarkTracingRequest is one traced request's whole cost in this
// process: the server span, one upstream call's client span and the
// traceparent spliced into its params, and the export of both to an OTLP
// receiver on loopback that discards them.
func BenchmarkTracingRequest(b *testing.B) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer rcv.Close()
	tr, err := New(Options{Endpoint: rcv.URL, SampleRatio: 1, ServiceName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	hr := httptest.NewRequest("POST", "/d/mcp", nil)
	req, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"0123456789abcdef0123456789abcdef"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	resp, _ := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`))
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		q := tr.Start(hr, now)
		out, c := q.Upstream("d", "0d1e2f30-aaaa-4bbb-8ccc-000000000000", req)
		if out == req {
			b.Fatal("traceparent not spliced")
		}
		c.End(resp)
		q.End(&audit.Record{Time: now, HTTPMethod: "POST", Path: "/d/mcp", MCPMethod: "tools/call", Destination: "d",
			Session: "0d1e2f30-aaaa-4bbb-8ccc-000000000000", Status: 200, RPCID: req.ID})
	}
	b.StopTimer()
	if err := tr.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
}
