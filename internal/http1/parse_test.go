package http1

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestParseHead(t *testing.T) {
	const hd = "POST /up/mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
	for _, tc := range []struct {
		name, in string
		res      int
	}{
		{"minimal", hd + "\r\n", headOK},
		{"typical", hd + "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: 12\r\nMcp-Session-Id: abc\r\n\r\n{}", headOK},
		{"get", "GET /up/mcp HTTP/1.1\r\nHost: h\r\n\r\n", headOK},
		{"delete", "DELETE /up/mcp HTTP/1.1\r\nHost: h\r\n\r\n", headOK},
		{"keep-alive", hd + "Connection: Keep-Alive\r\n\r\n", headOK},
		{"incomplete line", "POST /up/m", headMore},
		{"incomplete head", hd, headMore},
		{"empty", "", headMore},
		{"head method", "HEAD /up/mcp HTTP/1.1\r\nHost: h\r\n\r\n", headLeave},
		{"put prefix", "PUT /", headLeave},
		{"garbage prefix", "\x16\x03\x01", headLeave},
		{"http/1.0", "POST /up/mcp HTTP/1.0\r\nHost: h\r\n\r\n", headLeave},
		{"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", headLeave},
		{"query", "POST /up/mcp?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", headLeave},
		{"escape", "POST /up%2Fx/mcp HTTP/1.1\r\nHost: h\r\n\r\n", headLeave},
		{"absolute form", "POST http://h/up/mcp HTTP/1.1\r\nHost: h\r\n\r\n", headLeave},
		{"bare lf", "POST /up/mcp HTTP/1.1\nHost: h\n\n", headLeave},
		{"bare lf later", hd + "Accept: x\n\r\n", headLeave},
		{"leading crlf", "\r\n" + hd + "\r\n", headLeave},
		{"no host", "POST /up/mcp HTTP/1.1\r\n\r\n", headLeave},
		{"two hosts", hd + "Host: b\r\n\r\n", headLeave},
		{"bad host", "POST /up/mcp HTTP/1.1\r\nHost: a b\r\n\r\n", headLeave},
		{"chunked", hd + "Transfer-Encoding: chunked\r\n\r\n", headLeave},
		{"cl and te", hd + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", headLeave},
		{"two cl", hd + "Content-Length: 3\r\nContent-Length: 3\r\n\r\n", headLeave},
		{"signed cl", hd + "Content-Length: +3\r\n\r\n", headLeave},
		{"empty cl", hd + "Content-Length: \r\n\r\n", headLeave},
		{"huge cl", hd + "Content-Length: 1234567890123456789\r\n\r\n", headLeave},
		{"expect", hd + "Expect: 100-continue\r\n\r\n", headLeave},
		{"upgrade", hd + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", headLeave},
		{"pragma", hd + "Pragma: no-cache\r\n\r\n", headLeave},
		{"obs fold", hd + "Accept: a\r\n b\r\n\r\n", headLeave},
		{"space before colon", hd + "Accept : a\r\n\r\n", headLeave},
		{"empty name", hd + ": a\r\n\r\n", headLeave},
		{"ctl in value", hd + "Accept: a\x01b\r\n\r\n", headLeave},
		{"utf-8 in value", hd + "X-Name: caf\xc3\xa9\r\n\r\n", headLeave},
		{"too many", hd + strings.Repeat("X-A: b\r\n", maxHeaders+1) + "\r\n", headLeave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res := parseHead([]byte(tc.in))
			if res != tc.res {
				t.Fatalf("parseHead(%q) = %d, want %d", tc.in, res, tc.res)
			}
		})
	}
}

func TestParseHeadFields(t *testing.T) {
	in := "POST /up/mcp HTTP/1.1\r\nhost: h:1\r\ncontent-length: 2\r\nACCEPT:  a, b \r\nx-custom-HEADER: v\r\nAccept: c\r\nConnection: close\r\n\r\n{}"
	h, res := parseHead([]byte(in))
	if res != headOK {
		t.Fatalf("res %d", res)
	}
	want := http.Header{"Content-Length": {"2"}, "Accept": {"a, b", "c"}, "X-Custom-Header": {"v"}, "Connection": {"close"}}
	if !reflect.DeepEqual(h.header, want) {
		t.Errorf("header %v, want %v", h.header, want)
	}
	if h.method != "POST" || h.target != "/up/mcp" || h.host != "h:1" || h.contentLength != 2 || !h.close || h.n != len(in)-2 {
		t.Errorf("head %+v", h)
	}
}

// TestParseHeadAllocations: the head of a typical MCP call costs four
// allocations: its string, the header map (two), the values' array, and
// nothing per header name or value.
func TestParseHeadAllocations(t *testing.T) {
	in := []byte("POST /up/mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 120\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: 0123456789abcdef\r\nAccept-Encoding: gzip\r\n\r\n")
	n := testing.AllocsPerRun(100, func() {
		if _, res := parseHead(in); res != headOK {
			t.Fatal("not ok")
		}
	})
	if n > 4 {
		t.Errorf("%v allocations, want at most 4", n)
	}
}

// FuzzParseHead checks the promise parse.go makes: whatever parseHead
// takes, net/http reads the same way (method, target, host, header,
// length, close), and takes it too.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"POST /up/mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}",
		"GET /a/mcp HTTP/1.1\r\nHost: h\r\nAccept: text/event-stream\r\nMcp-Session-Id: x\r\n\r\n",
		"DELETE /a/mcp HTTP/1.1\r\nhOsT: [::1]:80\r\nconnection: close\r\n\r\n",
		"POST /up/mcp HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST /up/mcp HTTP/1.1\r\nHost: h\r\nX:  \t v \t\r\nx: w\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, res := parseHead(in)
		if res != headOK {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(in)))
		if err != nil {
			t.Fatalf("taken, but net/http refuses %q: %v", in, err)
		}
		// ReadRequest refuses two Hosts and keeps Host out of the header
		// map; net/http's server refuses a request without one.
		if req.Host == "" {
			t.Fatalf("%q: taken without a Host", in)
		}
		if req.Method != h.method || req.RequestURI != h.target || req.URL.Path != h.target || req.URL.RawQuery != "" ||
			req.URL.RawPath != "" || req.Host != h.host || req.ContentLength != h.contentLength || req.Close != h.close ||
			req.ProtoMajor != 1 || req.ProtoMinor != 1 {
			t.Fatalf("%q: net/http %s %q %q len %d close %v; parseHead %+v", in, req.Method, req.RequestURI, req.Host,
				req.ContentLength, req.Close, h)
		}
		if len(req.TransferEncoding) != 0 {
			t.Fatalf("%q: taken with Transfer-Encoding %q", in, req.TransferEncoding)
		}
		if !reflect.DeepEqual(map[string][]string(req.Header), map[string][]string(h.header)) {
			t.Fatalf("%q: net/http header %q, parseHead %q", in, req.Header, h.header)
		}
	})
}
