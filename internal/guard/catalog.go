package guard

import (
	"regexp"
	"slices"
	"strings"
)

// CatalogTool is one tool of an aggregated catalog: its server and the
// name the server gave it.
type CatalogTool struct {
	Server, Name, Description string
}

// Shadowing is a finding over a catalog. Rule "collision": Tool's name is
// also a tool of Other. Rule "names-other-tool": Tool's description names
// Other's distinctive tool Named.
type Shadowing struct {
	Rule   string
	Server string
	Tool   string
	Other  string
	Named  string
}

// distinctive: a name with a separator, a digit or an inner capital, and 6
// bytes or more, that a description naming it means the tool (not "search").
var distinctiveName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*([_\-.][A-Za-z0-9]+|[a-z0-9][A-Z][A-Za-z0-9]*)+$`)

func distinctive(name string) bool { return len(name) >= 6 && distinctiveName.MatchString(name) }

// CheckCatalog finds, over every server's tools, names two servers share
// (one finding per tool that shares it) and descriptions that name another
// server's distinctive tool as a whole word. A server's own tools never
// count against it. Findings are sorted by server, tool, rule.
func CheckCatalog(tools []CatalogTool) []Shadowing {
	byName := map[string][]string{} // tool name -> servers
	for _, t := range tools {
		if !slices.Contains(byName[t.Name], t.Server) {
			byName[t.Name] = append(byName[t.Name], t.Server)
		}
	}
	var out []Shadowing
	for _, t := range tools {
		for _, other := range byName[t.Name] {
			if other != t.Server {
				out = append(out, Shadowing{Rule: "collision", Server: t.Server, Tool: t.Name, Other: other, Named: t.Name})
			}
		}
	}
	for name, servers := range byName {
		if !distinctive(name) {
			continue
		}
		for _, t := range tools {
			if slices.Contains(servers, t.Server) || !containsWord(t.Description, name) {
				continue
			}
			for _, other := range servers {
				out = append(out, Shadowing{Rule: "names-other-tool", Server: t.Server, Tool: t.Name, Other: other, Named: name})
			}
		}
	}
	slices.SortFunc(out, func(a, b Shadowing) int {
		return strings.Compare(a.Server+"\x00"+a.Tool+"\x00"+a.Rule+"\x00"+a.Other+"\x00"+a.Named, b.Server+"\x00"+b.Tool+"\x00"+b.Rule+"\x00"+b.Other+"\x00"+b.Named)
	})
	return out
}

// containsWord reports whether word occurs in s with no name character
// (letter, digit, _ or -) on either side.
func containsWord(s, word string) bool {
	isName := func(c byte) bool {
		return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for off := 0; ; {
		i := strings.Index(s[off:], word)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(word)
		if (i == 0 || !isName(s[i-1])) && (end == len(s) || !isName(s[end])) {
			return true
		}
		off = i + 1
	}
}
