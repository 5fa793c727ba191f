package peertest

import (
	"bufio"
	"bytes"
	"os"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// runBulkServer is the stdio test server's "bulk" mode: a stdio MCP
// server whose one tool, echo, answers with its text as it came (raw JSON,
// not decoded and encoded again), so that large messages cost the child
// one scan and two copies, even in a test binary built with the race detector (which
// makes encoding/json's work on a 1 MiB message take seconds). It answers
// initialize and ping, and ignores notifications. Large-message tests and
// benchmarks use it: their measure is the gateway's.
func runBulkServer() int {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var line, resp []byte
	for {
		frag, err := in.ReadSlice('\n')
		line = append(line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if m, derr := jsonrpc.Decode(bytes.TrimSpace(line)); derr == nil && m.IsRequest() {
			resp = append(resp[:0], `{"jsonrpc":"2.0","id":`...)
			resp = append(resp, m.ID...)
			switch m.Method {
			case "initialize":
				resp = append(resp, `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"bulk","version":"1"}}}`...)
			case "tools/call":
				text, _, _, ok := jsonrpc.Lookup(m.Params, "arguments", "text")
				if !ok {
					text = []byte(`""`)
				}
				resp = append(resp, `,"result":{"content":[{"type":"text","text":`...)
				resp = append(resp, text...)
				resp = append(resp, `}]}}`...)
			default:
				resp = append(resp, `,"result":{}}`...)
			}
			resp = append(resp, '\n')
			_, _ = out.Write(resp)
			_ = out.Flush()
		}
		line = line[:0]
		if err != nil {
			return 0
		}
	}
}
