package guard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system time so far. On a shared,
// loaded machine wall time says more about the neighbours than the code:
// the benchmarks also report MB/s per CPU second ("cpu-MB/s").
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports cpu-MB/s for n bytes a run.
func loop(b *testing.B, n int, f func()) {
	b.SetBytes(int64(n))
	start := cpuTime()
	for b.Loop() {
		f()
	}
	if used := cpuTime() - start; used > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/1e6/used.Seconds(), "cpu-MB/s")
	}
}

// benchText returns n bytes of benign text in the shape of a tool result:
// prose, JSON-ish lines, URLs, numbers and a little non-ASCII, so that
// keyword prefilters and regular expressions see what they see in use.
func benchText(n int) string {
	rng := rand.New(rand.NewPCG(9, 9))
	lines := []string{
		"The deployment of service %d finished at 2026-11-26T12:%02d:00Z with status ok.",
		`{"id": %d, "name": "issue-%02d", "state": "open", "labels": ["bug", "p2"], "user": {"login": "octocat"}}`,
		"See https://github.com/org/repo/pull/%d for the review; build %02d passed all checks.",
		"Der Schlüssel zur Lösung liegt in Abschnitt %d.%02d — siehe oben.",
		"Token refresh scheduled in %d seconds (attempt %02d); no action needed.",
		"| %d | main | passed | 3m%02ds |",
	}
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, lines[rng.IntN(len(lines))]+"\n", rng.IntN(100000), rng.IntN(60))
	}
	return b.String()[:n]
}

var benchSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// BenchmarkDetectors: throughput (MB/s) of each detector over benign text
// at 64 B, 64 KiB and 1 MiB.
func BenchmarkDetectors(b *testing.B) {
	secrets, err := NewSecrets(SecretsConfig{})
	if err != nil {
		b.Fatal(err)
	}
	generic, err := NewSecrets(SecretsConfig{Enable: []string{"generic-api-key"}})
	if err != nil {
		b.Fatal(err)
	}
	pii, err := NewPII(PIIConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []struct {
		name string
		d    Detector
	}{{"hidden", Hidden{}}, {"markup", Markup{}}, {"secrets", secrets}, {"secrets+generic", generic}, {"pii", pii}} {
		for _, size := range benchSizes {
			text := benchText(size.n)
			b.Run(d.name+"/"+size.name, func(b *testing.B) {
				loop(b, len(text), func() { d.d.Scan(text) })
			})
		}
	}
}

// BenchmarkWalk: a tools/call result of one text content item walked with
// every detector (what a call-result hook costs), and Define over one
// tool definition (what pinning costs per listed tool).
func BenchmarkWalk(b *testing.B) {
	secrets, _ := NewSecrets(SecretsConfig{})
	pii, _ := NewPII(PIIConfig{})
	for _, size := range benchSizes {
		doc, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": benchText(size.n)}}})
		b.Run(size.name, func(b *testing.B) {
			loop(b, len(doc), func() {
				if _, err := Walk(doc, 0, Hidden{}, Markup{}, secrets, pii); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	b.Run("Define", func(b *testing.B) {
		for b.Loop() {
			if _, err := Define(json.RawMessage(sumTool)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
