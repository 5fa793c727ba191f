package stdio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// chunkReader returns its data in reads of random sizes up to n, as a
// pipe does.
type chunkReader struct {
	data []byte
	n    int
	rnd  *rand.Rand
}

func (c *chunkReader) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(b), len(c.data), 1+c.rnd.IntN(c.n))
	copy(b, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

// TestLineReader splits lines short and long (past the reader's own buffer,
// the pooled sizes and a buffer of their own), over reads of every size,
// and reports lines over the limit by their prefix only.
func TestLineReader(t *testing.T) {
	const max = 6 << 20
	var in bytes.Buffer
	var want []string
	add := func(s string) {
		in.WriteString(s)
		in.WriteByte('\n')
		if len(s) > max {
			s = "OVER:" + s[:4096]
		}
		want = append(want, s)
	}
	for _, n := range []int{0, 1, 100, baseRead - 1, baseRead, baseRead + 1, 300 << 10, 1 << 20, 10, 1 << 20, 5 << 20, max, max + 1, 7 << 20, 3} {
		add(strings.Repeat(string(rune('a'+len(want)%26)), n))
	}
	in.WriteString("last line without a newline")
	want = append(want, "last line without a newline")
	for _, chunk := range []int{1 << 10, 64 << 10, 1 << 20} {
		lr := newLineReader(&chunkReader{data: bytes.Clone(in.Bytes()), n: chunk, rnd: rand.New(rand.NewPCG(1, uint64(chunk)))}, max)
		var got []string
		for {
			line, over, err := lr.next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				break
			}
			if over {
				got = append(got, "OVER:"+string(line))
				continue
			}
			got = append(got, string(line))
		}
		if len(got) != len(want) {
			t.Fatalf("reads of up to %d: %d lines, want %d", chunk, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("reads of up to %d: line %d has %d bytes %.20q, want %d %.20q", chunk, i, len(got[i]), got[i], len(want[i]), want[i])
			}
		}
		if &lr.buf[0] != &lr.own[0] {
			t.Errorf("reads of up to %d: the reader holds a large buffer after the stream ended", chunk)
		}
	}
}

// TestLineReaderReusesBuffers: once a long line has been read, the next
// ones of its size allocate nothing (the buffer comes back from the pool).
func TestLineReaderReusesBuffers(t *testing.T) {
	line := append(bytes.Repeat([]byte("x"), 1<<20), '\n')
	src := &repeatReader{line: line}
	lr := newLineReader(src, 16<<20)
	if got, _, err := lr.next(); err != nil || len(got) != 1<<20 {
		t.Fatalf("first line: %d bytes, %v", len(got), err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if got, _, err := lr.next(); err != nil || len(got) != 1<<20 {
			t.Fatalf("line: %d bytes, %v", len(got), err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per 1 MiB line, want none", allocs)
	}
}

// repeatReader returns line over and over, in reads of at most 64 KiB.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(b []byte) (int, error) {
	n := copy(b[:min(len(b), 64<<10)], r.line[r.off:])
	r.off = (r.off + n) % len(r.line)
	return n, nil
}
