package router

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
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
	// Policy is the item's own prefix policy (a namespace's prefix for its
	// server); "" follows the policy given to ExposeNames.
	Policy string
	// Prefix replaces Server in the prefixed form ({Prefix}__{Name}); ""
	// is Server (a custom prefix: `prefix: {server: custom}`).
	Prefix string
	// Rename is the exposed name, as written (an override's name): it is
	// never prefixed; another server's conflicting name is prefixed
	// instead, and a clash with a name that cannot move is an error.
	Rename string
}

// CollisionError is a name offered by two servers in a view that cannot
// tell them apart (tool_prefix or prefix never, or a renamed tool).
type CollisionError struct {
	Name             string
	Server1, Server2 string
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("name %q is offered by both %s and %s (tool_prefix or prefix never, or an override's name); "+
		"set tool_prefix to conflict or always, rename one of them, or filter one of them out", e.Name, e.Server1, e.Server2)
}

// policyFixed is the effective policy of a renamed item.
const policyFixed = "fixed"

// ExposeNames assigns the exposed name of each item under policy
// (PrefixAlways, Conflict or Never; "" is Always), each item's
// own Policy, Prefix and Rename taking precedence. The result is parallel
// to items. An item whose exposed name repeats one before it (a server
// listing a name twice) gets "" and must be left out.
//
//   - always: every item is {server}__{name}.
//   - conflict: names offered by more than one server are prefixed, the rest
//     are kept; if a kept name then equals a prefixed one, it is prefixed too.
//   - never: names are kept; a name offered by two servers is a
//     *CollisionError naming both.
//   - renamed (Rename): the new name, kept like never.
//
// Every exposed name is normalised (see Normalize).
func ExposeNames(policy string, items []Item) ([]string, error) {
	n := len(items)
	out := make([]string, n)
	prefix := make([]bool, n)
	pol := make([]string, n)
	base := make([]string, n)
	for i, it := range items {
		p := it.Policy
		if p == "" {
			p = policy
		}
		if p != PrefixNever && p != PrefixConflict {
			p = PrefixAlways
		}
		base[i] = it.Name
		if it.Rename != "" {
			p, base[i] = policyFixed, it.Rename
		}
		pol[i] = p
		prefix[i] = p == PrefixAlways
	}
	servers := map[string]map[string]bool{}
	for i, it := range items {
		if servers[base[i]] == nil {
			servers[base[i]] = map[string]bool{}
		}
		servers[base[i]][it.Server] = true
	}
	for i := range items {
		if pol[i] == PrefixConflict && len(servers[base[i]]) > 1 {
			prefix[i] = true
		}
	}
	name := func(i int) string {
		if prefix[i] {
			p := items[i].Prefix
			if p == "" {
				p = items[i].Server
			}
			return Prefixed(p, items[i].Name)
		}
		return Normalize(base[i])
	}
	movable := func(i int) bool { return !prefix[i] && pol[i] == PrefixConflict }
	fixed := func(i int) bool { return pol[i] == PrefixNever || pol[i] == policyFixed }
	// A kept name may equal another server's prefixed one (server "a" offers
	// "b__c" while "b" offers a colliding "c"): prefix the kept one too,
	// until no such clash is left. Each round prefixes at least one more
	// item, so this ends.
	for {
		owner := map[string]int{}
		clash := false
		for i := range items {
			nm := name(i)
			j, seen := owner[nm]
			if !seen {
				owner[nm] = i
				continue
			}
			if items[j].Server == items[i].Server {
				continue // the same server listed it twice
			}
			switch {
			case movable(j):
				prefix[j], clash = true, true
			case movable(i):
				prefix[i], clash = true, true
			case fixed(i) || fixed(j):
				return nil, &CollisionError{Name: nm, Server1: items[j].Server, Server2: items[i].Server}
			}
		}
		if !clash {
			break
		}
	}
	seen := map[string]bool{}
	for i := range items {
		nm := name(i)
		if seen[nm] {
			continue // duplicates (a server listing a name twice) are dropped
		}
		seen[nm] = true
		out[i] = nm
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
func admitted(filters []Filter, server, name string, extra ...string) bool {
	if len(filters) == 0 {
		return true
	}
	full := server + Separator + name
	cands := append([]string{name, full}, extra...)
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
