package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// readAll returns every event of the stream and the error that ended it.
func readEvents(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func msgEvent(id, data string) Event {
	return Event{Name: "message", ID: id, Data: []byte(data)}
}

var readerTests = []struct {
	name    string
	in      string
	want    []Event
	err     error
	lastID  string
	maxSize int
}{
	// The examples of the WHATWG HTML standard, section 9.2.6.
	{
		name: "spec stock ticker",
		in:   "data: YHOO\ndata: +2\ndata: 10\n\n",
		want: []Event{msgEvent("", "YHOO\n+2\n10")},
		err:  io.EOF,
	},
	{
		name: "spec ids and comments",
		in:   ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
		want: []Event{msgEvent("1", "first event"), msgEvent("", "second event"), msgEvent("", " third event")},
		err:  io.EOF,
	},
	{
		name: "spec empty data and unterminated last block",
		in:   "data\n\ndata\ndata\n\ndata:",
		want: []Event{msgEvent("", ""), msgEvent("", "\n")},
		err:  io.ErrUnexpectedEOF,
	},
	{
		name: "spec space after colon optional",
		in:   "data:test\n\ndata: test\n\n",
		want: []Event{msgEvent("", "test"), msgEvent("", "test")},
		err:  io.EOF,
	},
	{
		name: "spec event types",
		in:   "event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
		want: []Event{
			{Name: "add", Data: []byte("73857293")},
			{Name: "remove", Data: []byte("2153")},
			{Name: "add", Data: []byte("113411")},
		},
		err: io.EOF,
	},
	// Line endings.
	{
		name: "CRLF",
		in:   "event: a\r\ndata: 1\r\ndata: 2\r\n\r\n",
		want: []Event{{Name: "a", Data: []byte("1\n2")}},
		err:  io.EOF,
	},
	{
		name: "CR",
		in:   "event: a\rdata: 1\rdata: 2\r\r",
		want: []Event{{Name: "a", Data: []byte("1\n2")}},
		err:  io.EOF,
	},
	{
		name: "mixed endings",
		in:   "data: 1\r\ndata: 2\rdata: 3\n\r\n",
		want: []Event{msgEvent("", "1\n2\n3")},
		err:  io.EOF,
	},
	{
		name: "CR CR is two lines",
		in:   "data: 1\r\rdata: 2\r\n\n",
		want: []Event{msgEvent("", "1"), msgEvent("", "2")},
		err:  io.EOF,
	},
	{
		name: "BOM skipped once",
		in:   "\xef\xbb\xbfdata: x\n\n",
		want: []Event{msgEvent("", "x")},
		err:  io.EOF,
	},
	{
		name: "second BOM is part of the field name",
		in:   "\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n",
		err:  io.EOF,
	},
	// Fields.
	{
		name:   "id carries over and no-data events update it",
		in:     "id: 7\ndata: a\n\ndata: b\n\nid: 9\n\nretry: 1500\n\ndata: c\n\n",
		want:   []Event{msgEvent("7", "a"), msgEvent("7", "b"), {Name: "message", ID: "9", Data: []byte("c"), Retry: 1500 * time.Millisecond}},
		err:    io.EOF,
		lastID: "9",
	},
	{
		name:   "id with NUL ignored",
		in:     "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
		want:   []Event{msgEvent("1", "a"), msgEvent("1", "b")},
		err:    io.EOF,
		lastID: "1",
	},
	{
		name: "bad retry ignored",
		in:   "retry: 10\nretry: 1x\nretry: -5\nretry:\nretry: 99999999999999999999999\ndata: a\n\n",
		want: []Event{{Name: "message", Data: []byte("a"), Retry: 10 * time.Millisecond}},
		err:  io.EOF,
	},
	{
		name: "unknown fields and empty event name",
		in:   "foo: bar\nevent:\nevent\ndata: a\n\n",
		want: []Event{msgEvent("", "a")},
		err:  io.EOF,
	},
	{
		name: "event name reset after dispatch",
		in:   "event: x\ndata: a\n\ndata: b\n\n",
		want: []Event{{Name: "x", Data: []byte("a")}, msgEvent("", "b")},
		err:  io.EOF,
	},
	{
		name: "event without data skipped",
		in:   "event: x\n\ndata: b\n\n",
		want: []Event{msgEvent("", "b")},
		err:  io.EOF,
	},
	{
		name: "value keeps further colons and spaces",
		in:   "data:  a: b \n\n",
		want: []Event{msgEvent("", " a: b ")},
		err:  io.EOF,
	},
	// Endings.
	{name: "empty stream", in: "", err: io.EOF},
	{name: "only comments", in: ": hi\n:\n", err: io.EOF},
	{name: "ends after field line", in: "data: a\n", err: io.ErrUnexpectedEOF},
	{name: "ends mid line", in: "data: a\n\ndat", want: []Event{msgEvent("", "a")}, err: io.ErrUnexpectedEOF},
	{name: "ends after id line", in: "id: 3\n", err: io.ErrUnexpectedEOF},
	// Limits.
	{
		name:    "data exactly at limit",
		in:      "data: 12345\ndata: 67\n\n",
		want:    []Event{msgEvent("", "12345\n67")},
		err:     io.EOF,
		maxSize: 8,
	},
	{
		name:    "data over limit",
		in:      "data: 12345\ndata: 678\n\ndata: x\n\n",
		err:     ErrEventTooLarge,
		maxSize: 8,
	},
	{
		name:    "long comment line",
		in:      ": " + strings.Repeat("x", 100) + "\n\ndata: x\n\n",
		err:     ErrEventTooLarge,
		maxSize: 8,
	},
	{
		name:    "long line spanning reads",
		in:      "data: ok\n\n" + strings.Repeat("y", 3*readBufSize),
		want:    []Event{msgEvent("", "ok")},
		err:     ErrEventTooLarge,
		maxSize: readBufSize,
	},
}

func TestReader(t *testing.T) {
	for _, tt := range readerTests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "byte"} {
				var src io.Reader = strings.NewReader(tt.in)
				if mode == "byte" {
					src = iotest.OneByteReader(src)
				}
				r := NewReader(src, tt.maxSize)
				got, err := readEvents(r)
				if !errors.Is(err, tt.err) {
					t.Errorf("%s: err = %v; want %v", mode, err, tt.err)
				}
				if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
					t.Errorf("%s: events =\n%q\nwant\n%q", mode, got, tt.want)
				}
				if id := r.LastEventID(); id != tt.lastID && tt.lastID != "" {
					t.Errorf("%s: LastEventID = %q; want %q", mode, id, tt.lastID)
				}
				if _, err2 := r.Next(); !errors.Is(err2, tt.err) {
					t.Errorf("%s: Next after end = %v; want sticky %v", mode, err2, tt.err)
				}
			}
		})
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)), 0)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next = %q, %v", ev.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next err = %v; want %v", err, boom)
	}
}

func TestReaderDataOwned(t *testing.T) {
	r := NewReader(strings.NewReader("data: one\n\ndata: two\n\n"), 0)
	a, _ := r.Next()
	b, _ := r.Next()
	if string(a.Data) != "one" || string(b.Data) != "two" {
		t.Fatalf("got %q, %q", a.Data, b.Data)
	}
}

func TestWriterFormat(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Event("", "", []byte("hello")))
	must(w.Event("message", "42", []byte("a\nb")))
	must(w.Event("x", "", nil))
	must(w.Event("", "", []byte("1\r\n2\r3\n")))
	must(w.Comment("ping"))
	must(w.Retry(2500 * time.Millisecond))
	const want = "data: hello\n\n" +
		"event: message\nid: 42\ndata: a\ndata: b\n\n" +
		"event: x\ndata: \n\n" +
		"data: 1\ndata: 2\ndata: 3\ndata: \n\n" +
		": ping\n\n" +
		"retry: 2500\n\n"
	if got := buf.String(); got != want {
		t.Errorf("stream =\n%q\nwant\n%q", got, want)
	}
	for _, bad := range [][2]string{{"a\nb", ""}, {"", "1\r"}} {
		if err := w.Event(bad[0], bad[1], nil); err == nil {
			t.Errorf("Event(%q, %q) succeeded; want error", bad[0], bad[1])
		}
	}
	if err := w.Retry(-time.Second); err == nil {
		t.Error("Retry(-1s) succeeded; want error")
	}
	if got := buf.String(); got != want {
		t.Errorf("rejected calls wrote %q", strings.TrimPrefix(got, want))
	}
}

func TestRoundTrip(t *testing.T) {
	events := []Event{
		{Name: "message", ID: "1", Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)},
		{Name: "endpoint", ID: "1", Data: []byte("/message?sessionId=abc")},
		{Name: "message", ID: "2", Data: []byte("")},
		{Name: "message", ID: "2", Data: []byte("\n\nmulti\nline\n")},
		{Name: "message", ID: "3", Data: []byte(" leading space")},
		{Name: "message", ID: "3", Data: bytes.Repeat([]byte("z"), 100_000)},
		{Name: "a:b", ID: "x y", Data: []byte(":colon\n: comment-like")},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	prevID := ""
	for _, ev := range events {
		id := ev.ID
		if id == prevID {
			id = "" // exercise carry-over
		}
		prevID = ev.ID
		if err := w.Event(ev.Name, id, ev.Data); err != nil {
			t.Fatal(err)
		}
		if err := w.Comment("keep-alive"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readEvents(NewReader(&buf, 0))
	if err != io.EOF {
		t.Fatalf("err = %v", err)
	}
	if !reflect.DeepEqual(got, events) {
		t.Fatalf("round trip mismatch:\n%.200q\nwant\n%.200q", got, events)
	}
}

// unwrapWriter hides the recorder's Flush behind Unwrap, as middleware does.
type unwrapWriter struct{ http.ResponseWriter }

func (w unwrapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestWriterFlushes(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(unwrapWriter{rec})
	if err := w.Event("", "", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed {
		t.Error("event not flushed through Unwrap")
	}
}

// EventNoFlush leaves its event buffered; Flush (or the next Event)
// sends it.
func TestWriterNoFlush(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(unwrapWriter{rec})
	if err := w.EventNoFlush("message", "", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if rec.Flushed {
		t.Fatal("EventNoFlush flushed")
	}
	if err := w.Flush(); err != nil || !rec.Flushed {
		t.Fatalf("Flush: %v, flushed %v", err, rec.Flushed)
	}
	if got := rec.Body.String(); got != "event: message\ndata: a\n\n" {
		t.Fatalf("body %q", got)
	}
}

type failFlush struct{ bytes.Buffer }

func (*failFlush) FlushError() error { return errors.New("gone") }

func TestWriterStickyError(t *testing.T) {
	var f failFlush
	w := NewWriter(&f)
	if err := w.Event("", "", []byte("a")); err == nil || !strings.Contains(err.Error(), "sse: flush: gone") {
		t.Fatalf("err = %v", err)
	}
	n := f.Len()
	if err := w.Comment("x"); err == nil {
		t.Fatal("write after failure succeeded")
	}
	if f.Len() != n {
		t.Fatal("wrote after failure")
	}
}

func TestWriterConcurrent(t *testing.T) {
	pr, pw := io.Pipe()
	w := NewWriter(pw)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := bytes.Repeat([]byte{byte('a' + i)}, 1000)
			data[500] = '\n'
			for range each {
				if err := w.Event("e", "", data); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); pw.Close() }()
	evs, err := readEvents(NewReader(pr, 0))
	if err != io.EOF {
		t.Fatal(err)
	}
	if len(evs) != writers*each {
		t.Fatalf("got %d events; want %d", len(evs), writers*each)
	}
	for _, ev := range evs {
		c := ev.Data[0]
		want := bytes.Repeat([]byte{c}, 1000)
		want[500] = '\n'
		if !bytes.Equal(ev.Data, want) {
			t.Fatalf("interleaved event: %.80q", ev.Data)
		}
	}
}

func FuzzReader(f *testing.F) {
	for _, tt := range readerTests {
		f.Add([]byte(tt.in), 16)
	}
	f.Add([]byte("data: a\r"), 4)
	f.Add([]byte("data: a\r\n\r"), 1)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		max = max%64 + 1
		if max < 1 {
			max = -max + 1
		}
		whole, errWhole := readEvents(NewReader(bytes.NewReader(in), max))
		for _, ev := range whole {
			if len(ev.Data) > max {
				t.Fatalf("event of %d bytes over limit %d", len(ev.Data), max)
			}
			if ev.Name == "" || ev.Data == nil {
				t.Fatalf("bad event %+v", ev)
			}
		}
		if errWhole != io.EOF && errWhole != io.ErrUnexpectedEOF && errWhole != ErrEventTooLarge {
			t.Fatalf("unexpected error %v", errWhole)
		}
		// Chunking must not change the result.
		bytewise, errByte := readEvents(NewReader(iotest.OneByteReader(bytes.NewReader(in)), max))
		if errByte != errWhole || !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("whole read: %q, %v\nbyte reads: %q, %v", whole, errWhole, bytewise, errByte)
		}
	})
}

func BenchmarkWriterEvent(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"64B", 64}, {"64KiB", 64 << 10}} {
		b.Run(size.name, func(b *testing.B) {
			data := bytes.Repeat([]byte(`{"jsonrpc":"2.0"}`), size.n/17+1)[:size.n]
			w := NewWriter(io.Discard)
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Event("message", "123", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReaderNext(b *testing.B) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	data := bytes.Repeat([]byte("x"), 1024)
	for range 100 {
		w.Event("message", "1", data)
	}
	stream := buf.Bytes()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream), 0)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// recordWriter records each Write it gets (a copy, and where it was).
type recordWriter struct {
	writes [][]byte
	at     []*byte
}

func (r *recordWriter) Write(b []byte) (int, error) {
	r.writes = append(r.writes, bytes.Clone(b))
	r.at = append(r.at, &b[0])
	return len(b), nil
}

// A large event of one line (a JSON message) is written as the format
// says, its data from the caller's own buffer rather than copied into
// the Writer's; one holding line breaks is split into data lines.
func TestWriterLargeEvent(t *testing.T) {
	data := bytes.Repeat([]byte("z"), minDirect)
	for _, flush := range []bool{true, false} {
		var rw recordWriter
		w := NewWriter(&rw)
		var err error
		if flush {
			err = w.Event("message", "7", data)
		} else {
			err = w.EventNoFlush("message", "7", data)
		}
		if err != nil {
			t.Fatal(err)
		}
		var all []byte
		direct := false
		for i, b := range rw.writes {
			all = append(all, b...)
			direct = direct || (len(b) == len(data) && rw.at[i] == &data[0])
		}
		if want := "event: message\nid: 7\ndata: " + string(data) + "\n\n"; string(all) != want {
			t.Fatalf("flush %v: wrote %.40q…, want %.40q…", flush, all, want)
		}
		if !direct {
			t.Errorf("flush %v: the data was copied, not written from its own buffer", flush)
		}
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	two := append(bytes.Clone(data), "\nsecond"...)
	if err := w.Event("", "", two); err != nil {
		t.Fatal(err)
	}
	if want := "data: " + string(data) + "\ndata: second\n\n"; buf.String() != want {
		t.Fatalf("two lines: %.40q…", buf.String())
	}
}
