package agentruntime

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"python server.py", []string{"python", "server.py"}},
		{"  uvx   my-server\t--port 1 \n", []string{"uvx", "my-server", "--port", "1"}},
		{`node "my server.js" --name 'a b'`, []string{"node", "my server.js", "--name", "a b"}},
		{`python -c 'print("hi"); import sys'`, []string{"python", "-c", `print("hi"); import sys`}},
		{`echo "a\"b" "c\\d" "e\xf" "$HOME"`, []string{"echo", `a"b`, `c\d`, `e\xf`, "$HOME"}},
		{`a\ b c\\d \'x`, []string{"a b", `c\d`, "'x"}},
		{`run "" ''`, []string{"run", "", ""}},
		{`x"y"'z'w`, []string{"xyzw"}},
		{"a\\\nb", []string{"ab"}},
		{`cmd ; rm -rf / | cat > out`, []string{"cmd", ";", "rm", "-rf", "/", "|", "cat", ">", "out"}},
		{"héllo wörld", []string{"héllo", "wörld"}},
	} {
		got, err := SplitCommand(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestSplitCommandErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`python "server.py`, "unbalanced double quote at byte 7"},
		{`python 'server.py`, "unbalanced single quote at byte 7"},
		{`a "b\"`, "unbalanced double quote"},
		{`python \`, "lone backslash"},
		{"", "empty"},
		{" \t\n", "empty"},
	} {
		got, err := SplitCommand(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want an error saying %q", c.in, got, err, c.want)
		}
	}
}

// FuzzSplitCommand checks that SplitCommand never panics, and that what it
// returns quotes back to itself: each word single-quoted (a single quote
// inside written as quote, backslash, quote, quote)
// splits to the same words.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"python server.py", `a "b c" 'd e' f\ g`, `"unbalanced`, `x\`, "", `"a\"b"`, "a\\\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv, err := SplitCommand(s)
		if err != nil {
			if argv != nil {
				t.Fatalf("error %v with argv %q", err, argv)
			}
			return
		}
		if len(argv) == 0 {
			t.Fatal("no error and no words")
		}
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		again, err := SplitCommand(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(again, argv) {
			t.Fatalf("requoted %q splits to %q, %v; want %q", quoted, again, err, argv)
		}
	})
}
