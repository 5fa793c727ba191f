package http1

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve runs s on a loopback listener until the test ends and returns its
// address. fb configures s.Fallback (a plain http.Server answering
// "fallback <path>" unless it sets a handler).
func serve(t *testing.T, h http.Handler, take func(string, string) bool, fb func(*http.Server)) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Served-By", "net/http")
		_, _ = io.WriteString(w, "fallback "+r.URL.Path)
	})}
	if fb != nil {
		fb(srv)
	}
	if take == nil {
		take = func(string, string) bool { return true }
	}
	s := &Server{Handler: h, Take: take, Fallback: srv}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), s
}

// rawConn is a client connection that writes bytes and reads responses.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (rc *rawConn) send(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

// read reads one response, its body whole (after any 1xx).
func (rc *rawConn) read() (*http.Response, string) {
	rc.t.Helper()
	return rc.readFor(http.MethodPost)
}

// readFor reads the response to a request of method.
func (rc *rawConn) readFor(method string) (*http.Response, string) {
	rc.t.Helper()
	resp, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	for err == nil && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(rc.br, &http.Request{Method: method})
	}
	if err != nil {
		rc.t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		rc.t.Fatalf("reading a body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the server closed the connection (a read ends
// in EOF or a reset, not the client's deadline).
func (rc *rawConn) closed() bool {
	_, err := rc.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func post(path, body string, extra ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n" + strings.Join(extra, "") +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestResponsesAsNetHTTP: for handlers that use the ResponseWriter in
// each way the gateway's handlers do (and a few more), the response a
// client reads is net/http's: status, header (Date aside), body, framing
// and keep-alive.
func TestResponsesAsNetHTTP(t *testing.T) {
	big := strings.Repeat("x", 5000)
	mid := strings.Repeat("y", 3000)
	cases := map[string]http.HandlerFunc{
		"sniffed text": func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") },
		"sniffed html": func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html><body>x") },
		"json": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"a":1}`)
		},
		"content-length": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "abcde")
		},
		"content-length flushed": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			_, _ = io.WriteString(w, big)
			w.(http.Flusher).Flush()
		},
		"no content": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		"accepted empty": func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			w.WriteHeader(http.StatusAccepted)
		},
		"not modified":  func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) },
		"nothing":       func(w http.ResponseWriter, r *http.Request) {},
		"error":         func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such thing", http.StatusNotFound) },
		"odd status":    func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(599) },
		"big unflushed": func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, big) },
		"mid unflushed": func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, mid) },
		"small writes": func(w http.ResponseWriter, r *http.Request) {
			for range 100 {
				_, _ = io.WriteString(w, "0123456789012345678901234567890123456789")
			}
		},
		"event stream": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "event: message\ndata: {}\n\n")
			_ = http.NewResponseController(w).Flush()
			_, _ = io.WriteString(w, "data: 2\n\n")
		},
		"flush first": func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "late")
		},
		"connection close": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		},
		"newline in value": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-A", "one\r\ntwo")
			w.Header().Add("X-B", " padded ")
			w.Header()["x-not-canonical"] = []string{"v"}
			_, _ = io.WriteString(w, "ok")
		},
		"date set": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
			_, _ = io.WriteString(w, "d")
		},
		"date suppressed": func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Date"] = nil
			_, _ = io.WriteString(w, "d")
		},
		"header after write": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "a")
			w.Header().Set("X-Late", "1")
		},
		"echo": func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Method", r.Method)
			w.Header().Set("X-Host", r.Host)
			w.Header().Set("X-Len", strconv.FormatInt(r.ContentLength, 10))
			w.Header().Set("X-Accept", strings.Join(r.Header.Values("Accept"), "|"))
			w.Header().Set("X-Close", strconv.FormatBool(r.Close))
			_, _ = w.Write(b)
		},
	}
	reqs := []string{
		post("/a/mcp", `{"jsonrpc":"2.0"}`, "Accept: application/json, text/event-stream\r\n"),
		"GET /a/mcp HTTP/1.1\r\nHost: example:1\r\nAccept: text/event-stream\r\n\r\n",
		post("/a/mcp", "", "Connection: close\r\n"),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			plainAddr := plainServer(t, h)
			fastAddr, _ := serve(t, h, nil, nil)
			for _, req := range reqs {
				pc, fc := dial(t, plainAddr), dial(t, fastAddr)
				pc.send(req)
				fc.send(req)
				want, wantBody := pc.read()
				got, gotBody := fc.read()
				if name == "date set" || name == "date suppressed" {
					if !reflect.DeepEqual(got.Header["Date"], want.Header["Date"]) {
						t.Errorf("Date %q, net/http %q", got.Header["Date"], want.Header["Date"])
					}
				} else if _, err := http.ParseTime(got.Header.Get("Date")); err != nil {
					t.Errorf("Date %q: %v", got.Header.Get("Date"), err)
				}
				delete(got.Header, "Date")
				delete(want.Header, "Date")
				if got.StatusCode != want.StatusCode || !reflect.DeepEqual(got.Header, want.Header) || gotBody != wantBody ||
					!reflect.DeepEqual(got.TransferEncoding, want.TransferEncoding) || got.ContentLength != want.ContentLength ||
					got.Close != want.Close {
					t.Errorf("%q:\ngot  %d %v te %v cl %d close %v %q\nwant %d %v te %v cl %d close %v %q", req,
						got.StatusCode, got.Header, got.TransferEncoding, got.ContentLength, got.Close, trim(gotBody),
						want.StatusCode, want.Header, want.TransferEncoding, want.ContentLength, want.Close, trim(wantBody))
				}
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// plainServer serves h with net/http alone.
func plainServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestShortContentLength: a handler that writes less than the length it
// declared has its connection closed after what it wrote, as net/http
// does: the client sees the body cut short instead of waiting.
func TestShortContentLength(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, "abc")
	})
	addr, _ := serve(t, h, nil, nil)
	rc := dial(t, addr)
	rc.send(post("/a/mcp", ""))
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != "abc" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("body %q, %v; want abc cut short", b, err)
	}
}

// TestKeepAliveAndPipelining: requests on one connection, sent one by
// one and several in one write, are answered in order on it.
func TestKeepAliveAndPipelining(t *testing.T) {
	var conns sync.Map
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	addr, _ := serve(t, h, nil, func(s *http.Server) {
		s.ConnState = func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Store(c, true)
			}
		}
	})
	rc := dial(t, addr)
	for i := range 3 {
		rc.send(post("/a/mcp", "one-"+strconv.Itoa(i)))
		if _, body := rc.read(); body != "one-"+strconv.Itoa(i) {
			t.Fatalf("body %q", body)
		}
	}
	rc.send(post("/a/mcp", "p1") + post("/a/mcp", "p2") + post("/a/mcp", "p3"))
	for _, want := range []string{"p1", "p2", "p3"} {
		if _, body := rc.read(); body != want {
			t.Fatalf("body %q, want %q", body, want)
		}
	}
	n := 0
	conns.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestHandOver: a request that is not taken (by Take, or by its shape)
// goes to the fallback server with its bytes intact, on the same
// connection, which net/http serves from then on; bad requests get
// net/http's answer.
func TestHandOver(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Served-By", "http1")
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	take := func(method, path string) bool { return strings.HasSuffix(path, "/mcp") }
	fb := func(s *http.Server) {
		s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Served-By", "net/http")
			b, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		})
	}
	addr, _ := serve(t, h, take, fb)
	for _, tc := range []struct {
		name, req, want string
		method          string // of req, when not POST
		closes          bool   // net/http closes the connection after it
	}{
		{"other path", post("/healthz", "x"), "POST /healthz x", "", false},
		{"query", "GET /a/mcp?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", "GET /a/mcp?x=1 ", "", false},
		{"chunked body", "POST /a/mcp HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "POST /a/mcp abc", "", false},
		{"expect", "POST /a/mcp HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", "POST /a/mcp hi", "", false},
		{"http/1.0", "POST /a/mcp HTTP/1.0\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi", "POST /a/mcp hi", "", true},
		{"long head", "POST /a/mcp HTTP/1.1\r\nHost: h\r\nX-Big: " + strings.Repeat("b", 6000) + "\r\nContent-Length: 2\r\n\r\nhi", "POST /a/mcp hi", "", false},
		{"head method", "HEAD /a/mcp HTTP/1.1\r\nHost: h\r\n\r\n", "", http.MethodHead, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dial(t, addr)
			rc.send(post("/a/mcp", "first")) // served here, then the odd one
			if resp, body := rc.read(); body != "first" || resp.Header.Get("X-Served-By") != "http1" {
				t.Fatalf("first: %q by %q", body, resp.Header.Get("X-Served-By"))
			}
			rc.send(tc.req)
			resp, body := rc.readFor(cmp.Or(tc.method, http.MethodPost))
			if resp.Header.Get("X-Served-By") != "net/http" || body != tc.want {
				t.Fatalf("%q by %q, want %q by net/http", body, resp.Header.Get("X-Served-By"), tc.want)
			}
			if tc.closes {
				return
			}
			rc.send(post("/a/mcp", "after")) // the connection is net/http's now
			if resp, body := rc.read(); resp.Header.Get("X-Served-By") != "net/http" || body != "POST /a/mcp after" {
				t.Fatalf("after: %q by %q", body, resp.Header.Get("X-Served-By"))
			}
		})
	}
	for _, tc := range []struct{ name, req string }{
		{"no host", "POST /a/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n"},
		{"two lengths", "POST /a/mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
		{"two hosts", "POST /a/mcp HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n"},
		{"bad name", "POST /a/mcp HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n"},
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dial(t, addr)
			rc.send(tc.req)
			if resp, _ := rc.read(); resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want net/http's 400", resp.StatusCode)
			}
		})
	}
}

// TestClientGoneCancels: a request still running after WatchDelay has its
// context cancelled when the client closes the connection; bytes that
// the client sends meanwhile (a pipelined request) are kept for the next
// request instead.
func TestClientGoneCancels(t *testing.T) {
	watching := make(chan struct{}, 10)
	watched := make(chan error, 10)
	testHookWatch = func() { watching <- struct{}{} }
	testHookWatched = func(err error) { watched <- err }
	t.Cleanup(func() { testHookWatch, testHookWatched = nil, nil })
	release := make(chan struct{})
	ended := make(chan error, 10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "wait" {
			select {
			case <-r.Context().Done():
				ended <- r.Context().Err()
				return
			case <-release:
				ended <- nil
			}
		}
		_, _ = w.Write(b)
	})
	addr, _ := serve(t, h, nil, nil)

	t.Run("pipelined bytes kept", func(t *testing.T) {
		rc := dial(t, addr)
		rc.send(post("/a/mcp", "wait"))
		<-watching
		rc.send(post("/a/mcp", "next"))
		// The watch ends on the byte it read; the handler still waits.
		if err := <-watched; err != nil {
			t.Fatalf("watch read: %v", err)
		}
		release <- struct{}{}
		if err := <-ended; err != nil {
			t.Fatalf("context ended: %v", err)
		}
		for _, want := range []string{"wait", "next"} {
			if _, body := rc.read(); body != want {
				t.Fatalf("body %q, want %q", body, want)
			}
		}
	})
	t.Run("part of the next head", func(t *testing.T) {
		rc := dial(t, addr)
		rc.send(post("/a/mcp", "wait"))
		<-watching
		next := post("/a/mcp", "next")
		rc.send(next[:20]) // the watch reads it; the deadline that stopped the watch must not cut it
		if err := <-watched; err != nil {
			t.Fatalf("watch read: %v", err)
		}
		release <- struct{}{}
		if err := <-ended; err != nil {
			t.Fatalf("context ended: %v", err)
		}
		if _, body := rc.read(); body != "wait" {
			t.Fatalf("body %q", body)
		}
		rc.send(next[20:])
		if _, body := rc.read(); body != "next" {
			t.Fatalf("body %q, want next", body)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		rc := dial(t, addr)
		rc.send(post("/a/mcp", "wait"))
		<-watching
		_ = rc.c.Close()
		if err := <-watched; err == nil {
			t.Fatal("the watch read a byte from a closed connection")
		}
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("handler ended with %v, want its context cancelled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the request's context was not cancelled")
		}
	})
}

// TestTimeouts: the fallback server's timeouts bound connections served
// here: a head that stops arriving, a body that stops arriving, a
// kept-alive connection with no request.
func TestTimeouts(t *testing.T) {
	bodyErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if err != nil {
			bodyErr <- err
			http.Error(w, "stalled", http.StatusRequestTimeout)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	addr, _ := serve(t, h, nil, func(s *http.Server) {
		s.ReadHeaderTimeout = 100 * time.Millisecond
		s.ReadTimeout = 200 * time.Millisecond
		s.IdleTimeout = 300 * time.Millisecond
	})
	t.Run("head", func(t *testing.T) {
		rc := dial(t, addr)
		rc.send("POST /a/mcp HTTP/1.1\r\nHost: h\r\n")
		if !rc.closed() {
			t.Fatal("a stalled head kept its connection")
		}
	})
	t.Run("body", func(t *testing.T) {
		rc := dial(t, addr)
		rc.send("POST /a/mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nab")
		var ne net.Error
		if err := <-bodyErr; !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("body read: %v, want a timeout", err)
		}
		if resp, _ := rc.read(); resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
			t.Fatalf("status %d close %v", resp.StatusCode, resp.Close)
		}
	})
	t.Run("idle", func(t *testing.T) {
		rc := dial(t, addr)
		for range 3 {
			rc.send(post("/a/mcp", "x"))
			if _, body := rc.read(); body != "ok" {
				t.Fatalf("body %q", body)
			}
		}
		if !rc.closed() {
			t.Fatal("an idle connection was kept")
		}
	})
}

// TestUnreadBody: a small body the handler did not read is discarded and
// the connection kept; a large one closes it (Connection: close).
func TestUnreadBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(w, "no")
	})
	addr, _ := serve(t, h, nil, nil)
	rc := dial(t, addr)
	rc.send(post("/a/mcp", "ignored body"))
	if resp, _ := rc.read(); resp.Close {
		t.Fatal("closed after a small unread body")
	}
	rc.send(post("/a/mcp", "x"))
	if _, body := rc.read(); body != "no" {
		t.Fatalf("body %q", body)
	}
	go func() { // the client writes on while the server answers
		_, _ = io.WriteString(rc.c, post("/a/mcp", strings.Repeat("z", maxDiscard+1)))
	}()
	if resp, _ := rc.read(); !resp.Close {
		t.Fatal("kept after a large unread body")
	}
	if !rc.closed() {
		t.Fatal("connection not closed")
	}
}

// TestPanic: a handler's panic closes its connection and is logged; the
// server goes on.
func TestPanic(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			panic("boom")
		}
		_, _ = io.WriteString(w, "fine")
	})
	addr, _ := serve(t, h, nil, func(s *http.Server) {
		s.ErrorLog = log.New(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logged.Write(p)
		}), "", 0)
	})
	rc := dial(t, addr)
	rc.send("DELETE /a/mcp HTTP/1.1\r\nHost: h\r\n\r\n")
	if !rc.closed() {
		t.Fatal("connection kept after a panic")
	}
	mu.Lock()
	if !strings.Contains(logged.String(), "panic serving") || !strings.Contains(logged.String(), "boom") {
		t.Errorf("log %q", logged.String())
	}
	mu.Unlock()
	rc = dial(t, addr)
	rc.send(post("/a/mcp", ""))
	if _, body := rc.read(); body != "fine" {
		t.Fatalf("body %q", body)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestShutdown: Shutdown closes idle connections at once, lets a request
// in progress finish (Connection: close) and makes Serve return.
func TestShutdown(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "wait" {
			close(started)
			<-release
		}
		_, _ = w.Write(b)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, Take: func(string, string) bool { return true }, Fallback: &http.Server{}}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	idle, busy := dial(t, addr), dial(t, addr)
	idle.send(post("/a/mcp", "x"))
	idle.read()
	busy.send(post("/a/mcp", "wait"))
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if !idle.closed() {
		t.Fatal("idle connection kept")
	}
	close(release)
	resp, body := busy.read()
	if body != "wait" || !resp.Close {
		t.Fatalf("in progress: %q close %v", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

// TestResponseController: deadlines and flushing through
// http.ResponseController, as the gateway's fronts use them.
func TestResponseController(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for _, err := range []error{rc.SetReadDeadline(time.Now().Add(time.Minute)), rc.SetWriteDeadline(time.Now().Add(time.Minute)), rc.Flush()} {
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
		}
		_, _ = io.WriteString(w, "ok")
	})
	addr, _ := serve(t, h, nil, nil)
	rc := dial(t, addr)
	for range 2 {
		rc.send(post("/a/mcp", "x"))
		if resp, body := rc.read(); resp.StatusCode != 200 || body != "ok" || resp.TransferEncoding == nil {
			t.Fatalf("%d %q te %v", resp.StatusCode, body, resp.TransferEncoding)
		}
	}
}

// TestConnStates: the fallback's ConnState hook hears of connections
// served here as net/http reports its own (the gateway's connection cap
// closes only idle ones): new, then active and idle per request, closed.
func TestConnStates(t *testing.T) {
	var mu sync.Mutex
	var states []http.ConnState
	closed := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	addr, _ := serve(t, h, nil, func(s *http.Server) {
		s.ConnState = func(c net.Conn, st http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			states = append(states, st)
			if st == http.StateClosed {
				close(closed)
			}
		}
	})
	rc := dial(t, addr)
	for range 2 {
		rc.send(post("/a/mcp", "x"))
		rc.read()
	}
	_ = rc.c.Close()
	<-closed
	mu.Lock()
	defer mu.Unlock()
	want := []http.ConnState{http.StateNew, http.StateActive, http.StateIdle, http.StateActive, http.StateIdle, http.StateClosed}
	if !reflect.DeepEqual(states, want) {
		t.Fatalf("states %v, want %v", states, want)
	}
}

// FuzzServe writes arbitrary bytes to a connection, then closes its
// sending side: whatever they are, the server (or net/http, for what it
// hands over) answers and closes within the test's deadline, never
// hangs or panics, and serves the next connection.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		post("/a/mcp", `{"jsonrpc":"2.0"}`),
		post("/a/mcp", "one") + post("/a/mcp", "two") + "GET /x HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /a/mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nshort",
		"POST /a/mcp HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
		"POST /a/mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhiGARBAGE\r\n\r\n",
		"GET /a/mcp HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("x", 5000) + "\r\n\r\n",
		"\x00\x01\x02",
		"POST /a/mcp HTTP/1.1\r\n",
	} {
		f.Add([]byte(s))
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	s := &Server{Handler: h, Take: func(_, p string) bool { return strings.HasSuffix(p, "/mcp") },
		Fallback: &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second,
			ErrorLog: log.New(io.Discard, "", 0)}}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	f.Cleanup(func() {
		_ = s.Close()
		<-served
	})
	addr := ln.Addr().String()
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(in); err != nil {
			return // the server closed early: fine
		}
		_ = c.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, c); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("%q: the connection neither answered nor closed", in)
			}
		}
		rc := dial(t, addr)
		rc.send(post("/a/mcp", "alive"))
		if _, body := rc.read(); body != "alive" {
			t.Fatalf("after %q: body %q", in, body)
		}
	})
}
