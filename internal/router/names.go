package router

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// Separator joins a server name and an item name: {server}__{name}.
const Separator = "__"

// MaxNameLen is the longest exposed tool or prompt name.
const MaxNameLen = 64

// hashLen is the number of hex digits of the hash that ends a shortened or
// sanitised name.
const hashLen = 8

// ValidName reports whether s matches ^[a-zA-Z0-9_-]{1,64}$.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// Normalize returns s when it is a valid exposed name. Otherwise it returns a
// deterministic valid name: every byte outside [a-zA-Z0-9_-] replaced by
// '_', cut to a readable head, and ended with '_' and the first 8 hex digits
// of the SHA-256 of s, so distinct inputs stay distinct.
func Normalize(s string) string {
	if ValidName(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(s))
	tail := "_" + hex.EncodeToString(sum[:])[:hashLen]
	head := string(b)
	if max := MaxNameLen - len(tail); len(head) > max {
		head = head[:max]
	}
	return head + tail
}

// Prefixed returns the exposed form of name offered by server: {server}__{name},
// normalised.
func Prefixed(server, name string) string { return Normalize(server + Separator + name) }

// Item is one tool or prompt of one server, before naming.
type Item struct {
	Server string // the server's name in the view
	Name   string // the name the server gave it
}

// CollisionError is a name offered by two servers in a view whose policy is
// tool_prefix: never.
type CollisionError struct {
	Name             string
	Server1, Server2 string
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("name %q is offered by both %s and %s (tool_prefix: never); "+
		"set tool_prefix to conflict or always, or filter one of them out", e.Name, e.Server1, e.Server2)
}

// ExposeNames assigns the exposed name of each item under policy
// (config.ToolPrefixAlways, Conflict or Never; "" is Always). The result is
// parallel to items. An item whose exposed name repeats one before it (a
// server listing a name twice) gets "" and must be left out.
//
//   - always: every item is {server}__{name}.
//   - conflict: names offered by more than one server are prefixed, the rest
//     are kept; if a kept name then equals a prefixed one, it is prefixed too.
//   - never: names are kept; a name offered by two servers is a
//     *CollisionError naming both.
//
// Every exposed name is normalised (see Normalize).
func ExposeNames(policy string, items []Item) ([]string, error) {
	out := make([]string, len(items))
	prefix := make([]bool, len(items))
	switch policy {
	case config.ToolPrefixNever:
		first := map[string]string{} // name → server
		for _, it := range items {
			if s, ok := first[it.Name]; ok && s != it.Server {
				return nil, &CollisionError{Name: it.Name, Server1: s, Server2: it.Server}
			} else if !ok {
				first[it.Name] = it.Server
			}
		}
	case config.ToolPrefixConflict:
		servers := map[string]map[string]bool{}
		for _, it := range items {
			if servers[it.Name] == nil {
				servers[it.Name] = map[string]bool{}
			}
			servers[it.Name][it.Server] = true
		}
		for i, it := range items {
			prefix[i] = len(servers[it.Name]) > 1
		}
	default:
		for i := range prefix {
			prefix[i] = true
		}
	}
	name := func(i int) string {
		if prefix[i] {
			return Prefixed(items[i].Server, items[i].Name)
		}
		return Normalize(items[i].Name)
	}
	// A kept name may equal another server's prefixed one (server "a" offers
	// "b__c" while "b" offers a colliding "c"): prefix the kept one too,
	// until no such clash is left. Each round prefixes at least one more
	// item, so this ends.
	for {
		owner := map[string]int{}
		clash := false
		for i := range items {
			n := name(i)
			j, seen := owner[n]
			if !seen {
				owner[n] = i
				continue
			}
			if items[j].Server == items[i].Server {
				continue // the same server listed it twice
			}
			if policy == config.ToolPrefixNever {
				return nil, &CollisionError{Name: n, Server1: items[j].Server, Server2: items[i].Server}
			}
			switch {
			case !prefix[j]:
				prefix[j], clash = true, true
			case !prefix[i]:
				prefix[i], clash = true, true
			}
		}
		if !clash {
			break
		}
	}
	seen := map[string]bool{}
	for i := range items {
		n := name(i)
		if seen[n] {
			continue // duplicates (a server listing a name twice) are dropped
		}
		seen[n] = true
		out[i] = n
	}
	return out, nil
}

// Filter is a tool filter of path.Match globs (a namespace's tools: key).
type Filter struct {
	Allow, Deny []string
}

// Empty reports whether the filter admits everything.
func (f Filter) Empty() bool { return len(f.Allow) == 0 && len(f.Deny) == 0 }

// Admits reports whether a tool passes the filter. Patterns are matched
// against each of names (the tool's own name, {server}__{name} and the name
// it is exposed under): a pattern matches when it matches any of them. The
// tool passes when Allow is empty or an Allow pattern matches, and no Deny
// pattern matches.
func (f Filter) Admits(names ...string) bool {
	match := func(patterns []string) bool {
		for _, p := range patterns {
			for _, n := range names {
				if ok, _ := path.Match(p, n); ok {
					return true
				}
			}
		}
		return false
	}
	if len(f.Allow) > 0 && !match(f.Allow) {
		return false
	}
	return !match(f.Deny)
}

// admitted applies the filters of a server in a view: admitted when the
// server has no filter, or when any one of its filters admits the tool (a
// server reached through several namespaces is visible wherever one of
// them shows it).
func admitted(filters []Filter, server, name string) bool {
	if len(filters) == 0 {
		return true
	}
	full := server + Separator + name
	cands := []string{name, full}
	if p := Normalize(full); p != full {
		cands = append(cands, p)
	}
	for _, f := range filters {
		if f.Admits(cands...) {
			return true
		}
	}
	return false
}

// hasPrefix reports whether an exposed name was formed from server's prefix
// (also when shortening cut into the prefix itself).
func hasPrefix(exposed, server string) bool {
	p := server + Separator
	if head := MaxNameLen - hashLen - 1; len(p) > head {
		p = p[:head]
	}
	return strings.HasPrefix(exposed, p)
}
