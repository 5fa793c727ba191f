package guard

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"unicode/utf8"
)

// Keyword windows: Secrets runs a bounded rule only around its keywords'
// occurrences (Secrets.Scan).

// span is a window of a text: [start, end).
type span struct{ start, end int }

// windows appends to dst where rule r must look in a text of n bytes:
// around each occurrence of its keywords (hits), maxLen and a byte on
// either side, merged; the whole text when r has no keywords, is
// unbounded, or the windows would cover half of it anyway.
func windows(dst []span, r *secretRule, hits [][]int, keywords []string, n int) []span {
	whole := append(dst, span{0, n})
	if len(r.keywords) == 0 || r.maxLen < 0 {
		return whole
	}
	for _, k := range r.keywords {
		for _, p := range hits[k] {
			dst = append(dst, span{max(0, p-r.maxLen-1), min(n, p+len(keywords[k])+r.maxLen+1)})
		}
	}
	slices.SortFunc(dst, func(a, b span) int { return a.start - b.start })
	out := dst[:0]
	covered := 0
	for _, w := range dst {
		if len(out) > 0 && w.start <= out[len(out)-1].end {
			last := &out[len(out)-1]
			if w.end > last.end {
				covered += w.end - last.end
				last.end = w.end
			}
			continue
		}
		out = append(out, w)
		covered += w.end - w.start
	}
	if covered*2 >= n {
		return append(out[:0], span{0, n})
	}
	return out
}

// maxLen is the most bytes a match of re can span, or -1 when a repeat
// is unbounded.
func maxLen(re *regexp.Regexp) int {
	p, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return -1
	}
	return maxLenOf(p.Simplify())
}

func maxLenOf(r *syntax.Regexp) int {
	switch r.Op {
	case syntax.OpLiteral:
		n := 0
		for _, c := range r.Rune {
			n += utf8.RuneLen(c)
			if r.Flags&syntax.FoldCase != 0 {
				n += 2 // a fold may be longer (k -> K, the Kelvin sign)
			}
		}
		return n
	case syntax.OpCharClass:
		if len(r.Rune) == 0 {
			return 0
		}
		return utf8.RuneLen(min(r.Rune[len(r.Rune)-1], utf8.MaxRune))
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxLenOf(r.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return -1
	case syntax.OpRepeat:
		if r.Max < 0 {
			return -1
		}
		n := maxLenOf(r.Sub[0])
		if n < 0 {
			return -1
		}
		return n * r.Max
	case syntax.OpConcat:
		n := 0
		for _, s := range r.Sub {
			m := maxLenOf(s)
			if m < 0 {
				return -1
			}
			n += m
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range r.Sub {
			m := maxLenOf(s)
			if m < 0 {
				return -1
			}
			n = max(n, m)
		}
		return n
	}
	return 0 // empty-width assertions, empty match
}
