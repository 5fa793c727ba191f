package guard

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"unicode"
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

// run is a requirement on a text: a run of k or more consecutive bytes
// of class. needRun finds one that every match of a regular expression
// meets, so a window without such a run need not be searched: the
// gitleaks rules' secrets are long runs of a few characters, and their
// keywords' occurrences in prose are not followed by one ("checks. The"
// holds vault-service-token's "s.", no run of 24 letters or digits).
type run struct {
	class *[256]bool
	k     int
}

// minRun is the shortest requirement worth checking.
const minRun = 8

// in reports whether text meets r.
func (r run) in(text string) bool {
	if r.k < minRun {
		return true
	}
	n := 0
	for i := 0; i < len(text); i++ {
		if r.class[text[i]] {
			if n++; n >= r.k {
				return true
			}
		} else {
			n = 0
		}
	}
	return false
}

// needRun is the longest run every match of re holds (k 0: none known).
func needRun(re *regexp.Regexp) run {
	p, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return run{}
	}
	return runOf(p.Simplify()).best
}

// runNeed is what is known of every match of an expression: it holds the
// run best; when pure, it is itself a run of whole (whole.k a lower bound
// of its length; a zero-width match is pure with a nil class).
type runNeed struct {
	best  run
	pure  bool
	whole run
}

func union(a, b *[256]bool) *[256]bool {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	u := new([256]bool)
	for i := range u {
		u[i] = a[i] || b[i]
	}
	return u
}

// classOf marks the bytes of the UTF-8 forms of the runes in ranges
// (pairs, inclusive): any byte from 0x80 on when one is not ASCII.
func classOf(ranges []rune) *[256]bool {
	c := new([256]bool)
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for r := lo; r <= hi && r < utf8.RuneSelf; r++ {
			c[r] = true
		}
		if hi >= utf8.RuneSelf {
			for b := utf8.RuneSelf; b < 256; b++ {
				c[b] = true
			}
		}
	}
	return c
}

// pureRun is the need of an expression whose every match is a run of at
// least k bytes of class.
func pureRun(class *[256]bool, k int) runNeed {
	r := run{class: class, k: k}
	return runNeed{best: r, pure: true, whole: r}
}

func longer(a, b run) run {
	if b.k > a.k {
		return b
	}
	return a
}

func runOf(r *syntax.Regexp) runNeed {
	switch r.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return runNeed{pure: true}
	case syntax.OpLiteral:
		var ranges []rune
		for _, c := range r.Rune {
			ranges = append(ranges, c, c)
			if r.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
					ranges = append(ranges, f, f)
				}
			}
		}
		return pureRun(classOf(ranges), len(r.Rune))
	case syntax.OpCharClass:
		return pureRun(classOf(r.Rune), 1)
	case syntax.OpAnyCharNotNL:
		return pureRun(classOf([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}), 1)
	case syntax.OpAnyChar:
		return pureRun(classOf([]rune{0, unicode.MaxRune}), 1)
	case syntax.OpCapture, syntax.OpPlus:
		return runOf(r.Sub[0])
	case syntax.OpQuest, syntax.OpStar:
		n := runOf(r.Sub[0])
		return runNeed{pure: n.pure, whole: run{class: n.whole.class}}
	case syntax.OpRepeat:
		n := runOf(r.Sub[0])
		if r.Min == 0 {
			n.best = run{}
		}
		n.whole.k *= r.Min
		if n.pure {
			n.best = longer(n.best, n.whole)
		}
		return n
	case syntax.OpConcat:
		// The longest of each sub's own need and of each chain of
		// adjacent pure subs of some length (zero-width ones between
		// them allowed), their classes united, their lengths added.
		out := runNeed{pure: true}
		var chain run
		for _, s := range r.Sub {
			n := runOf(s)
			out.best = longer(out.best, n.best)
			if n.pure {
				out.whole = run{class: union(out.whole.class, n.whole.class), k: out.whole.k + n.whole.k}
			} else {
				out.pure = false
			}
			switch {
			case n.pure && n.whole.k > 0:
				chain = run{class: union(chain.class, n.whole.class), k: chain.k + n.whole.k}
				out.best = longer(out.best, chain)
			case n.pure && n.whole.class == nil: // zero-width
			default:
				chain = run{}
			}
		}
		if !out.pure {
			out.whole = run{}
		}
		return out
	case syntax.OpAlternate:
		out := runOf(r.Sub[0])
		for _, s := range r.Sub[1:] {
			n := runOf(s)
			out.best = run{class: union(out.best.class, n.best.class), k: min(out.best.k, n.best.k)}
			out.whole = run{class: union(out.whole.class, n.whole.class), k: min(out.whole.k, n.whole.k)}
			out.pure = out.pure && n.pure
		}
		return out
	}
	return runNeed{}
}
