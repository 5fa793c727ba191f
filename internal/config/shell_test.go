package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

func TestShellProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		kind shellKind
		what string
	}{
		{"npx -y @upstash/context7-mcp", shellNone, ""},
		{"mcp-remote https://h.example/sse?team=a&env=prod", shellNone, ""},
		{"server --root /data(2024) --glob *.md", shellNone, ""},
		{"${TOOLS}/bin/server --token=${TOKEN:-x} $${literal}", shellNone, ""},
		{"npx -y server\n", shellNone, ""}, // a block scalar's final newline
		{"price $5 a&b", shellNone, ""},
		{"a | b", shellOperator, "|"},
		{"a|b", shellOperator, "|"},
		{"a || b", shellOperator, "||"},
		{"a; b", shellOperator, ";"},
		{"a && b", shellOperator, "&&"},
		{"a &", shellOperator, "&"},
		{"a & b", shellOperator, "&"},
		{"a &>log", shellOperator, "&>"},
		{"a >log", shellOperator, ">"},
		{"a 2>&1", shellOperator, ">&"},
		{"a >> log", shellOperator, ">>"},
		{"a < in", shellOperator, "<"},
		{"a $(b)", shellOperator, "$("},
		{`a "$(b)"`, shellOperator, "$("},
		{"a `b`", shellOperator, "`"},
		{"a\nb", shellOperator, "\n"},
		{`a "x" | b`, shellOperator, "|"}, // operators outrank quotes
		{"a $HOME/x", shellVariable, "$HOME"},
		{`a "$USER_1"`, shellVariable, "$USER_1"},
		{"a ~/x", shellTilde, "~"},
		{"a x~y", shellNone, ""},
		{`a "b c"`, shellQuote, `"`},
		{`a 'b c'`, shellQuote, "'"},
		{`a 'x | y'`, shellQuote, "'"}, // quoted: not an operator
		{`a 'b`, shellUnclosed, "'"},
		{`a "b`, shellUnclosed, `"`},
		{`a "b\"c"`, shellQuote, `"`},
	}
	for _, tt := range tests {
		got := shellProblem(tt.in)
		if got.kind != tt.kind || got.what != tt.what {
			t.Errorf("shellProblem(%q) = %v %q, want %v %q", tt.in, got.kind, got.what, tt.kind, tt.what)
		}
	}
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{`node "my server.js"`, []string{"node", "my server.js"}, true},
		{`a 'b "c"' d`, []string{"a", `b "c"`, "d"}, true},
		{`a "b \"c\" \\ \n"`, []string{"a", `b "c" \ \n`}, true},
		{`a""b ''`, []string{"ab", ""}, true},
		{`C:\tools\x.exe "a b"`, []string{`C:\tools\x.exe`, "a b"}, true},
		{`a "b`, nil, false},
	}
	for _, tt := range tests {
		got, ok := shellWords(tt.in)
		if ok != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("shellWords(%q) = %q %v, want %q %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestImportCommandError: a JSON command is one program; spaces are fine
// in a path, not in a bare program name.
func TestImportCommandError(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"npx", "/opt/My Tools/server", `C:\Program Files\nodejs\npx.cmd`, "${HOME}/bin/server", "/opt/mcp (2024)/server"} {
		if msg := importCommandError(ok, nil); msg != "" {
			t.Errorf("importCommandError(%q) = %q, want none", ok, msg)
		}
	}
	for _, bad := range []string{"npx -y server", "npx server | tee", "~/bin/server", `node "a b.js"`} {
		if msg := importCommandError(bad, []string{"x"}); msg == "" {
			t.Errorf("importCommandError(%q) accepted it", bad)
		}
	}
}

// FuzzCommandLine checks that shellProblem and shellWords never panic, and
// that every list an error suggests decodes, as YAML and as JSON, to the
// argv it stands for.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{
		`node "my server.js" --verbose`, "npx -y server; rm -rf /", "a 'b c' \"d\\\"e\"", "a $(b) `c`",
		"x ${A:-b c} $B ~", "a\tb\nc", `"`, "'a'\"b\"", "- : , [ ] { } # & * ! | > ' % @", "\x00\u2028\ufeff", "a true 12 0x1F 1e3 null ~ .inf <<",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		issue := shellProblem(s)
		words, ok := shellWords(s)
		for _, list := range []func([]string) string{yamlCommand, jsonCommand} {
			msg := commandLineError(s, issue, []string{"extra arg"}, list)
			if (msg == "") != (issue.kind == shellNone) {
				t.Fatalf("shellProblem %v but message %q", issue, msg)
			}
		}
		if !utf8.ValidString(s) {
			return // YAML and JSON can carry only valid UTF-8
		}
		argvs := [][]string{{"sh", "-c", strings.TrimRight(s, " \t\r\n")}}
		if ok && len(words) > 0 {
			argvs = append(argvs, words)
		}
		for _, argv := range argvs {
			var y struct{ Command []yaml.Node }
			if err := yaml.Unmarshal([]byte(yamlCommand(argv)), &y); err != nil || len(y.Command) != len(argv) {
				t.Fatalf("%s decodes to %v (%v), want %q", yamlCommand(argv), y.Command, err, argv)
			}
			for i, n := range y.Command {
				if n.ShortTag() != "!!str" || n.Value != argv[i] {
					t.Fatalf("%s: item %d decodes to %s %q, want the string %q", yamlCommand(argv), i, n.ShortTag(), n.Value, argv[i])
				}
			}
			var j struct {
				Command string
				Args    []string
			}
			if err := json.Unmarshal([]byte("{"+jsonCommand(argv)+"}"), &j); err != nil || !slices.Equal(append([]string{j.Command}, j.Args...), argv) {
				t.Fatalf("{%s} decodes to %q %q (%v), want %q", jsonCommand(argv), j.Command, j.Args, err, argv)
			}
		}
	})
}
