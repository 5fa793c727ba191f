package guard

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
)

// genMatch writes a random string that re (parsed) may match: the
// positives of the detection-quality test are generated from each rule's
// own expression at run time (the caller checks the rule matches it).
func genMatch(rng *rand.Rand, re *syntax.Regexp, out *strings.Builder) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && rng.IntN(4) == 0 {
				r = []rune(strings.ToUpper(string(r)))[0]
			}
			out.WriteRune(r)
		}
	case syntax.OpCharClass:
		out.WriteRune(pickRune(rng, re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		out.WriteByte(alnum[rng.IntN(len(alnum))])
	case syntax.OpCapture:
		genMatch(rng, re.Sub[0], out)
	case syntax.OpConcat:
		for _, s := range re.Sub {
			genMatch(rng, s, out)
		}
	case syntax.OpAlternate:
		genMatch(rng, re.Sub[rng.IntN(len(re.Sub))], out)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := re.Min, re.Max
		switch re.Op {
		case syntax.OpStar:
			lo, hi = 0, 6
		case syntax.OpPlus:
			lo, hi = 1, 8
		case syntax.OpQuest:
			lo, hi = 0, 1
		}
		if hi < 0 {
			hi = lo + 8
		}
		n := lo
		if hi > lo {
			n += rng.IntN(min(hi-lo, 6) + 1)
		}
		for range n {
			genMatch(rng, re.Sub[0], out)
		}
	}
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// pickRune picks a rune of the class (pairs lo, hi), preferring letters
// and digits, then printable ASCII, so that samples look like keys.
func pickRune(rng *rand.Rand, pairs []rune) rune {
	in := func(r rune) bool {
		for i := 0; i < len(pairs); i += 2 {
			if r >= pairs[i] && r <= pairs[i+1] {
				return true
			}
		}
		return false
	}
	for range 20 {
		if r := rune(alnum[rng.IntN(len(alnum))]); in(r) {
			return r
		}
	}
	for range 40 {
		if r := rune(0x21 + rng.IntN(0x7e-0x21)); in(r) {
			return r
		}
	}
	i := 2 * rng.IntN(len(pairs)/2)
	return pairs[i] + rune(rng.IntN(int(min(pairs[i+1]-pairs[i], 1000))+1))
}

// genSecret returns a text of the form "<before><secret><after>" that the
// rule's expression matches, or "" after 40 tries.
func genSecret(rng *rand.Rand, re *regexp.Regexp) string {
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return ""
	}
	parsed = parsed.Simplify()
	for range 40 {
		var b strings.Builder
		genMatch(rng, parsed, &b)
		text := fmt.Sprintf("result of the call: %s\n", b.String())
		if re.MatchString(text) {
			return text
		}
	}
	return ""
}
