package config

import (
	"reflect"
	"slices"
	"strings"
)

// suggestKey returns the key of the schema's mapping at parent (a dotted
// path; a name the user chose may stand in any mapping of names) nearest to
// key, or "" when none is near enough to be a likely typo: at most two
// edits, and fewer than a third of the longer word. A path outside the
// schema (another client's file) gets no suggestion.
func suggestKey(parent, key string) string {
	t := reflect.TypeFor[Config]()
	for seg := range strings.SplitSeq(parent, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case seg == "" && parent == "":
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			i := slices.IndexFunc(fieldsOf(t), func(f schemaField) bool { return f.key == seg })
			if i < 0 {
				return ""
			}
			t = t.Field(fieldsOf(t)[i].index).Type
		default:
			return ""
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	best, bestD := "", 0
	for _, f := range fieldsOf(t) {
		d := editDistance(strings.ToLower(key), f.key)
		if d == 0 {
			continue
		}
		if best == "" || d < bestD {
			best, bestD = f.key, d
		}
	}
	if best == "" || bestD > 2 || 3*bestD > max(len(key), len(best)) {
		return ""
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment) between a and b, in bytes: insertions, deletions,
// substitutions and transpositions of adjacent bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
