package reqbody

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/bigbuf"
)

// blockingBody fails the test if it is read: a declared oversized body
// must be refused unread.
type blockingBody struct{ t *testing.T }

func (b blockingBody) Read([]byte) (int, error) {
	b.t.Error("the body was read")
	return 0, io.EOF
}
func (blockingBody) Close() error { return nil }

func TestRead(t *testing.T) {
	// Declared over the limit: refused without a read.
	r := httptest.NewRequest("POST", "/", nil)
	r.Body, r.ContentLength = blockingBody{t}, 2<<20
	_, err := Read(httptest.NewRecorder(), r, 1<<20)
	var tooBig *http.MaxBytesError
	if !errors.As(err, &tooBig) || tooBig.Limit != 1<<20 {
		t.Fatalf("declared 2 MiB, limit 1 MiB: %v, want a MaxBytesError", err)
	}
	// Undeclared (chunked) over the limit: found while reading.
	r = httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("a", 1000)))
	r.ContentLength = -1
	if _, err := Read(httptest.NewRecorder(), r, 999); !errors.As(err, &tooBig) {
		t.Fatalf("1000 bytes, limit 999: %v, want a MaxBytesError", err)
	}
	// A body larger than the first buffer grows it; one within it is read
	// without growth.
	for _, n := range []int{0, 10, initialCap - 1, initialCap, 3*initialCap + 7, 64<<10 + 700} {
		body := strings.Repeat("b", n)
		for _, declared := range []int64{int64(n), -1} {
			r = httptest.NewRequest("POST", "/", strings.NewReader(body))
			r.ContentLength = declared
			got, err := Read(httptest.NewRecorder(), r, 1<<20)
			if err != nil || string(got) != body {
				t.Fatalf("%d bytes (declared %d): %d bytes, %v", n, declared, len(got), err)
			}
			if declared >= 0 && cap(got) != n+1 {
				// Within the first buffer, or grown fourfold up to the
				// declared length: never past it.
				t.Errorf("%d declared bytes: buffer of %d, want %d", n, cap(got), n+1)
			}
		}
	}
	// The first buffer is capped whatever the declared length.
	r = httptest.NewRequest("POST", "/", strings.NewReader("short"))
	r.ContentLength = 16 << 20
	if got, err := Read(httptest.NewRecorder(), r, 16<<20); err != nil || cap(got) > initialCap {
		t.Fatalf("5 of 16 MiB declared: %d-byte buffer, %v; want at most %d", cap(got), err, initialCap)
	}
}

// A body of declared length larger than the first buffer costs one buffer
// of its exact length: 64 KiB is read with one allocation (the first
// buffer, 16 KiB, comes from the pool and goes back to it), not three (16,
// 64, 64 KiB + 1) or append's four; 1 MiB with none once its buffer is
// given back to bigbuf, its steps of 16, 64 and 256 KiB pooled.
func TestReadGrowthAllocations(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's sync.Pool drops buffers at random")
	}
	// No garbage collection empties the pool meanwhile.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, n := range []int{64 << 10, 1<<20 + 150} {
		body := bytes.Repeat([]byte("c"), n)
		rd := bytes.NewReader(body)
		r := httptest.NewRequest("POST", "/", nil)
		r.Body = io.NopCloser(rd)
		r.ContentLength = int64(len(body))
		w := httptest.NewRecorder()
		// A body of pooledFrom or more is read into a bigbuf buffer,
		// given back here: it then costs no allocation at all.
		pooled := n+1 >= pooledFrom
		want := 1.0
		if pooled {
			want = 0
		}
		allocs := testing.AllocsPerRun(20, func() {
			rd.Reset(body)
			got, err := Read(w, r, 2<<20)
			wantCap := len(body) + 1
			if pooled {
				wantCap = bigbuf.ClassSize(wantCap)
			}
			if err != nil || len(got) != len(body) || cap(got) != wantCap {
				t.Fatalf("read %d bytes into %d, %v", len(got), cap(got), err)
			}
			if pooled {
				bigbuf.Put(got)
			}
		})
		if allocs != want {
			t.Errorf("%d-byte body: %v allocations, want %v", n, allocs, want)
		}
	}
}
