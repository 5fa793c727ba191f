package agentruntime

import (
	"errors"
	"fmt"
	"strings"
)

// SplitCommand splits a command line (MCP_SERVER_CMD) into argv the way a
// POSIX shell splits words, and nothing more: no shell runs it, and no
// expansion happens ($VAR, ~, globs, ;, |, > are ordinary characters).
//
//   - unquoted blanks (space, tab, newline) separate words;
//   - '...' keeps everything inside literally;
//   - "..." keeps everything inside, except that a backslash escapes
//     " \ $ ` and newline (a backslash-newline disappears);
//   - outside quotes a backslash escapes the next character (a
//     backslash-newline disappears);
//   - a pair of double quotes, or of single quotes, makes an empty word.
//
// An unbalanced quote or a trailing backslash is an error; so is a line with
// no word at all.
func SplitCommand(s string) ([]string, error) {
	var (
		argv  []string
		word  strings.Builder
		inArg bool // a word has begun (possibly empty, from quotes)
	)
	end := func() {
		if inArg {
			argv = append(argv, word.String())
			word.Reset()
			inArg = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			end()
		case '\\':
			if i+1 >= len(s) {
				return nil, errors.New("command line ends with a lone backslash")
			}
			i++
			if s[i] != '\n' {
				word.WriteByte(s[i])
				inArg = true
			}
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unbalanced single quote at byte %d of the command line", i)
			}
			word.WriteString(s[i+1 : i+1+j])
			inArg = true
			i += j + 1
		case '"':
			start := i
			inArg = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
					if s[i] != '\n' {
						word.WriteByte(s[i])
					}
					continue
				}
				word.WriteByte(s[i])
			}
			if !closed {
				return nil, fmt.Errorf("unbalanced double quote at byte %d of the command line", start)
			}
		default:
			word.WriteByte(c)
			inArg = true
		}
	}
	end()
	if len(argv) == 0 {
		return nil, errors.New("the command line is empty")
	}
	return argv, nil
}
