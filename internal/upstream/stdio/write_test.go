package stdio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
)

// gateWriter is a stdin whose first Write blocks until release is closed,
// recording every Write it gets.
type gateWriter struct {
	entered chan struct{} // closed when the first Write starts
	release chan struct{}
	fail    error

	mu     sync.Mutex
	writes [][]byte
}

func (g *gateWriter) Write(b []byte) (int, error) {
	g.mu.Lock()
	first := len(g.writes) == 0
	g.writes = append(g.writes, bytes.Clone(b))
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	if g.fail != nil {
		return 0, g.fail
	}
	return len(b), nil
}

func (g *gateWriter) Close() error { return nil }

func newTestProcess(stdin io.WriteCloser) *Process {
	p := &Process{stdin: stdin, done: make(chan struct{})}
	p.wcond.L = &p.wmu
	return p
}

type line string

func (l line) AppendTo(b []byte) []byte { return append(b, l...) }

// Lines queued while a write is in progress go out together in the next
// write, whole, each on its own line, the first writer's first; every
// caller returns only once its line is written.
func TestWriteGroupCommit(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	p := newTestProcess(g)
	first := make(chan error, 1)
	go func() { first <- p.WriteFrom(line(`{"n":0}`)) }()
	<-g.entered // the first line is being written, and blocks there

	const n = 10
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { errs <- p.WriteFrom(line(fmt.Sprintf("{\"n\":%d,\n\"pretty\":true}", i))) }()
	}
	// Wait until all ten are queued behind the write in progress.
	for {
		p.wmu.Lock()
		q := p.queued
		p.wmu.Unlock()
		if q == n+1 {
			break
		}
		select {
		case err := <-errs:
			t.Fatalf("a queued write returned (%v) before the write in progress ended", err)
		default:
		}
		runtime.Gosched()
	}
	close(g.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(g.writes) != 2 {
		t.Fatalf("%d writes for %d lines, want 2 (the first, then the ten queued meanwhile)", len(g.writes), n+1)
	}
	if string(g.writes[0]) != "{\"n\":0}\n" {
		t.Fatalf("first write %q", g.writes[0])
	}
	lines := bytes.Split(bytes.TrimSuffix(g.writes[1], []byte("\n")), []byte("\n"))
	seen := map[string]bool{}
	for _, l := range lines {
		seen[string(l)] = true
	}
	for i := 1; i <= n; i++ {
		if want := fmt.Sprintf(`{"n":%d, "pretty":true}`, i); !seen[want] {
			t.Fatalf("line %q missing (a line break in a message becomes a space) from %q", want, g.writes[1])
		}
	}
}

// A failed write fails its caller and every caller queued behind it, and
// every later one.
func TestWriteGroupCommitError(t *testing.T) {
	broken := errors.New("broken pipe")
	g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{}), fail: broken}
	p := newTestProcess(g)
	first := make(chan error, 1)
	go func() { first <- p.Write([]byte(`{"n":0}`)) }()
	<-g.entered
	queued := make(chan error, 1)
	go func() { queued <- p.Write([]byte(`{"n":1}`)) }()
	for {
		p.wmu.Lock()
		q := p.queued
		p.wmu.Unlock()
		if q == 2 {
			break
		}
		runtime.Gosched()
	}
	close(g.release)
	for _, c := range []chan error{first, queued} {
		if err := <-c; !errors.Is(err, broken) {
			t.Fatalf("error %v, want one wrapping %v", err, broken)
		}
	}
	if err := p.Write([]byte(`{"n":2}`)); !errors.Is(err, broken) {
		t.Fatalf("write after the failure: %v", err)
	}
	if len(g.writes) != 1 {
		t.Fatalf("%d writes, want 1: nothing is written after the failure", len(g.writes))
	}
}

// While a write is in progress, a batch takes lines only until it holds
// maxBatch bytes; later callers wait for the write instead of growing it
// without bound. Every line still goes out whole, once.
func TestWriteBatchBound(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	p := newTestProcess(g)
	first := make(chan error, 1)
	go func() { first <- p.WriteFrom(line(`{"n":0}`)) }()
	<-g.entered

	const n = 4
	big := bytes.Repeat([]byte("x"), 40<<10) // two fill a batch
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { errs <- p.WriteFrom(line(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, big))) }()
	}
	// Two lines join the batch; the other two wait for room.
	for {
		p.wmu.Lock()
		q, h, size := p.queued, p.held, len(p.wbuf)
		p.wmu.Unlock()
		if q == 3 && h == 2 {
			if size > maxBatch+len(big)+64 {
				t.Fatalf("batch of %d bytes while a write is in progress", size)
			}
			break
		}
		if q > 3 {
			t.Fatalf("%d lines queued behind the write in progress, want 2", q-1)
		}
		runtime.Gosched()
	}
	close(g.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for _, w := range g.writes {
		for _, l := range bytes.Split(bytes.TrimSuffix(w, []byte("\n")), []byte("\n")) {
			k, _, _ := bytes.Cut(l, []byte(","))
			seen[string(k)]++
		}
	}
	for i := 1; i <= n; i++ {
		if k := fmt.Sprintf(`{"n":%d`, i); seen[k] != 1 {
			t.Fatalf("line %d written %d times", i, seen[k])
		}
	}
}

// around is a message whose large member is payload (as a
// *jsonrpc.Message's params): {"p":PAYLOAD}.
type around struct{ payload []byte }

func (a around) AppendTo(b []byte) []byte {
	return append(append(append(b, `{"p":`...), a.payload...), '}')
}

func (a around) LargestMember() int { return len(a.payload) }

func (a around) AppendAround(dst []byte, min int) ([]byte, []byte, int) {
	if len(a.payload) < min {
		return a.AppendTo(dst), nil, 0
	}
	dst = append(dst, `{"p":`...)
	return append(dst, '}'), a.payload, len(dst)
}

// A large message is written from its own buffer, after the lines queued
// before it and in the same turn, and is not copied; one whose payload
// holds a line break is copied, the break made a space.
func TestWriteAround(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	p := newTestProcess(g)
	first := make(chan error, 1)
	go func() { first <- p.WriteFrom(line(`{"n":0}`)) }()
	<-g.entered
	queued := make(chan error, 1)
	go func() { queued <- p.WriteFrom(line(`{"n":1}`)) }()
	for {
		p.wmu.Lock()
		q := p.queued
		p.wmu.Unlock()
		if q == 2 {
			break
		}
		runtime.Gosched()
	}
	payload := []byte(`"` + string(bytes.Repeat([]byte("x"), minAround)) + `"`)
	large := make(chan error, 1)
	go func() { large <- p.WriteFrom(around{payload}) }()
	close(g.release)
	for _, c := range []chan error{first, queued, large} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	var all []byte
	for _, w := range g.writes {
		all = append(all, w...)
	}
	want := "{\"n\":0}\n{\"n\":1}\n{\"p\":" + string(payload) + "}\n"
	if string(all) != want {
		t.Fatalf("wrote %.60q…, want %.60q…", all, want)
	}
	// The queued line goes with the head of the large one, or alone
	// when its caller takes the turn first; the payload is a write of
	// its own.
	if n := len(g.writes); (n != 4 && n != 5) || !bytes.Equal(g.writes[n-2], payload) {
		t.Fatalf("%d writes, want 4 or 5 with the payload alone in the last but one", n)
	}

	broken := []byte(`"` + string(bytes.Repeat([]byte("y"), minAround)) + "\",\n\"z\"")
	before := len(g.writes)
	if err := p.WriteFrom(around{broken}); err != nil {
		t.Fatal(err)
	}
	if w := g.writes[before:]; len(w) != 1 || bytes.Count(w[0], []byte("\n")) != 1 || !bytes.Contains(w[0], []byte(`", "z"`)) {
		t.Fatalf("payload with a line break: writes %.80q", w)
	}
}
