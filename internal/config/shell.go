package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Switchboard never runs a shell: a command is an argv. A list form
// (`command: [a, b]`, `args: [...]`, a JSON "args" array) is passed to the
// program exactly as written, so any byte but NUL is legal there: `a|b`,
// `https://x/?a=1&b=2`, `/data (2024)` and `[sh, -c, "x | y"]` all mean what
// they say. A command written as one string is different: it is split on
// white space, so shell syntax in it (a pipe, `&&`, a redirection, `$(...)`,
// quotes, `$HOME`, `~`) can only mean its author expected a shell, and
// running it without one would do something else. shellProblem finds such
// syntax so the loader can refuse it with the list form to write instead.

// shellKind classifies what shellProblem found.
type shellKind int

const (
	shellNone     shellKind = iota
	shellOperator           // needs a shell to mean anything: | ; && > < $( ` a line break, & ending a word
	shellVariable           // $NAME, which only a shell expands
	shellTilde              // ~ at the start of a word, which only a shell expands
	shellQuote              // quotes, which only a shell removes
	shellUnclosed           // an unclosed quote
)

// shellIssue is the first shell construct of a one-string command line,
// by priority: an operator, then a variable or tilde, then quotes.
type shellIssue struct {
	kind shellKind
	what string // the construct as written: "|", "$HOME", "~", `"`
}

// shellProblem scans a command line written as one string. ${...}
// references (Switchboard's own interpolation) and $${ are not shell
// syntax; nor are '&' inside a word (a URL's query), parentheses or globs,
// which a program given them literally can use as they are.
func shellProblem(s string) shellIssue {
	s = strings.TrimRight(s, " \t\r\n") // a YAML block scalar's final newline
	var op, vr, qu shellIssue
	const (
		bare = iota
		single
		double
	)
	state, wordStart := bare, true
	set := func(p *shellIssue, k shellKind, what string) {
		if p.kind == shellNone {
			*p = shellIssue{k, what}
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch state {
		case single:
			if c == '\'' {
				state = bare
			}
			continue
		case double:
			switch c {
			case '"':
				state = bare
			case '\\':
				i++
			case '`':
				set(&op, shellOperator, "`")
			case '$':
				i = scanDollar(s, i, &op, &vr, set)
			}
			continue
		}
		start := wordStart
		wordStart = false
		switch c {
		case ' ', '\t':
			wordStart = true
		case '\n', '\r':
			set(&op, shellOperator, "\n")
			wordStart = true
		case '\'':
			set(&qu, shellQuote, "'")
			state = single
		case '"':
			set(&qu, shellQuote, `"`)
			state = double
		case '|', ';', '`':
			w := string(c)
			if c != '`' && i+1 < len(s) && s[i+1] == c {
				w += w
			}
			set(&op, shellOperator, w)
		case '<', '>':
			w := string(c)
			if i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&') {
				w += string(s[i+1])
			}
			set(&op, shellOperator, w)
		case '&':
			switch {
			case i+1 < len(s) && (s[i+1] == '&' || s[i+1] == '>'):
				set(&op, shellOperator, s[i:i+2])
			case i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t' || s[i+1] == '\n' || s[i+1] == '\r':
				set(&op, shellOperator, "&")
			}
		case '$':
			i = scanDollar(s, i, &op, &vr, set)
		case '~':
			if start {
				set(&vr, shellTilde, "~")
			}
		}
	}
	switch {
	case op.kind != shellNone:
		return op
	case vr.kind != shellNone:
		return vr
	case state != bare:
		return shellIssue{shellUnclosed, map[int]string{single: "'", double: `"`}[state]}
	}
	return qu
}

// scanDollar looks at the '$' at s[i] and returns the index of the last
// byte it consumed.
func scanDollar(s string, i int, op, vr *shellIssue, set func(*shellIssue, shellKind, string)) int {
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "$${"):
		return i + 2
	case strings.HasPrefix(rest, "${"):
		if end := strings.IndexByte(rest, '}'); end > 0 {
			return i + end
		}
	case strings.HasPrefix(rest, "$("):
		set(op, shellOperator, "$(")
	case len(rest) > 1 && (rest[1] == '_' || 'a' <= rest[1] && rest[1] <= 'z' || 'A' <= rest[1] && rest[1] <= 'Z'):
		n := 2
		for n < len(rest) && (rest[n] == '_' || 'a' <= rest[n] && rest[n] <= 'z' || 'A' <= rest[n] && rest[n] <= 'Z' || '0' <= rest[n] && rest[n] <= '9') {
			n++
		}
		set(vr, shellVariable, rest[:n])
		return i + n - 1
	}
	return i
}

// shellWords splits s as a POSIX shell would split a simple command without
// expansions: on unquoted blanks, removing quotes; inside double quotes a
// backslash escapes \, ", $ and `. Outside quotes a backslash is literal (a
// Windows path). ok is false for an unclosed quote.
func shellWords(s string) (words []string, ok bool) {
	var w strings.Builder
	inWord, state := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case state == '\'':
			if c == '\'' {
				state = 0
			} else {
				w.WriteByte(c)
			}
		case state == '"':
			switch {
			case c == '"':
				state = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`", s[i+1]) >= 0:
				i++
				w.WriteByte(s[i])
			default:
				w.WriteByte(c)
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'' || c == '"':
			state, inWord = c, true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if state != 0 {
		return nil, false
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, true
}

// plainYAML matches list items that need no quotes in a YAML flow sequence.
var plainYAML = regexp.MustCompile(`^[A-Za-z0-9_./=+~-][A-Za-z0-9_./=+~@%-]*$`)

// yamlList renders argv as a YAML flow sequence, quoting where needed: an
// item that would not read back as a string (~, true, 12) is quoted too.
func yamlList(argv []string) string {
	items := make([]string, len(argv))
	for i, a := range argv {
		items[i] = a
		if !plainYAML.MatchString(a) || a == "-" || (&yaml.Node{Kind: yaml.ScalarNode, Value: a}).ShortTag() != "!!str" {
			items[i] = strconv.Quote(a)
		}
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// yamlCommand renders argv as a command key with the list form.
func yamlCommand(argv []string) string { return "command: " + yamlList(argv) }

// jsonString renders s as a JSON string, leaving <, > and & readable.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// jsonCommand renders argv as the "command" and "args" members of a client
// configuration's server entry.
func jsonCommand(argv []string) string {
	s := `"command": ` + jsonString(argv[0])
	if len(argv) > 1 {
		args := make([]string, len(argv)-1)
		for i, a := range argv[1:] {
			args[i] = jsonString(a)
		}
		s += `, "args": [` + strings.Join(args, ", ") + "]"
	}
	return s
}

// commandLineError explains issue, found in the command line s, with the
// argv to write instead, rendered by list (yamlCommand or jsonCommand);
// args are arguments given separately, appended to the words of s. It
// returns "" when issue is empty.
func commandLineError(s string, issue shellIssue, args []string, list func([]string) string) string {
	s = strings.TrimRight(s, " \t\r\n")
	switch issue.kind {
	case shellOperator:
		what := strconv.Quote(issue.what)
		if issue.what == "\n" {
			what = "a line break"
		}
		return fmt.Sprintf("%s needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); "+
			"write the program and its arguments as a list, or to run a shell on purpose: %s",
			what, list([]string{"sh", "-c", s}))
	case shellVariable:
		return fmt.Sprintf("%s is expanded only by a shell, and Switchboard never runs one; write ${%s} (Switchboard expands ${NAME} itself)",
			issue.what, issue.what[1:])
	case shellTilde:
		return `"~" is expanded only by a shell, and Switchboard never runs one; write ${HOME} (Switchboard expands ${NAME} itself)`
	case shellUnclosed:
		return fmt.Sprintf("unclosed %s quote; write the program and its arguments as a list instead", issue.what)
	case shellQuote:
		words, _ := shellWords(s)
		if len(words) == 0 {
			return "quotes are not supported in a command written as one string (no shell parses it); write the program and its arguments as a list"
		}
		return "quotes are not supported in a command written as one string (no shell parses it); write it as " +
			list(append(words, args...))
	}
	return ""
}

// importCommandError checks the "command" of a client configuration's
// server entry, raw as written, whose "args" are args. The command is one
// program, never split; it is refused when it holds shell syntax, or
// several words of which the first is not a path (as in "npx -y server",
// which would run a program named "npx -y server"). It returns "" when
// the command is fine.
func importCommandError(raw string, args []string) string {
	if msg := commandLineError(raw, shellProblem(raw), args, jsonCommand); msg != "" {
		return msg
	}
	words := strings.Fields(raw)
	if len(words) > 1 && !strings.ContainsAny(words[0], `/\`) {
		return fmt.Sprintf(`%s is one program name, not a command line (it is not split on spaces); write %s`,
			jsonString(raw), jsonCommand(append(words, args...)))
	}
	return ""
}
