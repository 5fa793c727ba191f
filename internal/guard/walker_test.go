package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// visits is what the walker hands over: "pointer=value" per string, sorted.
func visits(doc []byte) ([]string, error) {
	var out []string
	w := newWalker(doc)
	defer w.release()
	err := w.run(func(path []byte, s string, start, end int) {
		out = append(out, string(path)+"="+s)
	})
	slices.Sort(out)
	return out, err
}

// decodedVisits is the same by encoding/json (the walk Walk did before the
// walker): decode, then every string but blob and a mimeType's data.
func decodedVisits(doc []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch t := v.(type) {
		case string:
			out = append(out, path+"="+t)
		case []any:
			for i, e := range t {
				walk(e, path+"/"+strconv.Itoa(i))
			}
		case map[string]any:
			_, binary := t["mimeType"]
			for k, e := range t {
				if k == "blob" || k == "data" && binary {
					continue
				}
				walk(e, path+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))
			}
		}
	}
	walk(v, "")
	sort.Strings(out)
	return out, nil
}

// validUTF8 is s with each invalid byte as U+FFFD, as encoding/json reads
// strings (the walker passes them as they are).
func validUTF8(s string) string { return string([]rune(s)) }

var walkerDocs = []string{
	`"plain"`, `""`, `  "spaced" `, `12`, `-0.5e+3`, `true`, `null`, `[]`, `{}`,
	`{"text":"a\nb\t\"q\" \\ \/ \u00e9 \ud83d\ude00 \u0000 \u001b[31m"}`,
	`{"lone":"\ud800 x \udc00 \ud800\u0041"}`,
	`{"a~b/c":"k", "e\u0073c":"key escaped", "":"empty key"}`,
	`{"content":[{"type":"image","data":"QUJD","mimeType":"image/png"},{"type":"x","data":"kept"},{"mimeType":"m","data":{"deep":"gone"}}]}`,
	`{"resource":{"blob":"QUJD","uri":"file:///a","text":"t"}, "data":["x",{"y":"z"}]}`,
	`[["a",["b",[{"c":"d"}]]],1,2.5,-3e2,false,null,"\u2028"]`,
	"{\"bad utf8\":\"a\xffb\xc3\"}",
}

// TestWalker: the walker visits what decoding with encoding/json visits
// (the same strings under the same pointers, blob and a mimeType's data
// left out), and rejects what encoding/json rejects.
func TestWalker(t *testing.T) {
	for _, doc := range walkerDocs {
		got, err := visits([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		for i := range got {
			got[i] = validUTF8(got[i])
		}
		slices.Sort(got)
		want, _ := decodedVisits([]byte(doc))
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", doc, got, want)
		}
	}
	for _, bad := range []string{``, ` `, `{"a":`, `[1,]`, `{"a" 1}`, `{"a":1,}`, `{a:1}`, "\"\x01\"", `01`, `1.`, `-`, `1e`,
		`{"a":1}x`, `"\u12"`, `"\x"`, `tru`, `[1 2]`, `"open`, `{"blob":[1,}`, `{"data":tru,"mimeType":"m"}`} {
		if _, err := visits([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
		if json.Valid([]byte(bad)) {
			t.Errorf("%q is valid JSON: not a bad document", bad)
		}
	}
	deep := strings.Repeat("[", 600) + strings.Repeat("]", 600)
	if _, err := visits([]byte(deep)); !errors.Is(err, errDepth) {
		t.Errorf("600 levels: %v, want %v", err, errDepth)
	}
}

// FuzzWalker: the walker and encoding/json agree on every document (CI
// runs the seeds; go test -fuzz FuzzWalker explores).
func FuzzWalker(f *testing.F) {
	for _, d := range walkerDocs {
		f.Add([]byte(d))
	}
	f.Add([]byte(`{"":[{"":"","":{}}]}`)) // a duplicate member whose last value holds no string
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := visits(doc)
		if errors.Is(err, errDepth) {
			return
		}
		if valid := json.Valid(doc); valid != (err == nil) {
			t.Fatalf("%q: valid %v, walker error %v", doc, valid, err)
		}
		if err != nil {
			return
		}
		if hasDuplicateMembers(doc) {
			return // encoding/json keeps the last of a duplicate member; the walker scans each
		}
		for i := range got {
			got[i] = validUTF8(got[i])
		}
		slices.Sort(got)
		want, err := decodedVisits(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %q\nwant %q", doc, got, want)
		}
	})
}

// hasDuplicateMembers reports whether an object of doc (valid JSON)
// names a member twice (after unescaping, as encoding/json compares them).
func hasDuplicateMembers(doc []byte) bool {
	type frame struct {
		keys      map[string]bool // nil: an array
		expectKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, expectKey: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			}
			stack = stack[:len(stack)-1] // the container ended: a value of its parent
		case string:
			if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].expectKey {
				if stack[n-1].keys[v] {
					return true
				}
				stack[n-1].keys[v] = true
				stack[n-1].expectKey = false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].expectKey = true // a member's value ended
		}
	}
}

// detectorFunc is a Detector of a function.
type detectorFunc func(string) []Finding

func (f detectorFunc) Scan(s string) []Finding { return f(s) }

// TestRewriteInPlace: Rewrite replaces only the strings with findings,
// keeping the document's order, spacing and numbers, escaping what it
// writes; offsets are into the unescaped value.
func TestRewriteInPlace(t *testing.T) {
	secret := detectorFunc(func(s string) []Finding {
		var out []Finding
		for off := 0; ; {
			i := strings.Index(s[off:], "SECRET")
			if i < 0 {
				return out
			}
			out = append(out, Finding{Detector: "secret", Rule: "s", Offset: off + i, Length: 6})
			off += i + 6
		}
	})
	doc := `{ "z": "a\n\"SECRET\" \u00e9 SECRET",  "a": [1.50, "SECRET"], "data": "SECRET", "k": "clean" }`
	r, err := Walk(json.RawMessage(doc), 0, secret)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 4 {
		t.Fatalf("findings: %+v", r.Findings)
	}
	out, err := Rewrite(json.RawMessage(doc), r.Findings, func(f Finding) string { return `<"` + f.Rule + `">` })
	if err != nil {
		t.Fatal(err)
	}
	want := `{ "z": "a\n\"<\"s\">\" é <\"s\">",  "a": [1.50, "<\"s\">"], "data": "<\"s\">", "k": "clean" }`
	if string(out) != want {
		t.Errorf("rewritten:\n%s\nwant:\n%s", out, want)
	}
}

// TestLazyCompile: the package's initialisation compiles no rule set (the
// regular expressions are compiled on first use), so a gateway without
// guards carries none: GODEBUG=inittrace=1 of this test binary reports
// the package's init allocating less than 64 KiB (the markup expressions
// alone took 1.5 MB).
func TestLazyCompile(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := regexp.MustCompile(`(?m)^init github.com/switchboard-mcp/switchboard/internal/guard @.* (\d+) bytes, (\d+) allocs`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init trace of internal/guard in:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n >= 64<<10 {
		t.Errorf("internal/guard's init allocates %d bytes (%s allocs), want < 64 KiB", n, m[2])
	}
	t.Logf("internal/guard's init: %s bytes, %s allocs", m[1], m[2])
}

// TestWalkMemory: a walk allocates next to nothing beside its findings:
// no decoded copy of the document, no lowered copy per detector. A 1 MiB
// text without escapes is read in place (under 64 KiB a walk with all
// four detectors; encoding/json's decode and the secret rules' lowered
// copy took over 3 MiB); one with escapes is unescaped at most once,
// into a pooled buffer.
func TestWalkMemory(t *testing.T) {
	secrets := defaultSecrets(t)
	pii, err := NewPII(PIIConfig{})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", 1<<14)
	for _, c := range []struct {
		name string
		doc  []byte
		max  uint64
	}{
		{"plain", []byte(`{"content":[{"type":"text","text":"` + text + `"}]}`), 64 << 10},
		{"escaped", []byte(`{"content":[{"type":"text","text":"` + strings.ReplaceAll(text, "_", `\n`) + `"}]}`), 1<<20 + 80<<10}, // one copy at most: a GC (or -race) may empty the pool
	} {
		walk := func() {
			if _, err := Walk(c.doc, 0, Hidden{}, Markup{}, secrets, pii); err != nil {
				t.Fatal(err)
			}
		}
		walk() // the rules compiled, the buffer pooled
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const n = 4
		for range n {
			walk()
		}
		runtime.ReadMemStats(&after)
		per := (after.TotalAlloc - before.TotalAlloc) / n
		t.Logf("%s: %d bytes allocated per walk of %d", c.name, per, len(c.doc))
		if per > c.max {
			t.Errorf("%s: %d bytes allocated per walk of %d bytes, want under %d", c.name, per, len(c.doc), c.max)
		}
	}
}
